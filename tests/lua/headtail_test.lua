-- odp.core.headtail: the first and last bytes of a stream in bounded memory. Oracle: the same text cut with
-- string.sub by this test, for every chunking of it.
local T = require("t")
local headtail = require("odp.core.headtail")

local function lines(n)
  local t = {}
  for i = 1, n do t[i] = ("line %d %s\n"):format(i, ("x"):rep(i % 7)) end
  return table.concat(t)
end

-- The head as kept: the first n bytes up to the end of their last whole line.
local function head_of(text, n) return text:sub(1, n):match("^.*\n") end

local function feed(text, chunk, head, tail)
  local k = headtail.new { head = head, tail = tail }
  for i = 1, #text, chunk do k:add(text:sub(i, i + chunk - 1)) end
  return k:text()
end

T.test("a stream that fits is kept whole, whatever its chunks", function()
  local text = lines(50)
  for _, chunk in ipairs { 1, 3, 64, #text } do
    local got, cut = feed(text, chunk, 200, #text)
    T.eq(got, text, "chunks of " .. chunk)
    T.eq(cut, nil)
  end
end)

T.test("a longer stream: its head, then its tail from the first whole line in it, the middle counted", function()
  local text = lines(5000)
  local head, tail = 1000, 2000
  local want_tail = text:sub(-tail)
  want_tail = want_tail:sub(want_tail:find("\n", 1, true) + 1)
  for _, chunk in ipairs { 1, 7, 100, 4096, 65536 } do
    local got, cut = feed(text, chunk, head, tail)
    local h = head_of(text, head)
    T.eq(got, h .. "\n" .. want_tail, "chunks of " .. chunk)
    T.eq(cut, { bytes = #text, kept = #h + #want_tail, dropped = #text - #h - #want_tail }, "chunks of " .. chunk)
    T.match(got, "line 5000 x*\n$", "the last line is there")
  end
end)

T.test("the middle keeps the lines wanted, in order, within wanted_max; the rest is counted", function()
  local text = lines(5000)
  local head, tail = 1000, 2000
  local want_tail = text:sub(-tail)
  want_tail = want_tail:sub(want_tail:find("\n", 1, true) + 1)
  local h = head_of(text, head)
  local middle = text:sub(#h + 1, #text - #want_tail)
  local wanted = {}
  for l in middle:gmatch("[^\n]*\n") do if l:match("^line %d*7 ") then wanted[#wanted + 1] = l end end
  local is7 = "line %d*7 "
  for _, chunk in ipairs { 1, 100, 65536 } do
    local k = headtail.new { head = head, tail = tail, wanted = is7 }
    for i = 1, #text, chunk do k:add(text:sub(i, i + chunk - 1)) end
    local got, cut = k:text()
    T.eq(got, h .. "\n" .. table.concat(wanted) .. want_tail, "chunks of " .. chunk)
    T.eq(cut.bytes, #text)
    T.eq(cut.kept, #got - 1)
  end
  -- wanted_max bounds the middle: only the first wanted lines that fit
  local k = headtail.new { head = head, tail = tail, wanted = is7, wanted_max = 100 }
  k:add(text)
  local got = k:text()
  local fit, n = {}, 0
  for _, l in ipairs(wanted) do
    if n + #l > 100 then break end
    fit[#fit + 1], n = l, n + #l
  end
  T.eq(got, h .. "\n" .. table.concat(fit) .. want_tail)
end)

T.test("misuse raises", function()
  T.raises(function() headtail.new { head = 0, tail = 1 } end, "head must be a positive integer")
  T.raises(function() headtail.new { head = 1, tail = 1.5 } end, "tail must be a positive integer")
end)

T.done()
