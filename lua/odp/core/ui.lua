--- What the user sees while odp works: messages on stderr, progress bars on terminals.
-- Libraries report (events, return values); the CLI presents through this module.
local sys = require("odp.sys")

local M = {}
local UI = {}
UI.__index = UI

---@param opts {quiet?: boolean, verbose?: boolean|integer, tty?: boolean}
function M.new(opts)
  opts = opts or {}
  local tty = opts.tty
  if tty == nil then tty = sys.isatty("stderr") and os.getenv("TERM") ~= "dumb" end
  return setmetatable({ quiet = opts.quiet, verbose = opts.verbose, tty = tty, warnings = {} }, UI)
end

--- A view of ui for one run: the same terminal, options and progress line, its own warnings. Runs on boards
-- that share a ui (a sweep, the scheduler's coroutines) each keep only the warnings shown during their run.
function M.scope(ui)
  return setmetatable({ warnings = {} }, { __index = ui, __newindex = ui })
end

local function out(self, s)
  if self.bar_shown then io.stderr:write("\r\27[K") self.bar_shown = false end
  local block = self.tty and not self.quiet and self.block
  if block then block:clear() end
  io.stderr:write(s, "\n")
  if block then block:draw() end
end

--- A run's own output on stdout (a dry run's commands): a flow emits it here, the user's terminal shows it.
function UI:output(line) io.stdout:write(line, "\n") end

--- Asks for a secret on the terminal (a key's passphrase): the prompt on stderr, the answer read without echo.
function UI:ask_secret(prompt)
  if self.bar_shown then io.stderr:write("\r\27[K") self.bar_shown = false end
  io.stderr:write(prompt)
  return sys.read_secret()
end

function UI:info(fmt, ...) if not self.quiet then out(self, (self.prefix or "") .. fmt:format(...)) end end
function UI:debug(fmt, ...) if self.verbose then out(self, (self.prefix or "") .. fmt:format(...)) end end

--- A warning is shown and kept: flows copy ui.warnings into the result record.
function UI:warn(fmt, ...)
  local msg = fmt:format(...)
  self.warnings[#self.warnings + 1] = msg
  if not self.quiet then out(self, (self.prefix or "") .. "warning: " .. msg) end
end

--- The UI of one board among many: its messages start with "NAME: " and its warnings are its own (they go into
-- its records); the terminal, the verbosity and the status lines are this UI's.
function UI:child(name)
  local parent = self
  return setmetatable({ prefix = name .. ": ", warnings = {} }, {
    __index = function(_, k)
      if k == "quiet" or k == "verbose" or k == "tty" or k == "block" or k == "bar_shown" then return parent[k] end
      return UI[k]
    end,
    __newindex = function(t, k, v)
      if k == "bar_shown" or k == "block" then parent[k] = v else rawset(t, k, v) end
    end,
  })
end

local function human_bytes(n)
  local units, i = { "B", "kB", "MB", "GB" }, 1
  while n >= 1000 and i < #units do n, i = n / 1000, i + 1 end
  return (i == 1 and "%d %s" or "%.1f %s"):format(n, units[i])
end
M.human_bytes = human_bytes

--- A progress bar for work of `total` units ("bytes" shows rates). Returns an object with
-- :update(done[, note]) and :finish([note]). Draws only on a terminal, at most 10 times a second.
function UI:progress(label, total, unit)
  local bar = { started = sys.now(), last = 0 }
  local ui = self
  function bar.update(_, done, note)
    if ui.quiet or not ui.tty or ui.block then return end -- many boards: their status lines say it instead
    local now = sys.now()
    if now - bar.last < 0.1 and done < (total or math.huge) then return end
    bar.last = now
    local width = math.max(10, math.min(40, (sys.term_width("stderr") or 80) - 50))
    local frac = total and total > 0 and math.min(1, done / total) or 0
    local fill = math.floor(frac * width + 0.5)
    local rate = done / math.max(now - bar.started, 1e-6)
    local text = unit == "bytes" and (human_bytes(done) .. " " .. human_bytes(rate) .. "/s") or tostring(done)
    local eta = (total and rate > 0 and done > 0) and (" ETA %ds"):format(math.ceil((total - done) / rate)) or ""
    io.stderr:write(("\r\27[K%s [%s%s] %3d%% %s%s%s"):format(label, ("#"):rep(fill), (" "):rep(width - fill),
      math.floor(frac * 100), text, eta, note and ("  " .. note) or ""))
    ui.bar_shown = true
  end
  function bar.finish(_, note)
    if ui.bar_shown then io.stderr:write("\r\27[K") ui.bar_shown = false end
    if note then ui:info("%s: %s", label, note) end
  end
  return bar
end

--- One status line per name (many boards), kept at the bottom of the terminal while messages scroll above.
-- Returns an object with :set(name, text) and :finish(); draws only on a terminal, at most 10 times a second.
function UI:lines(names)
  local block = { text = {}, shown = 0, last = 0 }
  local ui, width = self, 0
  for _, n in ipairs(names) do width = math.max(width, #n) end
  function block.clear()
    if block.shown > 0 then io.stderr:write(("\27[%dA\r\27[J"):format(block.shown)) block.shown = 0 end
  end
  function block.draw()
    local cols = (sys.term_width("stderr") or 80) - 1
    local buf = {}
    for i, n in ipairs(names) do
      buf[i] = (("%-" .. width .. "s  %s"):format(n, block.text[n] or "")):sub(1, cols) .. "\n"
    end
    io.stderr:write(table.concat(buf))
    block.shown = #names
  end
  function block.set(_, name, text, force)
    block.text[name] = text
    if ui.quiet or not ui.tty then return end
    local now = sys.now()
    if not force and now - block.last < 0.1 then return end
    block.last = now
    block.clear()
    block.draw()
  end
  function block.finish()
    if ui.tty and not ui.quiet then
      block.clear()
      block.draw()
    end
    ui.block = nil
  end
  self.block = block
  return block
end

return M
