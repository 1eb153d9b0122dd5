--- Line reading and expect for every odp.Stream (serial port, RTT channel, pty, socket).
--- Installed as stream methods: `s:expect(pattern, opts)`, `s:lines(opts)`; also callable as functions.
local core = require("odp.streamcore")
local sys = require("odp.sys")

local M = {}

local CHUNK = 4096
local LINE_CHUNK = 65536 -- lines can be long (a base64 artifact is one line): fewer, larger reads
local DEFAULT_MAX = 1024 * 1024 -- bytes kept while looking for a match (device output is untrusted)

local function check_opts(opts, allowed, fname)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(fname .. ": options must be a table", 3) end
  for k in pairs(opts) do
    if not allowed[k] then error(string.format("%s: unknown option '%s'", fname, tostring(k)), 3) end
  end
  return opts
end

local function tail(s, n)
  if #s <= n then return s end
  return s:sub(-n)
end

--- Reads until `pattern` (a Lua pattern, or plain text with plain=true) appears.
---@param s userdata odp.Stream
---@param pattern string
---@param opts? {timeout?: number, plain?: boolean, max?: integer}
---@return string|nil match the matched text (nil, err, code on failure)
---@return string before what came before the match (bytes after the match stay in the stream)
function M.expect(s, pattern, opts)
  opts = check_opts(opts, { timeout = true, plain = true, max = true }, "expect")
  if type(pattern) ~= "string" or pattern == "" then error("expect: pattern must be a non-empty string", 2) end
  local timeout = opts.timeout or 10
  local max = opts.max or DEFAULT_MAX
  local deadline = sys.now() + timeout
  local buf, dropped = "", 0
  while true do
    local i, j = buf:find(pattern, 1, opts.plain)
    if i then
      local rest = buf:sub(j + 1)
      if #rest > 0 then s:unread(rest) end
      return buf:sub(i, j), buf:sub(1, i - 1)
    end
    local left = deadline - sys.now()
    if left <= 0 then
      return nil, string.format("ETIMEDOUT: %q not seen within %gs; last 200 bytes: %q", pattern, timeout,
        tail(buf, 200)), "ETIMEDOUT"
    end
    local data, err, code = s:read(CHUNK, { timeout = left })
    if not data then
      if code ~= "ETIMEDOUT" then
        return nil, string.format("%s (waiting for %q; last 200 bytes: %q)", err, pattern, tail(buf, 200)), code
      end
    elseif data == "" then
      return nil, string.format("EIO: stream ended before %q; last 200 bytes: %q", pattern, tail(buf, 200)), "EIO"
    else
      buf = buf .. data
      if #buf > max then
        dropped = dropped + (#buf - max)
        buf = buf:sub(-max)
      end
    end
  end
end

local Reader = {}
Reader.__index = Reader

--- A line reader over `s` that keeps its read-ahead between calls: r:line(timeout) -> the next line (without
--- "\n" or "\r\n"), or nil when `timeout` seconds pass without a whole line or the stream ends (r.ended);
--- nil, err, code for a stream error. A "line" longer than max_line is handed out in pieces. Hooks:
--- on_bytes(chunk) sees every chunk as it is read (byte counts), on_line(line) every line handed out (logs).
--- r:give_back() returns the bytes read past the last line to the stream (a protocol takes over from here);
--- r:pending() is them.
--- Linear in the bytes read: a line that spans many reads is kept as the list of its chunks and joined once,
--- at its end (a base64 artifact is one line of up to ~90 MB: appending each chunk to a growing string made
--- its cost quadratic); lines are cut from the current chunk by position, never by copying what follows them.
---@param s userdata odp.Stream (or anything with read(n, {timeout=}) and unread(bytes))
---@param opts? {max_line?: integer, on_bytes?: fun(chunk: string), on_line?: fun(line: string)}
function M.reader(s, opts)
  opts = check_opts(opts, { max_line = true, on_bytes = true, on_line = true }, "reader")
  -- parts/plen: the current line's earlier chunks (no "\n" in them) and their length; chunk/pos: the last
  -- chunk read and where its unconsumed bytes start
  return setmetatable({ s = s, parts = {}, plen = 0, chunk = "", pos = 1, ended = false,
    max_line = opts.max_line or 64 * 1024, on_bytes = opts.on_bytes, on_line = opts.on_line }, Reader)
end

function Reader:_out(line)
  if self.on_line then self.on_line(line) end
  return line
end

-- The current line so far (its parts and the chunk's rest) as one string; the reader keeps nothing of it.
function Reader:_take()
  local parts = self.parts
  if self.pos <= #self.chunk then parts[#parts + 1] = self.chunk:sub(self.pos) end
  local s = table.concat(parts)
  self.parts, self.plen, self.chunk, self.pos = {}, 0, "", 1
  return s
end

function Reader:line(timeout)
  local deadline = timeout and (sys.now() + timeout) or math.huge
  while not self.ended do
    local chunk, pos = self.chunk, self.pos
    local nl = chunk:find("\n", pos, true)
    local stop = nl or (#chunk + 1) -- the current line's bytes in this chunk: pos .. stop - 1
    -- a "\r" before the "\n" is no content; one at the chunk's end waits for the next byte to say which it is
    local cr = stop > pos and chunk:byte(stop - 1) == 13
    local len = stop - pos - (cr and 1 or 0)
    if self.plen + len > self.max_line then
      -- a runaway "line": handed out in max_line pieces rather than grown without bound
      local take = self.max_line - self.plen
      self.parts[#self.parts + 1] = chunk:sub(pos, pos + take - 1)
      self.pos = pos + take
      return self:_out(self:_join())
    end
    if nl then
      self.pos = nl + 1
      if #self.parts == 0 then return self:_out(chunk:sub(pos, nl - 1 - (cr and 1 or 0))) end
      self.parts[#self.parts + 1] = chunk:sub(pos, nl - 1 - (cr and 1 or 0))
      return self:_out(self:_join())
    end
    if len > 0 then -- the chunk's rest opens (or continues) a line still without its end
      self.parts[#self.parts + 1] = (pos == 1 and not cr) and chunk or chunk:sub(pos, pos + len - 1)
      self.plen = self.plen + len
    end
    self.chunk, self.pos = cr and "\r" or "", 1
    local left = deadline - sys.now()
    if left <= 0 then return nil end
    local data, err, code = self.s:read(LINE_CHUNK, { timeout = left ~= math.huge and left or nil })
    if not data then
      if code ~= "ETIMEDOUT" then return nil, err, code end
    elseif data == "" then
      self.ended = true
      if self.plen > 0 or cr then -- the stream's last line, without its "\n" (a "\r" before the end is none)
        local line = self:_take()
        return self:_out(cr and line:sub(1, -2) or line)
      end
    else
      if self.on_bytes then self.on_bytes(data) end
      self.chunk = cr and ("\r" .. data) or data
    end
  end
  return nil
end

-- The parts as one line; the reader keeps none of them.
function Reader:_join()
  local line = table.concat(self.parts)
  self.parts, self.plen = {}, 0
  return line
end

function Reader:pending()
  local t = {}
  for i, p in ipairs(self.parts) do t[i] = p end
  t[#t + 1] = self.chunk:sub(self.pos)
  return table.concat(t)
end

function Reader:give_back()
  local rest = self:_take()
  if #rest > 0 then self.s:unread(rest) end
end

--- Iterates over lines (without "\n" or "\r\n") until `count` lines, the end of the stream, or `timeout`
--- seconds in total. An incomplete line at the deadline stays in the stream. Errors other than the
--- deadline raise.
---@param s userdata odp.Stream
---@param opts? {timeout?: number, count?: integer, max_line?: integer}
function M.lines(s, opts)
  opts = check_opts(opts, { timeout = true, count = true, max_line = true }, "lines")
  local deadline = opts.timeout and (sys.now() + opts.timeout) or math.huge
  local count = opts.count
  local r, n = M.reader(s, { max_line = opts.max_line }), 0
  return function()
    if count and n >= count then return nil end
    local line, err = r:line(deadline ~= math.huge and math.max(0, deadline - sys.now()) or nil)
    if err then error(err, 2) end
    if not line then r:give_back(); return nil end
    n = n + 1
    if count and n >= count then r:give_back() end
    return line
  end
end

core.methods.expect = M.expect
core.methods.lines = M.lines

return M
