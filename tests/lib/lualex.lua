-- A small Lua lexer for the tests that read odp's own sources (layers_test: its requires; errors_test: its
-- errors.fail calls and its writes): tokens {t = "id"|"str"|"num"|"op", v, line} with strings' contents as
-- their value (a long string's as ""), and the comments by line. Enough for Lua 5.4 source that loads.
local M = {}

function M.lex(src)
  local toks, comments, i, line, n = {}, {}, 1, 1, #src
  local function long_bracket(at) -- [[...]] / [==[...]==] starting at `at` -> the index after it, or nil
    local eq = src:match("^%[(=*)%[", at)
    if not eq then return nil end
    local _, e = src:find("]" .. eq .. "]", at, true)
    return (e or n) + 1
  end
  while i <= n do
    local c = src:sub(i, i)
    if c == "\n" then line = line + 1 i = i + 1
    elseif c:match("%s") then i = i + 1
    elseif src:sub(i, i + 1) == "--" then
      local stop = long_bracket(i + 2)
      if stop then
        local text = src:sub(i, stop - 1)
        comments[line] = (comments[line] or "") .. text
        local _, nl = text:gsub("\n", "")
        line, i = line + nl, stop
      else
        local e = src:find("\n", i, true) or n + 1
        comments[line] = (comments[line] or "") .. src:sub(i, e - 1)
        i = e
      end
    elseif c == '"' or c == "'" then
      local j, buf = i + 1, {}
      while j <= n do
        local d = src:sub(j, j)
        if d == "\\" then buf[#buf + 1] = src:sub(j, j + 1) j = j + 2
        elseif d == c then break
        else buf[#buf + 1] = d j = j + 1 end
      end
      toks[#toks + 1] = { t = "str", v = table.concat(buf), line = line }
      i = j + 1
    elseif c == "[" and long_bracket(i) then
      local stop = long_bracket(i)
      local _, nl = src:sub(i, stop - 1):gsub("\n", "")
      toks[#toks + 1] = { t = "str", v = "", line = line }
      line, i = line + nl, stop
    elseif c:match("[%a_]") then
      local w = src:match("^[%w_]+", i)
      toks[#toks + 1] = { t = "id", v = w, line = line }
      i = i + #w
    elseif c:match("%d") then
      local w = src:match("^[%w_%.]+", i)
      toks[#toks + 1] = { t = "num", v = w, line = line }
      i = i + #w
    else
      local op = src:match("^%.%.%.?", i) or src:match("^[=~<>]=", i) or src:match("^::", i) or c
      toks[#toks + 1] = { t = "op", v = op, line = line }
      i = i + #op
    end
  end
  return toks, comments
end

--- The calls of `name` (e.g. "errors.fail", "print") in toks: {line, args = number of top-level arguments}.
function M.calls(toks, name)
  local parts, out = {}, {}
  for w in name:gmatch("[^.:]+") do parts[#parts + 1] = w end
  for k = 1, #toks do
    local ok = true
    for j, w in ipairs(parts) do
      local tk = toks[k + 2 * (j - 1)]
      if not tk or tk.t ~= "id" or tk.v ~= w then ok = false break end
      if j < #parts then
        local sep = toks[k + 2 * j - 1]
        if not sep or sep.t ~= "op" or (sep.v ~= "." and sep.v ~= ":") then ok = false break end
      end
    end
    local prev = toks[k - 1]
    if ok and prev and prev.t == "op" and (prev.v == "." or prev.v == ":") then ok = false end -- x.print is not print
    local open = toks[k + 2 * #parts - 1]
    if ok and open and open.t == "op" and open.v == "(" then
      local depth, args, j = 1, 0, k + 2 * #parts
      if not (toks[j] and toks[j].t == "op" and toks[j].v == ")") then args = 1 end
      while toks[j] and depth > 0 do
        local v = toks[j].t == "op" and toks[j].v
        if v == "(" or v == "{" or v == "[" then depth = depth + 1
        elseif v == ")" or v == "}" or v == "]" then depth = depth - 1
        elseif v == "," and depth == 1 then args = args + 1 end
        j = j + 1
      end
      out[#out + 1] = { line = toks[k].line, args = args }
    end
  end
  return out
end

return M
