--- What the C bindings (src/l_*.c) accept and return, read from their source: the other side of the one
-- declaration (docs/api/c_modules.lua) that tests/lua/apidoc_test.lua compares it with.
-- For each registered function ("odp.m.f", or "odp.m.Type.f" for a method) it finds the C function named in
-- the luaL_Reg table and reads, from its body and the static functions of the same file that the body names:
--   opts      the keys of the allowed-list given to odp_checkopts (nil where it checks none)
--   opts_idx  the argument the options table is
--   nargs     the highest literal stack index the body checks or reads (luaL_check*, luaL_opt*, lua_to*, ...),
--             less one for a method's self
--   returns   the largest literal `return N;` (what a success returns; failures go through odp_pushfail)
--   fields    the keys the body (or a helper it names) sets with lua_setfield/set_* helpers: the returned
--             tables' fields, as a set
-- It reads text, so it knows only the idioms the bindings use; a binding written another way is reported as
-- unreadable, never guessed.
local M = {}

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- Every `static int NAME(lua_State *L) { ... }` and `static ... NAME(...)` body of a file, by name.
local function bodies(src)
  local out = {}
  for name, body in src:gmatch("\n[%w_ %*]-[%s%*]([%w_]+)%([^;{)]-%)%s*(%b{})") do out[name] = body end
  return out
end

-- `static const char *const NAME[] = {"a", "b", NULL};` at file scope or in a body, by name.
local function string_lists(src)
  local out = {}
  for name, list in src:gmatch("static const char %*const ([%w_]+)%[%]%s*=%s*(%b{})") do
    local keys = {}
    for k in list:gmatch('"([^"]*)"') do keys[#keys + 1] = k end
    out[name] = keys
  end
  return out
end

local function string_consts(src)
  local out = {}
  for name, value in src:gmatch('#define%s+([%w_]+)%s+"([^"]+)"') do out[name] = value end
  return out
end

-- The body and the same-file static functions it names (two levels: callbacks pass through one helper).
local function reach(fns, name)
  local seen, order = {}, {}
  local function visit(n, depth)
    if seen[n] or not fns[n] then return end
    seen[n] = true
    order[#order + 1] = fns[n]
    if depth == 0 then return end
    for callee in fns[n]:gmatch("([%w_]+)%s*[%(,)]") do visit(callee, depth - 1) end
  end
  visit(name, 2)
  return order
end

local READS = { "lua_settop", "luaL_check%w+", "luaL_opt%w+", "lua_to%w+", "lua_is%w+", "lua_type", "odp_checkopts",
  "odp_opt%w+", "luaL_argcheck", "luaL_argexpected", "lua_rawlen", "odp_check%w+", "odp_exec_opts" }

-- The success count of `return EXPR;`: a literal, or the smaller arm of `c ? X : Y` (a failure returns more:
-- nil, message, code); nil for anything else.
local function returned(expr)
  local n = expr:match("^(%d+)$")
  if n then return tonumber(n) end
  local a, b = expr:match("^[%w_%s%.%->!=<&|]+%?%s*(%d+)%s*:%s*(%d+)$")
  if a then return math.min(tonumber(a), tonumber(b)) end
  return nil
end

local function analyse(fns, lists, fname, is_method, readers)
  local body = fns[fname]
  if not body then return nil end
  -- a one-line binding that hands its whole stack to a helper of the same file: read the helper
  local helper = body:match("^{%s*return%s+([%w_]+)%(L[,%)][^;]*;%s*}$")
  if helper and fns[helper] then return analyse(fns, lists, helper, is_method, readers) end
  local info = { fields = {} }
  local own = string_lists(body)
  local idx, list = body:match("odp_checkopts%(L,%s*(%d+),%s*([%w_]+)%)")
  if idx then
    info.opts_idx = tonumber(idx) - (is_method and 1 or 0)
    info.opts = own[list] or lists[list]
  end
  local top = 0
  for _, pat in ipairs(READS) do
    for n in body:gmatch(pat .. "%(L,%s*(%d+)") do top = math.max(top, tonumber(n)) end
  end
  local function calls(text) -- every call, nested ones too
    for callee, args in text:gmatch("([%w_]+)(%b())") do
      if readers[callee] then
        local i = 0
        for a in args:sub(2, -2):gmatch("[^,]+") do
          i = i + 1
          local n = i == readers[callee] and a:match("^%s*(%d+)%s*$")
          if n then top = math.max(top, tonumber(n)) end
        end
      end
      calls(args:sub(2, -2))
    end
  end
  calls(body)
  -- a helper that reads a fixed argument itself (check_run(L, u) reads argument 2)
  for callee in body:gmatch("([%w_]+)%(L[,)]") do
    local hb = fns[callee]
    if hb and callee ~= fname and not callee:match("^l_") then -- (l_*: another binding, called on a stack it shaped)
      for _, pat in ipairs(READS) do
        if pat ~= "lua_settop" then
          for n in hb:gmatch(pat .. "%(L,%s*(%d+)") do top = math.max(top, tonumber(n)) end
        end
      end
    end
  end
  info.nargs = math.max(0, top - (is_method and 1 or 0))
  for expr in body:gmatch("return%s+([^;]-)%s*;") do
    local n = returned(expr)
    if n then info.returns = math.max(info.returns or 0, n) end
  end
  for _, b in ipairs(reach(fns, fname)) do
    for k in b:gmatch('lua_setfield%(L,%s*%-?%d+,%s*"([%w_]+)"%)') do info.fields[k] = true end
    for k in b:gmatch('set_%w+%(L,%s*"([%w_]+)"') do info.fields[k] = true end
  end
  return info
end

--- {["odp.m.f"] = info} for every C binding under root/src.
function M.read(root)
  local out = {}
  local p = io.popen("ls " .. root .. "/src/l_*.c")
  local files = {}
  for f in p:lines() do files[#files + 1] = f end
  p:close()
  for _, file in ipairs(files) do
    local src = read(file)
    local fns, lists, consts = bodies(src), string_lists(src), string_consts(src)
    -- the file's own argument readers: static helpers taking (lua_State *L, int idx, ...)
    local readers = {}
    -- (name -> which of its parameters is the stack index: one named idx or opts)
    for name, params in src:gmatch("\n[%w_ %*]-[%s%*]([%w_]+)%((lua_State %*L,[^)]*)%)") do
      local i = 0
      for p in params:gmatch("[^,]+") do
        i = i + 1
        if p:match("int%s+idx%s*$") or p:match("int%s+opts%s*$") then readers[name] = i end
      end
    end
    local module = src:match("int luaopen_odp_([%w_]+)%(")
    -- which luaL_Reg table is whose: a class's methods (odp_newclass(L, NAME, methods, meta)) or the module's
    local class_of = {}
    for cname, var in src:gmatch("odp_newclass%(L,%s*([%w_\"%.]+),%s*([%w_]+),") do
      class_of[var] = cname:match('^"(.*)"$') or consts[cname] or cname
    end
    for var, reg in src:gmatch("static const luaL_Reg ([%w_]+)%[%]%s*=%s*(%b{})") do
      local owner = class_of[var]
      if not var:match("meta$") and (owner or module) then
        for lname, cfn in reg:gmatch('{"([%w_]+)",%s*([%w_]+)}') do
          if not lname:match("^__") then
            local key = (owner or ("odp." .. module)) .. "." .. lname
            out[key] = analyse(fns, lists, cfn, owner ~= nil, readers) or { unreadable = cfn }
          end
        end
      end
    end
  end
  return out
end

return M
