--- JSON decode on Debian's lua-dkjson (its lpeg decoder), encode in dkjson's layout and escapes (its
-- quotestring) written here. What odp adds, so that records survive a round trip unchanged:
--   * floats are written exactly (the shortest of %.15g/%.16g/%.17g that reads back the same) and always as
--     floats: 1.0 stays "1.0" and decodes as a float, integers as integers (dkjson's own tostring keeps 14
--     digits);
--   * null keeps its place in arrays (decoded as json.null); null in an object is an absent key;
--   * arrays keep an array marker (json.array), so an empty array comes back as [] and not {};
--   * object keys come out sorted, after opts.keyorder (the record's field order is the result module's).
-- NaN and +-Inf have no JSON form: they are written as null (the result module writes model outputs that
-- hold them as strings first).
local dkjson = require("dkjson").use_lpeg()
local lpeg = require("lpeg")
local find, format, match, mtype = string.find, string.format, lpeg.match, math.type

-- dkjson 2.6's lpeg grammar rejects whitespace inside an empty object or array ("{ }", "[\n]"), which its
-- own pretty printer writes: the decoder gets those without the whitespace (strings are left alone).
local ws = lpeg.S(" \t\r\n")^1
local EMPTY_FIXED = lpeg.Cs(((lpeg.P('"') * (lpeg.P("\\") * 1 + (1 - lpeg.S('"\\')))^0 * lpeg.P('"')^-1)
  + lpeg.P("{") * ws * lpeg.P("}") / "{}" + lpeg.P("[") * ws * lpeg.P("]") / "[]" + 1)^0)

local M = {}

local array_mt = { __jsontype = "array", __name = "json.array" }
--- Marks t as a JSON array (needed only for empty tables).
function M.array(t) return setmetatable(t or {}, array_mt) end
M.null = dkjson.null

--- Whether t encodes as an array: marked, or a non-empty sequence with nothing else in it.
function M.is_array(t)
  if getmetatable(t) == array_mt then return true end
  local n = #t
  if n == 0 then return false end
  local count = 0
  for _ in pairs(t) do count = count + 1 end
  return count == n
end

-- A number's text: floats exact and with a '.' or exponent, integers as integers; nil for NaN and +-Inf.
local FLOAT_FORMATS = { "%.15g", "%.16g", "%.17g" }
local function number_text(v)
  if mtype(v) == "integer" then return tostring(v) end
  if v ~= v or v == math.huge or v == -math.huge then return nil end
  local s
  for i = 1, 3 do
    s = format(FLOAT_FORMATS[i], v)
    if tonumber(s) == v then break end
  end
  if not s:find("[.eEn]") then s = s .. ".0" end
  return s
end

-- A string's JSON text with dkjson's escapes: its quotestring makes two or more pattern searches of every
-- string, so only a string holding a byte it may escape (a control, '"', '\\', DEL, or a lead byte of the
-- UTF-8 sequences it escapes) goes to it. Printable ASCII other than '"' and '\\' (most of a record's strings)
-- is told by one LPeg charset test a byte, cheaper than a find with that class of ten items.
local PLAIN = lpeg.R(" !", "#[", "]~")^0 * -1
local function quote(s)
  if not match(PLAIN, s) and find(s, '[%c"\\\127\194\216\220\225\226\239]') then return dkjson.quotestring(s) end
  return '"' .. s .. '"'
end

-- Appends v's JSON text to buf, in dkjson's layout (its pretty printer's: an object's pairs one a line, two
-- spaces a level, arrays on one line) and with its string escapes, in one pass: building a copy of v with
-- dkjson's markers on every value for dkjson to encode cost a host run 1.5 ms for its 7 KB record (0.86 in one
-- pass; 4.0 M instructions against 5.9 M once each number's text was made once, plain strings told by LPeg and
-- the keys sorted without a Lua comparator).
-- order: {rank = key -> its place in the caller's keyorder, names = that keyorder} (the other keys follow, sorted).
local PADS = setmetatable({}, { __index = function(pads, level) -- a new line and the indent of a level
  local pad = "\n" .. ("  "):rep(level)
  pads[level] = pad
  return pad
end })
local function put(buf, v, order, indent, level)
  local t = type(v)
  if t == "number" then
    buf[#buf + 1] = number_text(v) or "null"
  elseif t == "string" then
    buf[#buf + 1] = quote(v)
  elseif t == "boolean" then
    buf[#buf + 1] = v and "true" or "false"
  elseif v == nil or v == M.null then
    buf[#buf + 1] = "null"
  elseif t ~= "table" then
    error("json: cannot encode a " .. t, 0)
  elseif level > 100 then
    error("json: nesting too deep (cycle?)", 0)
  elseif M.is_array(v) then
    buf[#buf + 1] = "["
    for i = 1, #v do
      if i > 1 then buf[#buf + 1] = "," end
      put(buf, v[i], order, indent, level + 1) -- a hole, NaN or Inf: null, the other elements keep their places
    end
    buf[#buf + 1] = "]"
  else
    -- the keys in the caller's order by their places in it, then the others by name: two sorts by Lua's own `<`,
    -- not one calling a Lua comparator; a number's text is made once, here, where NaN and +-Inf leave their key out
    local places, rest, names, numbers = {}, {}, {}, {}
    for k, x in pairs(v) do
      local kt = type(k)
      if kt ~= "string" and kt ~= "number" then error("json: cannot encode a key of type " .. kt, 0) end
      local text = type(x) ~= "number" or number_text(x)
      if text then
        local name = kt == "string" and k or tostring(k)
        local place = order.rank[name]
        if place then places[#places + 1] = place else rest[#rest + 1] = name end
        names[name], numbers[name] = k, text ~= true and text or nil
      end
    end
    table.sort(places)
    table.sort(rest)
    local keys = {}
    for i = 1, #places do keys[i] = order.names[places[i]] end
    table.move(rest, 1, #rest, #keys + 1, keys)
    local pad = indent and PADS[level + 1]
    buf[#buf + 1] = "{"
    for i = 1, #keys do
      local name = keys[i]
      if i > 1 then buf[#buf + 1] = "," end
      if pad then buf[#buf + 1] = pad end
      buf[#buf + 1] = quote(name)
      buf[#buf + 1] = ":"
      local text = numbers[name]
      if text then buf[#buf + 1] = text else put(buf, v[names[name]], order, indent, level + 1) end
    end
    if indent then buf[#buf + 1] = PADS[level] end
    buf[#buf + 1] = "}"
  end
end

-- keyorder lists are turned into rank tables once (without one, every key sorts by name)
local NO_ORDER = { rank = {}, names = {} }
local orders = setmetatable({}, { __mode = "k" })

--- Encodes v. opts.indent = true pretty-prints (two spaces a level); opts.keyorder: a list of keys written first, in
--- that order, in every object (the others follow sorted).
---@param v any
---@param opts {indent: boolean?, keyorder: string[]?}?
---@return string
function M.encode(v, opts)
  opts = opts or {}
  local order = NO_ORDER
  if opts.keyorder then
    order = orders[opts.keyorder]
    if not order then
      order = { rank = {}, names = opts.keyorder }
      for i, k in ipairs(opts.keyorder) do order.rank[k] = i end
      orders[opts.keyorder] = order
    end
  end
  local t = type(v)
  if t ~= "table" and t ~= "number" and t ~= "string" and t ~= "boolean" and v ~= nil then
    error("json: cannot encode a " .. t, 2)
  end
  local buf = {}
  put(buf, v, order, opts.indent, 0)
  return table.concat(buf)
end

-- null in an object is an absent key (records test fields with `if rec.x`); in arrays it keeps its place
local function drop_object_nulls(v)
  if type(v) ~= "table" then return end
  local is_arr = getmetatable(v) == array_mt
  for k, x in pairs(v) do
    if x == M.null then
      if not is_arr then v[k] = nil end
    else
      drop_object_nulls(x)
    end
  end
end

--- Decodes a JSON text. Returns the value, or nil and an error message (malformed input is data).
---@param s string
---@return any value
---@return string? err
function M.decode(s)
  if type(s) ~= "string" then return nil, "json: not a string" end
  local text = lpeg.match(EMPTY_FIXED, s)
  local v, pos, err = dkjson.decode(text, 1, M.null, nil, array_mt)
  if err then return nil, "json: " .. err end
  local rest = text:find("[^ \t\r\n]", pos)
  if rest then return nil, ("json: trailing data at byte %d"):format(rest) end
  if v == nil then return nil, "json: no value" end
  drop_object_nulls(v)
  return v
end

return M
