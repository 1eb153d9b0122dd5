--- A stream's text kept in bounded memory: its first `head` bytes and its last `tail` bytes (from a line's start),
-- whatever its size; the middle is counted, not kept. A runner that prints 100 MB still has its load lines (the
-- head) and its timing and output lines (the tail) read, while its whole text goes to a file as it comes.
--   local headtail = require("odp.core.headtail")
--   local k = headtail.new { head = 2 << 20, tail = 2 << 20 }
--   k:add(chunk) ...; local text, cut = k:text()   -- cut: {bytes, kept, dropped} | nil when whole
local M = {}

local Keeper = {}
Keeper.__index = Keeper

--- A keeper of the first opts.head and the last opts.tail bytes (integers > 0).
---@param opts {head: integer, tail: integer}
function M.new(opts)
  assert(math.type(opts.head) == "integer" and opts.head > 0, "headtail.new: head must be a positive integer")
  assert(math.type(opts.tail) == "integer" and opts.tail > 0, "headtail.new: tail must be a positive integer")
  return setmetatable({ head_max = opts.head, tail_max = opts.tail, head = {}, head_n = 0, tail = {}, first = 1,
    last = 0, tail_n = 0, bytes = 0 }, Keeper)
end

--- Adds the next chunk of the stream.
---@param data string
function Keeper:add(data)
  self.bytes = self.bytes + #data
  local room = self.head_max - self.head_n
  if room > 0 then
    local part = data:sub(1, room)
    self.head[#self.head + 1], self.head_n = part, self.head_n + #part
    data = data:sub(#part + 1)
  end
  if #data == 0 then return end
  if #data > self.tail_max then data = data:sub(-self.tail_max) end
  self.last = self.last + 1
  self.tail[self.last], self.tail_n = data, self.tail_n + #data
  while self.tail_n - #self.tail[self.first] >= self.tail_max do -- the oldest chunk is not needed any more
    self.tail_n = self.tail_n - #self.tail[self.first]
    self.tail[self.first], self.first = nil, self.first + 1
  end
end

--- The kept text: the whole stream when it fit, else its head, a newline, and its tail from the first line
-- that starts inside it. -> text, cut ({bytes = all seen, kept = bytes of text, dropped} | nil when whole)
function Keeper:text()
  local head = table.concat(self.head)
  if self.first > self.last then return head, nil end
  local tail = table.concat(self.tail, "", self.first, self.last)
  local whole = self.head_n + #tail == self.bytes
  if not whole then
    if #tail > self.tail_max then tail = tail:sub(-self.tail_max) end
    local nl = tail:find("\n", 1, true)
    tail = nl and tail:sub(nl + 1) or ""
  end
  local text = whole and (head .. tail) or (head .. "\n" .. tail)
  if whole then return text, nil end
  local kept = self.head_n + #tail
  return text, { bytes = self.bytes, kept = kept, dropped = self.bytes - kept }
end

return M
