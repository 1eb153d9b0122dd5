--- JSON encode/decode. Keys of the result record come out in a readable order (schema first); other
-- objects sort their keys, so output is stable. An empty table encodes as {} unless marked json.array.
local M = {}

local array_mt = { __name = "json.array" }
--- Marks t as a JSON array (needed only for empty tables).
function M.array(t) return setmetatable(t or {}, array_mt) end
M.null = setmetatable({}, { __name = "json.null", __tostring = function() return "null" end })

local ORDER = {}
for i, k in ipairs({ "schema", "kind", "ok", "flow", "device", "target", "started_at", "odp_version", "model",
  "runner", "params", "status", "signal", "latency_ms", "load_ms", "peak_rss_kb", "planned_buffers", "outputs",
  "artifacts", "ops", "warnings", "error", "path", "sha256", "bytes", "n", "total", "mean", "min", "p10", "p50",
  "p90", "p99", "max", "std", "source", "code", "message", "name", "block" }) do ORDER[k] = i end

local function key_less(a, b)
  local oa, ob = ORDER[a], ORDER[b]
  if oa and ob then return oa < ob end
  if oa or ob then return oa ~= nil end
  return a < b
end

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
  ["\r"] = "\\r", ["\t"] = "\\t" }
local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or ("\\u%04x"):format(c:byte())
  end) .. '"'
end

local function number(v)
  if math.type(v) == "integer" then return tostring(v) end
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return ("%d"):format(v) end
  local s = ("%.15g"):format(v)
  if tonumber(s) ~= v then s = ("%.17g"):format(v) end
  return s
end

local function is_array(t)
  if getmetatable(t) == array_mt then return true end
  local n = #t
  if n == 0 then return false end
  local count = 0
  for _ in pairs(t) do count = count + 1 end
  return count == n
end

local function encode(v, indent, depth, out)
  local t = type(v)
  if v == nil or v == M.null then out[#out + 1] = "null"
  elseif t == "boolean" then out[#out + 1] = tostring(v)
  elseif t == "number" then out[#out + 1] = number(v)
  elseif t == "string" then out[#out + 1] = quote(v)
  elseif t == "table" then
    if depth > 100 then error("json: nesting too deep (cycle?)") end
    local nl = indent and ("\n" .. indent:rep(depth + 1)) or ""
    local close = indent and ("\n" .. indent:rep(depth)) or ""
    local sep = indent and ": " or ":"
    if is_array(v) or (next(v) == nil and getmetatable(v) == array_mt) then
      if #v == 0 then out[#out + 1] = "[]" return end
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = nl
        encode(v[i], indent, depth + 1, out)
      end
      out[#out + 1] = close .. "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" and type(k) ~= "number" then error("json: cannot encode a key of type " .. type(k)) end
        keys[#keys + 1] = tostring(k)
      end
      if #keys == 0 then out[#out + 1] = "{}" return end
      table.sort(keys, key_less)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = nl .. quote(k) .. sep
        local val = v[k]
        if val == nil then val = v[tonumber(k)] end
        encode(val, indent, depth + 1, out)
      end
      out[#out + 1] = close .. "}"
    end
  else
    error("json: cannot encode a " .. t)
  end
end

--- Encodes v; opts.indent (e.g. "  ") pretty-prints.
function M.encode(v, opts)
  local out = {}
  encode(v, opts and opts.indent, 0, out)
  return table.concat(out)
end

-- Decoder ------------------------------------------------------------------------------------------
local decode_value

local function decode_error(s, i, what)
  error(("json: %s at byte %d"):format(what, i), 0)
end

local function skip(s, i) return s:find("[^ \t\r\n]", i) or #s + 1 end

local function decode_string(s, i)
  local parts, j = {}, i + 1
  while true do
    local a, b = s:find('["\\%c]', j)
    if not a then decode_error(s, i, "unterminated string") end
    parts[#parts + 1] = s:sub(j, a - 1)
    local c = s:sub(a, a)
    if c == '"' then return table.concat(parts), b + 1 end
    if c ~= "\\" then decode_error(s, a, "control character in string") end
    local e = s:sub(a + 1, a + 1)
    local map = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", ['"'] = '"', ["\\"] = "\\", ["/"] = "/" }
    if map[e] then
      parts[#parts + 1] = map[e]
      j = a + 2
    elseif e == "u" then
      local hex = s:match("^%x%x%x%x", a + 2)
      if not hex then decode_error(s, a, "bad \\u escape") end
      local cp = tonumber(hex, 16)
      j = a + 6
      if cp >= 0xD800 and cp <= 0xDBFF then
        local lo = s:match("^\\u(%x%x%x%x)", j)
        if lo then
          cp = 0x10000 + ((cp - 0xD800) << 10) + (tonumber(lo, 16) - 0xDC00)
          j = j + 6
        end
      end
      parts[#parts + 1] = utf8.char(cp)
    else
      decode_error(s, a, "bad escape")
    end
  end
end

function decode_value(s, i)
  i = skip(s, i)
  local c = s:sub(i, i)
  if c == "{" then
    local obj = {}
    i = skip(s, i + 1)
    if s:sub(i, i) == "}" then return obj, i + 1 end
    while true do
      if s:sub(i, i) ~= '"' then decode_error(s, i, "expected a key") end
      local k
      k, i = decode_string(s, i)
      i = skip(s, i)
      if s:sub(i, i) ~= ":" then decode_error(s, i, "expected ':'") end
      obj[k], i = decode_value(s, i + 1)
      i = skip(s, i)
      local d = s:sub(i, i)
      if d == "}" then return obj, i + 1 end
      if d ~= "," then decode_error(s, i, "expected ',' or '}'") end
      i = skip(s, i + 1)
    end
  elseif c == "[" then
    local arr = M.array({})
    i = skip(s, i + 1)
    if s:sub(i, i) == "]" then return arr, i + 1 end
    while true do
      local v
      v, i = decode_value(s, i)
      arr[#arr + 1] = v
      i = skip(s, i)
      local d = s:sub(i, i)
      if d == "]" then return arr, i + 1 end
      if d ~= "," then decode_error(s, i, "expected ',' or ']'") end
      i = i + 1
    end
  elseif c == '"' then
    return decode_string(s, i)
  elseif s:find("^true", i) then return true, i + 4
  elseif s:find("^false", i) then return false, i + 5
  elseif s:find("^null", i) then return nil, i + 4
  else
    local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", i)
    if not num or num == "" or num == "-" then decode_error(s, i, "unexpected character") end
    local v = math.tointeger(tonumber(num)) or tonumber(num)
    if not v then decode_error(s, i, "bad number") end
    return v, i + #num
  end
end

--- Decodes a JSON text. Returns the value, or nil and an error message (malformed input is data).
function M.decode(s)
  local ok, v, i = pcall(decode_value, s, 1)
  if not ok then return nil, v end
  if skip(s, i) <= #s then return nil, ("json: trailing data at byte %d"):format(skip(s, i)) end
  return v
end

return M
