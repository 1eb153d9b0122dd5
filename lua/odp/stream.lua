--- Line reading and expect for every odp.Stream (serial port, RTT channel, pty, socket).
--- Installed as stream methods: `s:expect(pattern, opts)`, `s:lines(opts)`; also callable as functions.
local core = require("odp.streamcore")
local sys = require("odp.sys")

local M = {}

local CHUNK = 4096
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

--- Iterates over lines (without "\n" or "\r\n") until `count` lines, the end of the stream, or `timeout`
--- seconds in total. An incomplete line at the deadline stays in the stream. Errors other than the
--- deadline raise.
---@param s userdata odp.Stream
---@param opts? {timeout?: number, count?: integer, max_line?: integer}
function M.lines(s, opts)
  opts = check_opts(opts, { timeout = true, count = true, max_line = true }, "lines")
  local deadline = opts.timeout and (sys.now() + opts.timeout) or math.huge
  local count, max_line = opts.count, opts.max_line or 64 * 1024
  local buf, n, ended = "", 0, false
  return function()
    if ended or (count and n >= count) then return nil end
    while true do
      local nl = buf:find("\n", 1, true)
      if nl then
        local line = buf:sub(1, nl - 1)
        buf = buf:sub(nl + 1)
        n = n + 1
        if count and n >= count and #buf > 0 then s:unread(buf); buf = "" end
        return (line:gsub("\r$", ""))
      end
      if #buf > max_line then -- a runaway "line": hand it out in pieces rather than grow without bound
        local line = buf:sub(1, max_line)
        buf = buf:sub(max_line + 1)
        n = n + 1
        return line
      end
      local left = deadline - sys.now()
      if left <= 0 then
        ended = true
        if #buf > 0 then s:unread(buf) end
        return nil
      end
      local data, err, code = s:read(CHUNK, { timeout = left ~= math.huge and left or nil })
      if not data then
        if code ~= "ETIMEDOUT" then error(err, 2) end
      elseif data == "" then
        ended = true
        if #buf > 0 then local l = buf; buf = ""; n = n + 1; return l end
        return nil
      else
        buf = buf .. data
      end
    end
  end
end

core.methods.expect = M.expect
core.methods.lines = M.lines

return M
