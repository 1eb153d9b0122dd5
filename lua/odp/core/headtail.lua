--- A stream's text kept in bounded memory: its first `head` bytes, its last `tail` bytes (from a line's start),
-- and in between only the lines matching the Lua pattern `wanted` (at most `wanted_max` bytes of them); the rest
-- is counted, not kept. A runner that prints 100 MB still has its load lines (the head), every timing line
-- (wanted) and its output lines (the tail) read, while its whole text goes to a file as it comes. Chunks are
-- kept as they come; only those leaving the tail are searched, so a flood costs no string per line.
--   local headtail = require("odp.core.headtail")
--   local k = headtail.new { head = 2 << 20, tail = 2 << 20, wanted = "Iteration %d+ of %d+: " }
--   k:add(chunk) ...; local text, cut = k:text()   -- cut: {bytes, kept, dropped} | nil when whole
local M = {}

local Keeper = {}
Keeper.__index = Keeper

--- A keeper of the first opts.head and the last opts.tail bytes (integers > 0); opts.wanted: a Lua pattern a
-- line of the middle is kept for (opts.wanted_max bytes of such lines at most, default 32 MiB).
---@param opts {head: integer, tail: integer, wanted?: string, wanted_max?: integer}
function M.new(opts)
  if math.type(opts.head) ~= "integer" or opts.head <= 0 then error("headtail.new: head must be a positive integer", 2) end
  if math.type(opts.tail) ~= "integer" or opts.tail <= 0 then error("headtail.new: tail must be a positive integer", 2) end
  return setmetatable({ head_max = opts.head, tail_max = opts.tail,
    wanted = opts.wanted, wanted_max = opts.wanted_max or (32 << 20),
    head = {}, head_n = 0, tail = {}, first = 1, last = 0, tail_n = 0, carry = "", middle = {}, middle_n = 0,
    bytes = 0, left = 0 }, Keeper)
end

-- Text that leaves the tail (whole lines, the carry from before in front): its wanted lines join the middle,
-- the first ones that fit, none after one that did not (no hole inside what is kept).
function Keeper:evict(text)
  self.left = self.left + #text
  if not self.wanted or self.full then return end
  local pos = 1
  while true do
    local s = text:find(self.wanted, pos)
    if not s then return end
    local e = text:find("\n", s, true)
    if not e then return end -- (text is whole lines: a match always has its newline)
    while s > pos and text:byte(s - 1) ~= 10 do s = s - 1 end -- back to the line's start
    local l = text:sub(s, e)
    if self.middle_n + #l > self.wanted_max then self.full = true return end
    self.middle[#self.middle + 1], self.middle_n = l, self.middle_n + #l
    pos = e + 1
  end
end

--- Adds the next chunk of the stream.
---@param data string
function Keeper:add(data)
  self.bytes = self.bytes + #data
  if not self.head_full then
    local part = data:sub(1, self.head_max - self.head_n)
    self.head[#self.head + 1], self.head_n = part, self.head_n + #part
    data = data:sub(#part + 1)
    if #data > 0 then
      -- the head is full: it ends at a line's end, the line it would cut goes on with the rest
      self.head_full = true
      local head = table.concat(self.head)
      local nl = head:match("^.*\n()")
      if nl then head, data = head:sub(1, nl - 1), head:sub(nl) .. data end
      self.head, self.head_n = { head }, #head
    end
  end
  if #data == 0 then return end
  if #data > self.tail_max then -- a chunk longer than the tail: its front leaves at once, after the tail
    self:leave(table.concat(self.tail, "", self.first, self.last) .. data:sub(1, #data - self.tail_max))
    self.tail, self.first, self.last, self.tail_n = {}, 1, 0, 0
    data = data:sub(-self.tail_max)
  end
  self.last = self.last + 1
  self.tail[self.last], self.tail_n = data, self.tail_n + #data
  while self.tail_n - #self.tail[self.first] >= self.tail_max do -- the oldest chunk is not needed any more
    local old = self.tail[self.first]
    self.tail[self.first], self.first, self.tail_n = nil, self.first + 1, self.tail_n - #old
    self:leave(old)
  end
end

-- Text leaving the tail, in order: its whole lines are evicted; a line it ends inside waits for its rest.
function Keeper:leave(old)
  local text = self.carry .. old
  local cut = text:match("^.*\n()") or 1
  self:evict(text:sub(1, cut - 1))
  self.carry = text:sub(cut)
  if #self.carry > self.tail_max then -- a line longer than the tail: not one the parser reads
    self.left, self.carry = self.left + #self.carry, ""
  end
end

--- The kept text, once the stream has ended (called once): the whole stream when it fit, else its head, a
-- newline, the wanted lines of the middle and its tail from its first whole line.
-- -> text, cut ({bytes = all seen, kept = bytes of text, dropped} | nil when whole)
function Keeper:text()
  local head = table.concat(self.head)
  local tail = table.concat(self.tail, "", self.first, self.last)
  if self.left == 0 and self.carry == "" then return head .. tail, nil end
  if #tail > self.tail_max then -- the oldest kept chunk reaches before the last tail_max bytes
    local extra = #tail - self.tail_max
    local text = self.carry .. tail:sub(1, extra)
    local cut = text:match("^.*\n()") or 1
    self:evict(text:sub(1, cut - 1))
    self.carry, tail = text:sub(cut), tail:sub(extra + 1)
  end
  -- the line the carry starts ends in the tail: whole again, it is read as a line of the middle
  local nl = tail:find("\n", 1, true)
  self:evict(self.carry .. (nl and tail:sub(1, nl) or tail))
  self.carry = ""
  tail = nl and tail:sub(nl + 1) or ""
  local text = head .. "\n" .. table.concat(self.middle) .. tail
  local kept = #text - 1
  return text, { bytes = self.bytes, kept = kept, dropped = self.bytes - kept }
end

return M
