-- odp.core.errors: a C module's nil, "ECODE: msg", "ECODE" triple passed on with context (wrap), raised with
-- context (check), and its message without the prefix (text): the one place that knows the prefix's shape.
-- The exit status is the code's (errors.CODES, the one table; docs/SCRIPTING.md shows it), and no module
-- below the CLI chooses one or prints.
local T = require("t")
local errors = require("odp.core.errors")
local sys = require("odp.sys")
local lualex = require("lualex")

T.test("text drops the ECODE prefix and nothing else", function()
  T.eq(errors.text("ENOTFOUND: m.pte: no such file"), "m.pte: no such file")
  T.eq(errors.text("plain words: kept"), "plain words: kept")
  T.eq(errors.text("EIO"), "EIO", "a bare code is no prefix")
  T.eq(errors.text(nil), "nil")
end)

T.test("wrap puts the context in front and keeps the code; ok values pass unchanged", function()
  T.eq({ errors.wrap("uploading m.pte", nil, "ENOSPC: write failed", "ENOSPC") },
    { nil, "ENOSPC: uploading m.pte: write failed", "ENOSPC" })
  T.eq({ errors.wrap("reading", nil, "EPROTO: bad frame") }, { nil, "EPROTO: reading: bad frame", "EPROTO" },
    "the code comes from the message when not given")
  T.eq({ errors.wrap("reading", nil, "no code at all") }, { nil, "EIO: reading: no code at all", "EIO" })
  T.eq({ errors.wrap("x", 42, "more") }, { 42, "more" })
  -- a real C failure, passed on
  local _, msg, code = errors.wrap("the model", sys.read_file("/nonexistent/odp-errors-test"))
  T.eq(code, "ENOTFOUND")
  T.match(msg, "^ENOTFOUND: the model: ")
end)

T.test("check raises a structured failure with the context; its exit is the code's", function()
  local ok, e = pcall(errors.check, sys.read_file("/nonexistent/odp-errors-test"))
  T.eq(ok, false); T.ok(errors.is_failure(e))
  T.eq(e.code, "ENOTFOUND"); T.eq(e.exit, 3)
  T.ok(not e.message:match("^E%u+: "), "no prefix in a failure's message: " .. e.message)
  ok, e = pcall(errors.check, nil, "EUSAGE: --n must be a number", nil, "odp run")
  T.eq({ e.code, e.message, e.exit }, { "EUSAGE", "odp run: --n must be a number", 2 })
  ok, e = pcall(errors.check, nil, "ECANCELED: interrupted", "ECANCELED", "RTT read")
  T.eq({ e.message, e.exit }, { "RTT read: interrupted", 130 })
  T.eq({ errors.check(7, "x") }, { 7, "x" })
end)

T.test("the exit status is the code's: errors.CODES, one table", function()
  T.eq({ errors.exit_status("EUSAGE"), errors.exit_status("ERUNNER"), errors.exit_status("EMISMATCH"),
    errors.exit_status("ECANCELED"), errors.exit_status("ECONNLOST") }, { 2, 1, 1, 130, 3 })
  T.eq(errors.exit_status("ESOMEDAY"), 3, "a code of another odp version: device/infrastructure, as before")
  T.eq(select(2, pcall(errors.fail, "EMISMATCH", "outputs disagree")).exit, 1)
  -- odp itself exits with it: a model that is not there is EUSAGE, 2
  local odp = os.getenv("ODP") or (T.root() .. "/build/odp")
  local r = assert(require("odp.proc").run { odp, "run", T.root() .. "/scripts/host.lua", "--runner", "/bin/true",
    "--model", "/nonexistent.pte" })
  T.eq(r.status, 2, r.stderr); T.match(r.stderr, "^odp: [^\n]*nonexistent%.pte")
end)

-- The table in docs/SCRIPTING.md ("Errors": | `CODE` | status | meaning |) is errors.CODES, row for row.
T.test("docs/SCRIPTING.md's table of codes is errors.CODES", function()
  local doc = T.read(T.root() .. "/docs/SCRIPTING.md")
  local rows = {}
  for code, status, meaning in doc:gmatch("\n| `(E%u+)` | (%d+) | ([^\n]-) |") do
    rows[#rows + 1] = { code, tonumber(status), meaning }
  end
  T.eq(rows, errors.CODES)
  -- and each status is one odp --help and man odp explain (odp.core.options.EXIT_CODES)
  local explained = {}
  for _, e in ipairs(require("odp.core.options").EXIT_CODES) do explained[e[1]] = true end
  for _, c in ipairs(errors.CODES) do T.ok(explained[c[2]], c[1] .. "'s status " .. c[2] .. " is in EXIT_CODES") end
end)

-- Every code odp raises, returns or records is declared: the C cores' (src/util/err.h) and every literal in a
-- code's place in lua/ and scripts/ (errors.fail("X", ...), code = "X", return "X", a triple's nil, "X: message"
-- and its last element, ..., "X").
T.test("every error code in the sources is in errors.CODES", function()
  local root = T.root()
  local declared, used = {}, {}
  for _, c in ipairs(errors.CODES) do declared[c[1]] = true end
  for name in T.read(root .. "/src/util/err.h"):gmatch("ODP_(E%u+) =") do used[name] = "src/util/err.h" end
  local p = io.popen("find " .. root .. "/lua " .. root .. "/scripts -name '*.lua'")
  for f in p:lines() do
    local toks = lualex.lex(T.read(f))
    for k, tk in ipairs(toks) do
      if tk.t == "str" then
        local prev, prev2 = toks[k - 1], toks[k - 2]
        local code = tk.v:match("^(E%u%u+): ") or tk.v:match("^(E%u%u+)$")
        local in_place = (prev and prev.v == "," and prev2 and prev2.v == "nil") or -- return nil, "ECODE: ..."
          (prev and prev.v == "return") or (prev and prev.v == "," and tk.v:match("^E%u%u+$")) or -- ..., "ECODE"
          (prev and prev.v == "=" and prev2 and prev2.v == "code") or
          (prev and prev.v == "(" and prev2 and prev2.v == "fail")
        if code and in_place then used[code] = f:sub(#root + 2) .. ":" .. tk.line end
      end
    end
  end
  p:close()
  T.ok(used.ECONNLOST and used.ERUNNER and used.EMISMATCH, "the scan sees codes in each of their places")
  local missing = {}
  for code, where in pairs(used) do if not declared[code] then missing[#missing + 1] = code .. " (" .. where .. ")" end end
  table.sort(missing)
  T.eq(missing, {})
end)

-- Library code reports, the CLI presents (docs/architecture.md): no errors.fail/check chooses an exit status
-- (a third argument to fail, a fifth to check), and target/ and flows/ write nothing themselves (print,
-- io.write, io.stdout/io.stderr, io.read): what the user sees goes through the odp.core.ui handed down.

T.test("no exit status chosen below the CLI, and nothing printed in target/ and flows/", function()
  local root = T.root()
  local bad = {}
  local p = io.popen("cd " .. root .. " && find lua/odp scripts -name '*.lua' | sort")
  for rel in p:lines() do
    if rel ~= "lua/odp/core/errors.lua" then
      local toks = lualex.lex(T.read(root .. "/" .. rel))
      for _, c in ipairs(lualex.calls(toks, "errors.fail")) do
        if c.args > 2 then bad[#bad + 1] = ("%s:%d: errors.fail with an exit status"):format(rel, c.line) end
      end
      for _, c in ipairs(lualex.calls(toks, "errors.check")) do
        if c.args > 4 then bad[#bad + 1] = ("%s:%d: errors.check with an exit status"):format(rel, c.line) end
      end
      if rel:match("^lua/odp/target/") or rel:match("^lua/odp/flows/") then
        for k, tk in ipairs(toks) do
          local nxt, field = toks[k + 1], toks[k + 2]
          local prev = toks[k - 1]
          local is_field = prev and prev.t == "op" and (prev.v == "." or prev.v == ":")
          if tk.t == "id" and not is_field and tk.v == "print" and nxt and nxt.v == "(" then
            bad[#bad + 1] = ("%s:%d: print"):format(rel, tk.line)
          elseif tk.t == "id" and not is_field and tk.v == "io" and nxt and nxt.v == "." and field and
            (field.v == "write" or field.v == "stdout" or field.v == "stderr" or field.v == "read") then
            bad[#bad + 1] = ("%s:%d: io.%s"):format(rel, tk.line, field.v)
          end
        end
      end
    end
  end
  p:close()
  T.eq(bad, {})
end)

T.test("the checks see what they look for", function()
  local toks = lualex.lex('errors.fail("EIO", ("a, b"):format(x, y), 3) -- errors.fail("E", "m", 1)\n' ..
    'errors.fail("EUSAGE", f(1, 2)) x.errors.fail(1, 2, 3) errors.check(nil, e, c, "ctx", 1) print "s"')
  local fails = lualex.calls(toks, "errors.fail")
  T.eq({ #fails, fails[1].args, fails[2].args }, { 2, 3, 2 })
  T.eq(lualex.calls(toks, "errors.check")[1].args, 5)
end)

T.test("no module strips the prefix by hand: errors.text is the one place", function()
  local root = T.root()
  local p = io.popen("grep -rln --include=*.lua 'E%u+: ' " .. root .. "/lua " .. root .. "/scripts")
  local hits = {}
  for f in p:lines() do if not f:match("/core/errors%.lua$") then hits[#hits + 1] = f:sub(#root + 2) end end
  p:close()
  T.eq(hits, {})
end)

T.test("report.exit_code: one rule for a run, a sweep and many boards (docs/ci.md)", function()
  local exit_code = require("odp.results.report").exit_code
  local function failed(code) return { ok = false, error = { code = code, exit = errors.exit_status(code) } } end
  local ok = { ok = true }
  T.eq(exit_code {}, 0, "nothing failed")
  T.eq(exit_code { ok, ok }, 0, "every record ok")
  T.eq(exit_code { failed("ENODEV") }, 3, "one run that never reached its board")
  T.eq(exit_code { failed("ERUNNER") }, 1, "one run whose runner crashed")
  T.eq(exit_code { failed("ENODEV"), failed("ECONNLOST"), failed("ETIMEDOUT") }, 3,
    "every point failed for the board's sake: 3, like one run")
  T.eq(exit_code { failed("ERUNNER"), failed("ERUNNER") }, 1, "the runner crashed at every point")
  T.eq(exit_code { ok, failed("ENODEV") }, 1, "some points measured")
  T.eq(exit_code { failed("ERUNNER"), failed("ENODEV") }, 1, "failures of both kinds")
  T.eq(exit_code { { ok = false } }, 1, "a failed record that says nothing")
  T.eq(exit_code { { ok = false, error = { code = "ENOSPC" } } }, 3, "the status of its code when it has no exit")
end)

T.done()
