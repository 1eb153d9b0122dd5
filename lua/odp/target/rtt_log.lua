--- The raw RTT log of a probe board's run: lines read from an RTT channel (odp.rtt's stream), each also written
-- to a log file with its host timestamp. The Ethos-U flow's capture and flash steps both read through it.
local errors = require("odp.core.errors")
local stream_mod = require("odp.core.stream")
local sys = require("odp.sys")

local M = {}

local RttLog = {}
RttLog.__index = RttLog

--- odp.core.stream's line reader over an RTT channel that also keeps the raw log with host timestamps (log_path)
-- and counts the bytes read (rd.bytes); a line longer than max_line is cut. The log holds at most max_log bytes
-- (device output is untrusted): later lines are counted in rd.dropped, and the log's last line says so.
-- rd:line(timeout) -> line | nil (timeout); a stream error raises.
function M.reader(stream, log_path, max_line, max_log)
  local self = setmetatable({ bytes = 0, logged = 0, dropped = 0, max_log = max_log or math.huge,
    log = log_path and assert(io.open(log_path, "ab")) }, RttLog)
  self.rd = stream_mod.reader(stream, { max_line = max_line,
    on_bytes = function(data) self.bytes = self.bytes + #data end,
    on_line = function(line) self:_log_line(line) end })
  return self
end

function RttLog:_log_line(line)
  if not self.log then return end
  if self.dropped > 0 or self.logged + #line + 29 > self.max_log then
    self.dropped = self.dropped + #line + 1
    return
  end
  local t = sys.time()
  local entry = ("%s.%06dZ %s\n"):format(os.date("!%Y-%m-%dT%H:%M:%S", math.floor(t)), math.floor((t % 1) * 1e6), line)
  self.logged = self.logged + #entry
  self.log:write(entry)
end

function RttLog:line(timeout)
  local line, err, code = self.rd:line(timeout)
  if err then errors.check(nil, err, code, "RTT read") end
  return line
end

--- Hands bytes read past the last line back to the stream (XMODEM must see the flasher's 'C').
function RttLog:give_back() self.rd:give_back() end

function RttLog:close()
  local rest = self.rd:pending()
  if #rest > 0 then self:_log_line(rest .. " [no newline]") end
  if self.log then
    if self.dropped > 0 then
      self.log:write(("[odp: this log is capped at %d bytes; %d bytes of later RTT lines were not written]\n")
        :format(self.max_log, self.dropped))
    end
    self.log:close()
    self.log = nil
  end
end

return M
