-- odp.core.stream's line reader (the reader every RTT capture goes through) over scripted streams: every way
-- of cutting a random byte stream into reads gives the lines a whole-text splitter gives (the oracle), and a
-- long line costs memory linear in its size (issue 42: a growing line was re-copied at every read, so a 24 MiB
-- base64 ETDump took 48-71 s). The pty path of the same reader is tests/serial/serial_pair.lua.
local T = require("t")
local stream = require("odp.core.stream")

-- A stream over `data` delivering reads of `sizes()` bytes, then the end ("") or, idle, timeouts like a quiet
-- channel; unread() puts bytes back.
local function scripted(data, sizes, idle)
  local pos, back = 1, ""
  return {
    read = function(_, n)
      if #back > 0 then local b = back back = "" return b end
      if pos > #data and idle then return nil, "ETIMEDOUT: idle", "ETIMEDOUT" end
      if pos > #data then return "" end
      local c = data:sub(pos, pos + math.min(n, sizes()) - 1)
      pos = pos + #c
      return c
    end,
    unread = function(_, b) back = b .. back end,
  }
end

local function all_lines(rd)
  local out = {}
  while true do
    local l = rd:line(1)
    if not l then return out end
    out[#out + 1] = l
  end
end

-- The oracle: split the whole text at "\n", drop one "\r" before each end, cut lines longer than max.
local function oracle(data, max)
  local out = {}
  local function add(l)
    l = l:gsub("\r$", "")
    while #l > max do out[#out + 1] = l:sub(1, max) l = l:sub(max + 1) end
    out[#out + 1] = l
  end
  for l in data:gmatch("([^\n]*)\n") do add(l) end
  local tail = data:match("([^\n]*)$")
  if #tail > 0 then add(tail) end
  return out
end

T.test("any cutting of a random stream into reads: the whole-text splitter's lines (seeded, 2000 streams)", function()
  local seed = tonumber(os.getenv("ODP_FUZZ_SEED") or "") or 42
  math.randomseed(seed)
  local alphabet = { "\n", "\r\n", "\r", "\r\r", "a", "b", "\0", "\255" }
  for trial = 1, 2000 do
    local t = {}
    for i = 1, math.random(0, 80) do t[i] = alphabet[math.random(#alphabet)] end
    local data = table.concat(t)
    local max = math.random(1, 12)
    local step = math.random(1, 10)
    local got = all_lines(stream.reader(scripted(data, function() return math.random(1, step) end), { max_line = max }))
    local want = oracle(data, max)
    if table.concat(got, "|") ~= table.concat(want, "|") or #got ~= #want then
      T.eq(got, want, ("seed %d trial %d max_line %d data %q"):format(seed, trial, max, data))
      return
    end
  end
  T.ok(true)
end)

T.test("a 4 MiB line read in 4 KiB chunks allocates a few times its size, not one copy per read", function()
  local line = string.rep("QUJD", 1024 * 1024)
  local data = "head\n" .. line .. "\ntail\n"
  local rd = stream.reader(scripted(data, function() return 4096 end), { max_line = 128 * 1024 * 1024 })
  T.eq(rd:line(1), "head")
  collectgarbage("collect")
  collectgarbage("stop") -- every byte allocated from here on stays counted
  local before = collectgarbage("count")
  local l = rd:line(1)
  local kib = collectgarbage("count") - before
  collectgarbage("restart")
  T.ok(l == line, "the long line whole")
  -- re-copying the growing line at each of the 1024 reads allocates ~2 GiB; joining the chunks once, ~8 MiB
  T.ok(kib < 4 * #line / 1024, ("allocated %.0f KiB for a %d KiB line"):format(kib, #line // 1024))
  T.eq(all_lines(rd), { "tail" })
end)

T.test("pending and give_back: the bytes after the last line, a carried \\r included", function()
  local s = scripted("one\r\ntwo\r", function() return 5 end, true)
  local rd = stream.reader(s, { max_line = 64 })
  T.eq(rd:line(1), "one")
  T.eq(rd:line(0.05), nil, "no whole line yet")
  T.eq(rd:pending(), "two\r")
  rd:give_back()
  T.eq(rd:pending(), "")
  T.eq(s:read(10), "two\r")
end)

T.done()
