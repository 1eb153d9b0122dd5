--- Base64 artifact blocks in a device log (RTT, serial): the files a bare-metal firmware sends as text.
-- Pure: lines in, {name, data} out; no I/O. Two forms are known (docs/sources.md §1, §8):
--
--   [base64] buffer size: 2320                 (optional: the decoded size, checked)
--   #[RUN THIS]
--   echo "<base64, one line>" | base64 -d >etdump.bin
--   #[END]
--
--   begin output.bin
--   <base64 lines>
--   end
--
-- The forms are data in `M.forms`: a user adds one with `table.insert(require("odp.parse.artifacts").forms, {...})`
-- or passes `forms=` to `M.decoder`. A form has:
--   name            its label in errors
--   start           Lua pattern for the line opening a block; its first capture (if any) is the file name
--   stop            Lua pattern for the line closing it
--   data            function(line, state) -> name|nil, base64 text|nil, err|nil   (one body line), or
--                   a Lua pattern whose first capture is base64 text (the file name then comes from `start`)
--   size            optional Lua pattern, anywhere in the log before the block: its capture is the decoded size
-- Never executed: the `echo ... | base64 -d` line is decoded here, not given to a shell.
local errors = require("odp.core.errors")
local sys = require("odp.sys")

local M = {}

M.MAX_BYTES = 64 * 1024 * 1024 -- per artifact (decoded); untrusted input is bounded

-- `echo "<b64>" | base64 -d >name` (also `> name`, single quotes); a line without the closing quote is a block
-- cut short.
local function echo_line(line)
  local q, rest = line:match("^%s*echo%s+([\"'])(.*)$")
  if not q then return nil, nil, nil end
  local b64, tail = rest:match("^([^\"']*)" .. q .. "(.*)$")
  if not b64 then return nil, nil, "truncated: the echo line has no closing quote" end
  local name = tail:match("base64%s+%-%-?d%a*%s*>%s*(%S+)%s*$")
  if not name then return nil, nil, "unexpected echo line (no `| base64 -d >FILE`)" end
  return name, b64
end

M.forms = {
  { name = "run_this", start = "^%s*#%[RUN THIS%]%s*$", stop = "^%s*#%[END%]%s*$", data = echo_line,
    size = "%[base64%] buffer size: (%d+)" },
  { name = "begin_end", start = "^begin%s+(%S+)%s*$", stop = "^end%s*$", data = "^%s*([A-Za-z0-9+/=]*)%s*$" },
}

--- Strict base64 (standard alphabet, padded): returns bytes or nil, reason. The reason is found here (for a
-- message that helps); the decoding is odp's one decoder, in C (odp.sys.base64_decode).
function M.base64_decode(s)
  if #s % 4 ~= 0 then return nil, ("length %d is not a multiple of 4 (truncated?)"):format(#s) end
  local pad = s:match("(=*)$")
  if #pad > 2 then return nil, "too much padding" end
  local body = s:sub(1, #s - #pad)
  local bad = body:find("[^A-Za-z0-9+/]")
  if bad then
    return nil, ("invalid character %q at offset %d"):format(body:sub(bad, bad), bad - 1)
  end
  local data, err = sys.base64_decode(s)
  if not data then return nil, errors.text(err) end
  return data
end

local Decoder = {}
Decoder.__index = Decoder

--- A streaming decoder: feed it lines, then call finish().
---@param opts? {forms?: table, max_bytes?: integer}
function M.decoder(opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "forms" and k ~= "max_bytes" then error(("unknown option '%s'"):format(tostring(k)), 2) end
  end
  return setmetatable({ forms = opts.forms or M.forms, max_bytes = opts.max_bytes or M.MAX_BYTES,
    artifacts = {}, errors = {}, block = nil, sizes = {}, line_no = 0 }, Decoder)
end

local function add_error(self, name, form, msg)
  self.errors[#self.errors + 1] = { name = name, form = form, line = self.line_no, message = msg }
end

-- Closes a file being collected inside a block: decode, check the announced size.
local function flush_file(self)
  local blk = self.block
  local f = blk and blk.file
  if not f then return end
  blk.file = nil
  if f.too_big then
    add_error(self, f.name, blk.form.name, ("more than %d bytes of base64: refused"):format(self.max_bytes * 4 // 3 + 4))
    return
  end
  local text = table.concat(f.parts)
  local data, why = M.base64_decode(text)
  if not data then add_error(self, f.name, blk.form.name, "corrupt base64: " .. why) return end
  local expected = blk.expected
  blk.expected = nil -- one announced size per file
  if type(expected) == "table" then
    add_error(self, f.name, blk.form.name, ("announced size %s is out of range (0 to %d bytes): refused")
      :format(expected.bad, self.max_bytes))
    return
  end
  if expected and expected ~= #data then
    add_error(self, f.name, blk.form.name, ("size mismatch: announced %d bytes, decoded %d"):format(expected, #data))
    return
  end
  self.artifacts[#self.artifacts + 1] = { name = f.name, data = data, bytes = #data, form = blk.form.name,
    expected_bytes = expected, line = f.line }
end

local function add_part(self, name, b64)
  local blk = self.block
  if blk.file and blk.file.name ~= name then flush_file(self) end
  if not blk.file then blk.file = { name = name, parts = {}, len = 0, line = self.line_no } end
  local f = blk.file
  f.len = f.len + #b64
  if f.len > self.max_bytes * 4 // 3 + 4 then f.too_big = true f.parts = {} return end
  if not f.too_big then f.parts[#f.parts + 1] = b64 end
end

--- Feeds one line (without its newline).
function Decoder:line(line)
  self.line_no = self.line_no + 1
  line = line:gsub("\r$", "")
  local blk = self.block
  if not blk then
    for _, form in ipairs(self.forms) do
      if form.size then
        local n = line:match(form.size)
        if n then -- an announced size is device text: a whole number up to the cap, else the block is refused
          local v = math.tointeger(tonumber(n))
          self.sizes[form] = (v and v >= 0 and v <= self.max_bytes) and v or { bad = n:sub(1, 40) }
        end
      end
      local s, e, cap = line:find(form.start)
      if s then
        self.block = { form = form, name = cap, expected = self.sizes[form], start_line = self.line_no }
        self.sizes[form] = nil
        return
      end
    end
    return
  end
  local form = blk.form
  if line:find(form.stop) then
    flush_file(self)
    if not blk.any then
      add_error(self, blk.name or "?", form.name, "empty block")
    end
    self.block = nil
    return
  end
  blk.any = true
  if type(form.data) == "function" then
    local name, b64, err = form.data(line, blk)
    if err then
      add_error(self, name or blk.name or "?", form.name, err)
      blk.file = nil
    elseif b64 then
      add_part(self, name or blk.name, b64)
    end
  else
    local b64 = line:match(form.data)
    if b64 then
      add_part(self, blk.name, b64)
    else
      -- a foreign line inside a block: the firmware interleaved output, or the block is broken
      add_error(self, blk.name or "?", form.name, ("unexpected line %d inside the block: %s"):format(self.line_no,
        line:sub(1, 60)))
      blk.file = nil
      self.block = nil
    end
  end
end

--- Ends the input. Returns {artifacts = {{name, data, bytes, form, expected_bytes?}}, errors = {{name, form,
-- line, message}}}. A block still open is reported truncated.
function Decoder:finish()
  local blk = self.block
  if blk then
    local name = blk.name or (blk.file and blk.file.name) or "?"
    blk.file = nil
    add_error(self, name, blk.form.name,
      ("truncated: the block opened at line %d never ended"):format(blk.start_line))
    self.block = nil
  end
  return { artifacts = self.artifacts, errors = self.errors }
end

--- Decodes every block of a whole text.
function M.decode(text, opts)
  local d = M.decoder(opts)
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do d:line(line) end
  return d:finish()
end

--- A safe file name for an artifact (no directories, no dot files).
function M.safe_name(name)
  local base = (name or ""):match("([^/\\]+)$") or ""
  base = base:gsub("[^%w%._%-]", "_"):gsub("^%.+", "")
  if base == "" then base = "artifact.bin" end
  return base
end

return M
