--- Options declared as data (sysbench's model) and the parser that turns argv into them.
-- A declaration is a list of entries:
--   { "num-executions", "Inferences per runner process", 1, "posint", short = "n" }
--   [1] long name   [2] help text   [3] default (nil = none)   [4] type:
--   "string" | "int" | "posint" | "number" | "bool" (a flag) | "count" (a flag given N times: N; -v -v is 2) |
--   "file" (must exist and be readable) |
--   "outfile" (a FILE odp writes, later: M.check_writable before anything runs, exit 3 as a failed write) |
--   "list" (comma-separated; repeatable) | "choice" (needs choices = {...}) |
--   "size" (bytes: 6291456, 0x600000, 6M, 256K, 1G; the value is an integer)
-- Extra keys: short (one letter), required, choices, metavar, repeat (collect every use into a list),
-- file_after (a choice's values that take a FILE word after them, one odp writes, checked as an outfile's:
-- `--report junit out.xml`; each value is then {name = choice, file = FILE or nil}), implicit (the value of the option given bare: `--sample` is
-- `--sample=4000`; a value then only comes after `=`, and a bare option followed by a word that could be its
-- value is refused rather than that word taken for something else).
-- Parsed values land in a table keyed by the name with dashes turned into underscores.
local errors = require("odp.core.errors")
local sys = require("odp.sys")

local M = {}

--- Options every script gets.
M.global_options = {
  { "format", "Output format", nil, "choice", choices = { "human", "json", "jsonl", "csv" } },
  { "out", "Also write the result to FILE (format from --format or the file's extension)", nil, "outfile",
    metavar = "FILE" },
  { "history", "Also add each run to this history: a file (SQLite) or postgresql://... (default $ODP_HISTORY,\n" ..
    "else ~/.local/share/odp/history.db; docs/history.md)", nil, "string", metavar = "URL" },
  { "no-history", "Add no run to any history", false, "bool" },
  { "commit", "The commit measured, kept with each run in the history (default $GIT_COMMIT, $CI_COMMIT_SHA or\n" ..
    "$GITHUB_SHA)", nil, "string", metavar = "SHA" },
  { "report", "Also report to a lab engine: lava (lava-test-case), junit FILE (JUnit XML); repeatable",
    nil, "choice", choices = { "lava", "junit" }, file_after = { junit = true }, ["repeat"] = true,
    metavar = "lava|junit FILE" },
  { "quiet", "Only errors on stderr; no progress", false, "bool", short = "q" },
  { "verbose", "More detail on stderr; twice (-v -v): also where odp's own time went, by part", false, "count",
    short = "v" },
  { "help", "Show this help", false, "bool", short = "h" },
}

-- What `odp --help` and the man page (lua/odp/cli/man.lua) say beyond the options: one declaration each.
M.EXIT_CODES = {
  { 0, "measured (or the command did what it was asked)" },
  { 1, "the flow ran and the measurement failed (the runner failed, no latency, a failed sweep point)" },
  { 2, "usage: a bad option, value, file or script" },
  { 3, "device or infrastructure: the board, probe or a tool is unreachable or failed" },
  { 130, "interrupted (Ctrl-C); the runner and everything it started are stopped" },
  { 129, "the terminal closed (SIGHUP): as Ctrl-C, then odp ends; its boards are closed (docs/signals.md)" },
  { 143, "SIGTERM: the same as SIGHUP" },
}
M.ENVIRONMENT = {
  { "ODP_PATH", "`:`-separated directories searched first for odp's Lua library, scripts and devices" },
  { "ODP_SSH_PASSPHRASE", "the passphrase of an encrypted SSH key (never on the command line)" },
  { "ODP_JLINK_LIB", "the SEGGER J-Link library (libjlinkarm.so) to load instead of searching for it" },
  { "ANDROID_SERIAL", "the adb device to use when several are attached (as for adb)" },
  { "ANDROID_ADB_SERVER_PORT", "the port of Google's adb server (default 5037), as for adb" },
  { "ADB_SERVER_SOCKET", "the adb server's socket (tcp:HOST:PORT or localabstract:NAME), as for adb" },
  { "ADB_VENDOR_KEYS", "further adb private keys, `:`-separated, as for adb" },
  { "SSH_AUTH_SOCK", "the ssh-agent socket tried for SSH keys" },
  { "XDG_STATE_HOME", "where odp repl keeps its history (default ~/.local/state)" },
  { "ODP_HISTORY", "the results history every run is added to (a file or postgresql://...; off: none)" },
  { "GIT_COMMIT", "the commit measured, kept in the history (also CI_COMMIT_SHA, GITHUB_SHA; --commit wins)" },
  { "GITHUB_STEP_SUMMARY", "set by GitHub Actions: odp appends a Markdown summary of its results to that file" },
  { "LAVA_JOB_ID", "set by LAVA: copied into every record as lava_job_id (--boards lava, docs/lava/README.md)" },
}
M.FILES = {
  { "runs/<id>/", "each run's runner stdout, stderr and result.json (--runs-dir)" },
  { "~/.local/share/odp/history.db", "the results history (SQLite; --history, ODP_HISTORY; `odp history`)" },
  { "~/.ssh/config", "ssh_config aliases for --host (--ssh-config FILE, or none)" },
  { "~/.ssh/known_hosts", "SSH host keys checked on every connection (--known-hosts)" },
  { "~/.android/adbkey", "the adb RSA key (created when absent), with adbkey.pub" },
  { "PREFIX/share/odp/", "the installed Lua library, scripts and device files" },
}

local function key(name) return (name:gsub("-", "_")) end
-- an option that takes no value: a bool, or a count of its uses
local function flag(o) return o[4] == "bool" or o[4] == "count" end

--- A copy of option entry o that is not required (a value another source gives: a swept -p, a lab file).
function M.optional(o)
  if not o.required then return o end
  local copy = {}
  for k, v in pairs(o) do copy[k] = v end
  copy.required = nil
  return copy
end

local function usage(msg) errors.fail("EUSAGE", msg) end

-- Edit distance between a and b (optimal string alignment: a swap of two neighbours is one edit, as typos go).
local function distance(a, b)
  local prev2, prev, cur = {}, {}, {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    cur = { [0] = i }
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
      if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        cur[j] = math.min(cur[j], prev2[j - 2] + 1)
      end
    end
    prev2, prev = prev, cur
  end
  return prev[#b]
end

--- The known name closest to name, or nil when none is close enough to be what was meant: what an unknown
-- name's error suggests. known: a list or a set {name = true}. Dashes and underscores are the same letter,
-- and a name that contains a known one or is contained in it (cpu_threads, threads) is close.
function M.closest(name, known)
  local list = {}
  for k, v in pairs(known) do list[#list + 1] = type(k) == "string" and k or v end
  table.sort(list)
  local want = tostring(name):gsub("-", "_"):lower()
  local best, best_d, best_raw
  for _, k in ipairs(list) do
    local have = k:gsub("-", "_"):lower()
    local raw = distance(want, have)
    local d = raw
    if #have >= 4 and #want >= 4 and (want:find(have, 1, true) or have:find(want, 1, true)) then
      d = math.min(d, 1)
    end
    -- a tie goes to the fewer edits: sample_overhed is sample_overhead misspelt, not sample with more
    if d <= math.max(1, math.min(3, #want // 3)) and (not best_d or d < best_d or (d == best_d and raw < best_raw)) then
      best, best_d, best_raw = k, d, raw
    end
  end
  return best
end

--- Refuses a name nothing consumes: EUSAGE, exit 2, one line "<what> NAME is not <where>; did you mean X?"
-- (else the known names when they are few, else how to list them). o: prefix (how names are written: "--"),
-- list (where the names are listed: "see --help"), note (what else the user may have meant).
function M.unknown(what, name, known, where, o)
  o = o or {}
  local prefix = o.prefix or ""
  local near = M.closest(name, known)
  local hint
  if near then
    hint = ("did you mean %s%s?"):format(prefix, near)
  else
    local list = {}
    for k, v in pairs(known) do list[#list + 1] = prefix .. (type(k) == "string" and k or v) end
    table.sort(list)
    hint = #list == 0 and "it takes none" or #list <= 12 and ("known: " .. table.concat(list, ", ")) or o.list
  end
  usage(("%s %s%s is not %s%s%s"):format(what, prefix, tostring(name), where, hint and ("; " .. hint) or "",
    o.note and (" (" .. o.note .. ")") or ""))
end

local UNITS = { k = 1024, m = 1024 * 1024, g = 1024 * 1024 * 1024 }

--- A size in bytes: an integer, or a string 6291456, 0x600000, 6M, 256K, 1G (KiB/MiB/GiB; `_` allowed).
-- -> integer | nil when it is not one, or not one a signed 64-bit integer holds (tonumber(s, 16) and integer
-- products wrap silently: 0x10000000000600000 read as 0x600000).
function M.size(v)
  if math.type(v) == "integer" then return v end
  if type(v) ~= "string" then return nil end
  local t = v:gsub("_", "")
  local digits = t:match("^0[xX]0*(%x*)$")
  if digits then
    if #digits > 15 and not (#digits == 16 and digits:match("^[0-7]")) then return nil end
    return (#digits > 0 or #t > 2) and tonumber("0" .. digits, 16) or nil
  end
  if t:match("^%d+$") then return math.tointeger(tonumber(t)) end
  local d, u = t:match("^(%d+)([kKmMgG])i?[bB]?$")
  local n, unit = math.tointeger(tonumber(d or "")), UNITS[(u or ""):lower()]
  return n and n <= math.maxinteger // unit and n * unit or nil
end

--- Whether odp could write path later (--out, --etdump: written after the measuring), found before anything
--- runs: a file of the name it writes first beside it (sys.write_file writes PATH.tmp.PID, then renames) is
--- made and removed. Raises the one line the write would have failed with (exit 3).
function M.check_writable(path)
  local st = sys.stat(path)
  if st and st.type == "dir" then errors.fail("EIO", ("cannot write %s: it is a directory"):format(path)) end
  local probe = ("%s.tmp.%d"):format(path, sys.getpid())
  local f, err = io.open(probe, "wb")
  if not f then errors.fail("EIO", ("cannot write %s: %s"):format(path, (err:gsub("^.-: ([^:]+)$", "%1")))) end
  f:close()
  os.remove(probe)
end

local function convert(opt, raw)
  local name, typ = opt[1], opt[4] or "string"
  if typ == "int" or typ == "posint" then
    local v = math.tointeger(tonumber(raw))
    if not v then usage(("--%s expects an integer, got '%s'"):format(name, raw)) end
    if typ == "posint" and v < 1 then usage(("--%s must be a positive integer, got %s"):format(name, raw)) end
    return v
  elseif typ == "number" then
    local v = tonumber(raw)
    if not v or v ~= v then usage(("--%s expects a number, got '%s'"):format(name, raw)) end
    return v
  elseif typ == "choice" then
    for _, c in ipairs(opt.choices) do if c == raw then return raw end end
    local near = M.closest(raw, opt.choices)
    usage(("--%s must be one of %s, got '%s'%s"):format(name, table.concat(opt.choices, "|"), raw,
      near and ("; did you mean " .. near .. "?") or ""))
  elseif typ == "file" then
    local f = io.open(raw, "rb")
    if not f then usage(("--%s: cannot read '%s'"):format(name, raw)) end
    f:close()
    return raw
  elseif typ == "outfile" then
    M.check_writable(raw)
    return raw
  elseif typ == "size" then
    local v = M.size(raw)
    if not v then usage(("--%s: '%s' is not a size (0x600000, 6291456, 6M)"):format(name, raw)) end
    return v
  elseif typ == "list" then
    local out = {}
    for item in (raw .. ","):gmatch("([^,]*),") do if item ~= "" then out[#out + 1] = item end end
    return out
  end
  return raw
end

-- parsed opts -> the set of keys the command line gave (the rest are defaults): M.given
local given_by = setmetatable({}, { __mode = "k" })

--- Parses argv (a list of strings) against the declarations (lists of entries, in order).
-- Returns opts (defaults filled in) and rest (the words after "--", or positional words).
function M.parse(argv, ...)
  local decls, by_long, by_short = {}, {}, {}
  for _, list in ipairs({ ... }) do
    for _, o in ipairs(list) do
      decls[#decls + 1] = o
      by_long[o[1]] = o
      if o.short then by_short[o.short] = o end
    end
  end
  local opts, rest, seen = {}, {}, {}
  local i = 1
  local function value_for(o, inline)
    if inline then return inline end
    i = i + 1
    local v = argv[i]
    if v == nil then usage(("--%s needs a value"):format(o[1])) end
    return v
  end
  local function set(o, raw)
    local k = key(o[1])
    if o[4] == "bool" then
      opts[k] = true
    elseif o[4] == "count" then
      opts[k] = (opts[k] or 0) + 1
    elseif o[4] == "list" or o["repeat"] then
      opts[k] = opts[k] or {}
      local v = convert(o, raw)
      if o.file_after then
        if o.file_after[v] and argv[i + 1] == nil then usage(("--%s %s needs a FILE"):format(o[1], v)) end
        local file = o.file_after[v] and value_for(o) or nil
        if file then M.check_writable(file) end -- a report odp writes at the end, like an outfile
        v = { { name = v, file = file } }
      end
      if type(v) == "table" then
        for _, x in ipairs(v) do table.insert(opts[k], x) end
      else
        table.insert(opts[k], v)
      end
    else
      if seen[k] then usage(("--%s given twice"):format(o[1])) end
      opts[k] = convert(o, raw)
    end
    seen[k] = true
  end
  while i <= #argv do
    local a = argv[i]
    if a == "--" then
      table.move(argv, i + 1, #argv, 1, rest)
      break
    end
    local long, inline = a:match("^%-%-([^=]+)=(.*)$")
    long = long or a:match("^%-%-(.+)$")
    if long then
      local o = by_long[long]
      if not o and long:sub(1, 3) == "no-" and by_long[long:sub(4)] and flag(by_long[long:sub(4)]) then
        opts[key(long:sub(4))] = false
        seen[key(long:sub(4))] = true
      elseif not o then
        local near = M.closest(long, by_long)
        usage(("unknown option --%s (%ssee --help)"):format(long, near and ("did you mean --" .. near .. "? ") or ""))
      elseif flag(o) then
        if inline then usage(("--%s takes no value"):format(long)) end
        set(o)
      elseif o.implicit ~= nil and not inline then
        local nxt = argv[i + 1]
        if nxt and nxt:match("^%d") then
          usage(("--%s takes its value after '=': --%s=%s"):format(long, long, nxt))
        end
        set(o, tostring(o.implicit))
      else
        set(o, value_for(o, inline))
      end
    elseif a:match("^%-%a") then
      local letter, attached = a:sub(2, 2), a:sub(3)
      local o = by_short[letter]
      if not o then
        local near = #a > 2 and M.closest(a:sub(2), by_long) -- -cpu_threads: a long option with one dash?
        usage(("unknown option -%s (%ssee --help)"):format(letter, near and ("did you mean --" .. near .. "? ") or ""))
      end
      if flag(o) then
        if attached ~= "" then usage(("-%s takes no value"):format(letter)) end
        set(o)
      else
        set(o, value_for(o, attached ~= "" and attached or nil))
      end
    else
      rest[#rest + 1] = a
    end
    i = i + 1
  end
  if not opts.help then
    for _, o in ipairs(decls) do
      local k = key(o[1])
      if opts[k] == nil then
        if o.required then usage(("--%s is required (see --help)"):format(o[1])) end
        if o[3] ~= nil then opts[k] = o[3] end
      end
    end
  end
  given_by[opts] = seen
  return opts, rest
end

--- The keys of opts (a table M.parse returned) the command line gave, as a set; the others are defaults. What
-- decides whether a command-line value wins over a lab file's (docs/SCRIPTING.md, "Where a value comes from").
function M.given(opts) return given_by[opts] or {} end

--- Parses a command's argv (cmd = {usage, description, options}: an odp.cli.commands module) with the global
--- options. With --help it prints the generated help and returns nil: the command then returns 0.
function M.parse_command(cmd, argv)
  local opts, rest = M.parse(argv, cmd.options, M.global_options)
  if opts.help then
    print(M.help(cmd.usage, cmd.description, cmd.options, M.global_options))
    return nil
  end
  return opts, rest
end

--- The defaults of lists of declarations, keyed as parse keys them (what parse fills for an empty argv,
-- required options left out): the options of a run a script asks for as a table (board:profile{}).
function M.defaults(...)
  local o = {}
  for _, list in ipairs({ ... }) do
    for _, opt in ipairs(list) do o[key(opt[1])] = opt[3] end
  end
  return o
end

--- Copies the string keys of from into into, dashes turned into underscores as parse keys them. -> into
function M.merge(into, from)
  for k, v in pairs(from or {}) do
    if type(k) == "string" then into[key(k)] = v end
  end
  return into
end

local function placeholder(o)
  if flag(o) then return "" end
  if o.implicit ~= nil then return "[=" .. (o.metavar or "VALUE") .. "]" end
  if o.metavar then return " " .. o.metavar end
  if o[4] == "choice" then return " " .. table.concat(o.choices, "|") end
  local t = o[4] or "string"
  return " " .. ((t == "posint" or t == "int") and "N" or t == "number" and "X" or t == "list" and "A,B,..."
    or (t == "file" or t == "outfile") and "FILE" or "VALUE")
end

--- One declaration as --help and the man page show it: {short = "-n" | nil, long = "--name N", help = text}.
function M.describe(o)
  local help = o[2] or ""
  if o.required then help = help .. " (required)" end
  if o[3] ~= nil and not flag(o) then help = help .. (" [default: %s]"):format(tostring(o[3])) end
  return { short = o.short and ("-" .. o.short) or nil, long = "--" .. o[1] .. placeholder(o), help = help }
end

-- An option's help as lines of at most width characters (a longer word stands alone; a line break in the
-- declaration is a space): continuation lines start under the description column, not at the terminal's edge.
local HELP_WIDTH = 110
local function wrap(text, width)
  local out, line = {}, ""
  for word in text:gmatch("%S+") do
    if line ~= "" and #line + 1 + #word > width then
      out[#out + 1], line = line, word
    else
      line = line == "" and word or (line .. " " .. word)
    end
  end
  out[#out + 1] = line
  return out
end

--- The generated --help text.
function M.help(usage_line, description, ...)
  local lines, rows, width = { "usage: " .. usage_line, "" }, {}, 0
  if description and description ~= "" then
    lines[#lines + 1] = description
    lines[#lines + 1] = ""
  end
  for gi, list in ipairs({ ... }) do
    rows[gi] = {}
    for _, o in ipairs(list) do
      local d = M.describe(o)
      local left = (d.short and (d.short .. ", ") or "    ") .. d.long
      rows[gi][#rows[gi] + 1] = { left, d.help }
      width = math.max(width, #left)
    end
  end
  local titles = { "Options:", "Common options:" }
  local indent = (" "):rep(width + 4)
  for gi, group in ipairs(rows) do
    if #group > 0 then
      lines[#lines + 1] = titles[math.min(gi, 2)]
      for _, r in ipairs(group) do
        local text = wrap(r[2], HELP_WIDTH - #indent)
        lines[#lines + 1] = ("  %-" .. width .. "s  %s"):format(r[1], text[1] or "")
        for i = 2, #text do lines[#lines + 1] = indent .. text[i] end
      end
      lines[#lines + 1] = ""
    end
  end
  return table.concat(lines, "\n")
end

return M
