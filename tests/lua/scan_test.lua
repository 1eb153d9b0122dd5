-- odp.scan: the C iteration-line scanner under odp.parse.executorch (src/parse/scan.c).
local T = require("t")
local scan = require("odp.scan")
local lpeg = require("lpeg")

-- The spec as LPeg (what the parser's grammar matched before the scanner took these lines): an iteration
-- line is PREFIX? "Iteration " int " of " int ":" sp* NUM sp* "ms" ...; PREFIX as in executorch.lua.
local P, R, S, C = lpeg.P, lpeg.R, lpeg.S, lpeg.C
local digit, sp, notnl = R"09", S" \t", 1 - P"\n"
local ts = digit^1 * ":" * digit^1 * ":" * digit^1 * "." * digit^1
local fname, fn, tag = (1 - S":]\n")^1, (notnl - P"()]")^0, (1 - S": (\n")^1
local posix = S"DIEFW" * sp * (ts * sp)^-1 * "executorch:" * fname * ":" * digit^1 * "]" * P" "^-1
local arm = S"DIEFW" * sp * "[executorch:" * fname * ":" * digit^1 * sp * fn * "()]" * P" "^-1
local threadtime = digit^2 * "-" * digit^2 * sp^1 * ts * sp^1 * digit^1 * sp^1 * digit^1 * sp^1 * S"VDIWEFA" * sp^1
  * tag * sp^0 * ":" * P" "^-1
local brief = S"VDIWEFA" * "/" * tag * sp^0 * ("(" * sp^0 * digit^1 * ")")^-1 * ":" * P" "^-1
local numtext = S"+-"^-1 * (digit^1 * (P"." * digit^0)^-1 + P"." * digit^1) * (S"eE" * S"+-"^-1 * digit^1)^-1
local BODY = "Iteration " * digit^1 * " of " * (C(digit^1) / tonumber) * ":" * sp^0
  * (C(numtext) / function(s) return tonumber(s) + 0.0 end) * sp^0 * "ms"
local SPEC = (posix + arm + threadtime + brief)^-1 * BODY

local function one(line)
  local dest = {}
  local nxt, k, bare, total = scan.iterations(line, 1, dest)
  return k == 1 and dest[1] or nil, total, bare, nxt
end

local function same_number(a, b)
  if a == nil or b == nil then return a == b end
  return math.type(a) == math.type(b) and (a == b or (a ~= a and b ~= b)) and (a ~= 0 or 1 / a == 1 / b)
end

T.test("every prefix spelling, and bare", function()
  local lines = {
    "I 00:00:00.176204 executorch:executor_runner.cpp:779] Iteration 1 of 10: 0.176204 ms",
    "I executorch:executor_runner.cpp:779] Iteration 1 of 10: 0.176204 ms",
    "E\t1:2:3.4\texecutorch:a b.cpp:1]Iteration 1 of 10: 0.176204 ms",
    "I [executorch:arm_executor_runner.cpp:512 main()] Iteration 1 of 10: 0.176204 ms",
    "W [executorch:arm.cpp:1 f(x)()]Iteration 1 of 10: 0.176204 ms",
    "12-02 17:19:00.123  1234  1234 I ExecuTorch: Iteration 1 of 10: 0.176204 ms",
    "12-02\t17:19:00.123 1 2 D Tag\t:Iteration 1 of 10: 0.176204 ms",
    "I/ExecuTorch( 1234): Iteration 1 of 10: 0.176204 ms",
    "V/x:Iteration 1 of 10: 0.176204 ms",
    "Iteration 1 of 10: 0.176204 ms",
    "Iteration 1 of 10:0.176204ms and then anything\r",
  }
  for i, line in ipairs(lines) do
    local ms, total, bare, nxt = one(line)
    T.eq(ms, 0.176204, line)
    T.eq(math.type(ms), "float")
    T.eq(total, 10)
    T.eq(bare, i >= 10 and 1 or 0, "bare " .. line)
    T.eq(nxt, #line + 1)
  end
end)

T.test("not iteration lines", function()
  for _, line in ipairs({
    "", "\n", "Iteration", "Iteration 1 of 10: ms", "Iteration 1 of 10: 1.5", "Iteration 1 of 10 : 1.5 ms",
    "Iteration x of 10: 1.5 ms", "Iteration 1 of : 1.5 ms", "Iteration 1 of 10: 0x10 ms", "Iteration 1 of 10: . ms",
    "Iteration 1 of 10: 1.e ms", "Iteration 1 of 10: inf ms", "Iteration 1 of 10: nan ms", "Iteration 1 of 10: 1,5 ms",
    " Iteration 1 of 10: 1.5 ms", "foo] Iteration 1 of 10: 1.5 ms", "X executorch:x.cpp:1] Iteration 1 of 10: 1.5 ms",
    "I executorch::1] Iteration 1 of 10: 1.5 ms", "I [executorch:a.cpp:1 main() Iteration 1 of 10: 1.5 ms",
    "1-02 17:19:00.123  1 1 I T: Iteration 1 of 10: 1.5 ms", "I/ExecuTorch(12: Iteration 1 of 10: 1.5 ms",
    "I executorch:x.cpp:1] Iteration 1 of 10:\n1.5 ms",
  }) do
    local ms = one(line)
    T.eq(ms, nil, ("%q"):format(line))
    T.eq(lpeg.match(SPEC, line), nil, "spec agrees on " .. ("%q"):format(line))
  end
end)

T.test("numbers convert exactly like tonumber(s) + 0.0; N like tonumber", function()
  for _, num in ipairs({ "1.5", "-0", "-0.0", "+3", ".5", "5.", "1e400", "-1e400", "1e-400", "00012.5000", "0.1",
    "9007199254740993", "123456789012345678901234567890", "1.7976931348623157e308", "4.9e-324", "2.2250738585072014e-308",
    "1e22", "1e23", "12345678901234567890e-5", "1.e5", "0.000000000000000000000000001234", "3.14159265358979323846",
    "9007199254740992.5", "1E+5", "7e-22", "7e-23", ("9"):rep(300) .. ".5", "1" .. ("0"):rep(400) .. "e-400" }) do
    local ms = one("Iteration 1 of 2: " .. num .. " ms")
    T.ok(same_number(ms, tonumber(num) + 0.0), num .. ": got " .. tostring(ms) .. ", want " .. tostring(tonumber(num) + 0.0))
  end
  for _, n in ipairs({ "0", "007", "9223372036854775807", "9223372036854775808", "99999999999999999999" }) do
    local _, total = one("Iteration 1 of " .. n .. ": 1 ms")
    T.ok(same_number(total, tonumber(n)), n .. ": got " .. tostring(total))
  end
end)

T.test("runs: max, bare count, next position, CRLF, no final newline", function()
  local text = "I executorch:r.cpp:1] Iteration 1 of 3: 1.5 ms\r\nIteration 2 of 3: 2.5 ms\n"
    .. "I executorch:r.cpp:1] Iteration 3 of 4: 3.5 ms\nI executorch:r.cpp:1] Model executed\n"
    .. "Iteration 9 of 9: 9 ms"
  local dest = { 0.5 }
  local nxt, k, bare, total = scan.iterations(text, 1, dest, 2)
  T.eq({ k, bare, total }, { 2, 1, 3 })
  T.eq(dest, { 0.5, 1.5, 2.5 })
  T.eq(text:sub(nxt, nxt + 10), "I executorc")
  nxt, k, bare, total = scan.iterations(text, nxt, dest)
  T.eq({ k, bare, total }, { 1, 0, 4 })
  T.eq(dest, { 0.5, 1.5, 2.5, 3.5 })
  local stop = nxt
  nxt, k, bare, total = scan.iterations(text, stop, dest)
  T.eq({ nxt, k, bare, total }, { stop, 0, 0, nil }, "a non-iteration line stops the run where it starts")
  local at = scan.find_iteration(text, stop)
  T.eq(text:sub(at), "Iteration 9 of 9: 9 ms")
  nxt, k = scan.iterations(text, at, dest)
  T.eq({ nxt, k, dest[5] }, { #text + 1, 1, 9.0 })
  T.eq(scan.find_iteration(text, #text + 1), #text + 1)
  T.eq(scan.find_iteration("a\nb\n", 1), 5)
  T.eq(scan.iterations("", 1, dest), 1)
end)

T.test("iteration_list: an empty table, whatever the texts", function()
  local t = scan.iteration_list("Iteration 1 of 2: 3 ms\nIteration Iteration ", nil, "x")
  T.eq(next(t), nil)
  T.eq(#t, 0)
  T.eq(next(scan.iteration_list()), nil)
  T.raises(function() scan.iteration_list({}) end, "string expected")
end)

T.test("misuse raises", function()
  local text = "ab\nIteration 1 of 1: 1 ms\n"
  T.raises(function() scan.iterations(text, 2, {}) end, "not the start of a line")
  T.raises(function() scan.iterations(text, 0, {}) end, "out of range")
  T.raises(function() scan.iterations(text, #text + 2, {}) end, "out of range")
  T.raises(function() scan.iterations(text, 1, nil) end, "table expected")
  T.raises(function() scan.iterations(text, 1, {}, -1) end, ">= 0")
  T.raises(function() scan.find_iteration(text, 3) end, "not the start of a line")
  T.eq(scan.find_iteration(text, 1), 4)
end)

T.test("random lines: the scanner and the LPeg spec agree on every line and value", function()
  math.randomseed(7)
  local prefixes = { "I 00:00:00.176204 executorch:executor_runner.cpp:779] ", "I executorch:r.cpp:7] ",
    "I [executorch:arm.cpp:512 main()] ", "12-02 17:19:00.123  1234  1234 I ExecuTorch: ", "I/ExecuTorch( 1234): ",
    "D/Tag:", "" }
  local bodies = { "Iteration 3 of 7: 4.25 ms", "Iteration 12 of 9223372036854775808:\t-1.5e3ms\r", "Iteration 1 of 1: .5 ms x" }
  local chars = "IEWDVAX \t:[]()/-.0123456789emsof\r\n"
  local agree, iters = 0, 0
  for _ = 1, 20000 do
    local line = prefixes[math.random(#prefixes)] .. bodies[math.random(#bodies)]
    for _ = 1, math.random(0, 3) do -- mutate: replace, insert or delete one character
      local at, c = math.random(1, #line), math.random(1, #chars)
      local op = math.random(3)
      if op == 1 then line = line:sub(1, at - 1) .. chars:sub(c, c) .. line:sub(at + 1)
      elseif op == 2 then line = line:sub(1, at - 1) .. chars:sub(c, c) .. line:sub(at)
      else line = line:sub(1, at - 1) .. line:sub(at + 1) end
    end
    line = line:match("^[^\n]*") -- one line: the spec is for one
    local ms, total = one(line)
    local want_total, want_ms = lpeg.match(SPEC, line)
    if same_number(ms, want_ms) and same_number(total, ms and want_total or nil) then agree = agree + 1
    else T.eq({ ms, total }, { want_ms, want_total }, ("%q"):format(line)) end
    if ms then iters = iters + 1 end
  end
  T.eq(agree, 20000)
  T.ok(iters > 2000 and iters < 18000, "both kinds generated (" .. iters .. " iteration lines)")
end)

T.done()
