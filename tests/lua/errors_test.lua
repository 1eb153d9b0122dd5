-- odp.core.errors: a C module's nil, "ECODE: msg", "ECODE" triple passed on with context (wrap), raised with
-- context (check), and its message without the prefix (text): the one place that knows the prefix's shape.
local T = require("t")
local errors = require("odp.core.errors")
local sys = require("odp.sys")

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

T.test("check raises a structured failure with the context; exit as the code says unless given", function()
  local ok, e = pcall(errors.check, sys.read_file("/nonexistent/odp-errors-test"))
  T.eq(ok, false); T.ok(errors.is_failure(e))
  T.eq(e.code, "ENOTFOUND"); T.eq(e.exit, 3)
  T.ok(not e.message:match("^E%u+: "), "no prefix in a failure's message: " .. e.message)
  ok, e = pcall(errors.check, nil, "EUSAGE: --n must be a number", nil, "odp run")
  T.eq({ e.code, e.message, e.exit }, { "EUSAGE", "odp run: --n must be a number", 2 })
  ok, e = pcall(errors.check, nil, "EIO: gone", "EIO", "RTT read", 1)
  T.eq({ e.message, e.exit }, { "RTT read: gone", 1 })
  T.eq({ errors.check(7, "x") }, { 7, "x" })
end)

T.test("no module strips the prefix by hand: errors.text is the one place", function()
  local root = T.root()
  local p = io.popen("grep -rln --include=*.lua 'E%u+: ' " .. root .. "/lua " .. root .. "/scripts")
  local hits = {}
  for f in p:lines() do if not f:match("/core/errors%.lua$") then hits[#hits + 1] = f:sub(#root + 2) end end
  p:close()
  T.eq(hits, {})
end)

T.done()
