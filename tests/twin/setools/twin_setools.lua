-- Shared code of the SETOOLS stand-ins (app-gen-toc, app-write-mram) for the twin board.
-- Tests only; see tests/twin/README.md "SETOOLS stand-ins". Plain Lua 5.4, no modules beyond the standard library.
local M = {}

function M.die(fmt, ...)
  io.stderr:write(string.format(fmt, ...), "\n")
  os.exit(1)
end

-- A small JSON reader (objects, arrays, strings, numbers, true/false/null): enough for SETOOLS configs.
-- Object key order is kept in t.__order because the TOC lists images in config order.
function M.json_decode(s)
  local pos = 1
  local function err(msg) error(string.format("JSON: %s at byte %d", msg, pos), 0) end
  local function ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
  local value
  local function str()
    local out, i = {}, pos + 1
    while true do
      local c = s:sub(i, i)
      if c == "" then err("unterminated string") end
      if c == '"' then pos = i + 1; return table.concat(out) end
      if c == "\\" then
        local e = s:sub(i + 1, i + 1)
        local map = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }
        if map[e] then out[#out + 1] = map[e]; i = i + 2
        elseif e == "u" then out[#out + 1] = utf8.char(tonumber(s:sub(i + 2, i + 5), 16) or err("bad \\u")); i = i + 6
        else err("bad escape") end
      else out[#out + 1] = c; i = i + 1 end
    end
  end
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" then
      local t, order = {}, {}
      pos = pos + 1; ws()
      if s:sub(pos, pos) == "}" then pos = pos + 1; t.__order = order; return t end
      while true do
        ws()
        if s:sub(pos, pos) ~= '"' then err("expected a key") end
        local k = str(); ws()
        if s:sub(pos, pos) ~= ":" then err("expected ':'") end
        pos = pos + 1
        t[k] = value(); order[#order + 1] = k; ws()
        local d = s:sub(pos, pos); pos = pos + 1
        if d == "}" then t.__order = order; return t end
        if d ~= "," then err("expected ',' or '}'") end
      end
    elseif c == "[" then
      local t = {}
      pos = pos + 1; ws()
      if s:sub(pos, pos) == "]" then pos = pos + 1; return t end
      while true do
        t[#t + 1] = value(); ws()
        local d = s:sub(pos, pos); pos = pos + 1
        if d == "]" then return t end
        if d ~= "," then err("expected ',' or ']'") end
      end
    elseif c == '"' then return str()
    elseif s:find("^true", pos) then pos = pos + 4; return true
    elseif s:find("^false", pos) then pos = pos + 5; return false
    elseif s:find("^null", pos) then pos = pos + 4; return nil
    else
      local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      if not num or num == "" then err("unexpected character") end
      pos = pos + #num
      return tonumber(num)
    end
  end
  local ok, v = pcall(value)
  if not ok then return nil, v end
  ws()
  if pos <= #s then return nil, "JSON: trailing data at byte " .. pos end
  return v
end

function M.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local d = f:read("a"); f:close(); return d
end

function M.read_prefix(path, n)
  local f = io.open(path, "rb")
  if not f then return nil end
  local d = f:read(n); f:close(); return d
end

function M.here()
  return (arg[0]:match("^(.*)/[^/]*$") or ".")
end

function M.sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- TOC file written by app-gen-toc, read by app-write-mram (our own text format, see README.md).
M.TOC = "build/AppTocPackage.bin"
M.TOC_MAGIC = "ODP-TWIN-TOC 1"
return M
