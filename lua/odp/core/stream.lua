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
---@param s userdata odp.Stream (or anything with read(n, {timeout=}) and unread(bytes))
---@param opts? {max_line?: integer, on_bytes?: fun(chunk: string), on_line?: fun(line: string)}
function M.reader(s, opts)
  opts = check_opts(opts, { max_line = true, on_bytes = true, on_line = true }, "reader")
  return setmetatable({ s = s, buf = "", seen = 0, ended = false, max_line = opts.max_line or 64 * 1024,
    on_bytes = opts.on_bytes, on_line = opts.on_line }, Reader)
end

function Reader:_out(line)
  if self.on_line then self.on_line(line) end
  return line
end

function Reader:line(timeout)
  local deadline = timeout and (sys.now() + timeout) or math.huge
  while not self.ended do
    local nl = self.buf:find("\n", self.seen + 1, true) -- (a long line is not searched again from its start)
    if nl then
      local line = self.buf:sub(1, nl - 1)
      self.buf, self.seen = self.buf:sub(nl + 1), 0
      return self:_out((line:gsub("\r$", "")))
    end
    self.seen = #self.buf
    if #self.buf > self.max_line then -- a runaway "line": hand it out in pieces rather than grow without bound
      local line = self.buf:sub(1, self.max_line)
      self.buf, self.seen = self.buf:sub(self.max_line + 1), 0
      return self:_out(line)
    end
    local left = deadline - sys.now()
    if left <= 0 then return nil end
    local data, err, code = self.s:read(LINE_CHUNK, { timeout = left ~= math.huge and left or nil })
    if not data then
      if code ~= "ETIMEDOUT" then return nil, err, code end
    elseif data == "" then
      self.ended = true
      if #self.buf > 0 then local l = self.buf; self.buf, self.seen = "", 0; return self:_out(l) end
    else
      if self.on_bytes then self.on_bytes(data) end
      self.buf = self.buf .. data
    end
  end
  return nil
end

function Reader:pending() return self.buf end

function Reader:give_back()
  if #self.buf > 0 then self.s:unread(self.buf); self.buf, self.seen = "", 0 end
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
