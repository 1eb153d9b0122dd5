-- Truncated and corrupted variants of every ETDump and .pte fixture: the readers return errors (or a
-- document; a cut ETDump one marked partial), never crash or raise. (The libFuzzer targets in tests/fuzz go
-- much further; this runs everywhere.)
local T = require("t")
local etdump = require("odp.parse.etdump")
local pte = require("odp.parse.pte")
local sys = require("odp.sys")

local root = T.root() .. "/tests/fixtures/"

local function files(dir, pattern)
  local out = {}
  for _, name in ipairs(assert(sys.readdir(root .. dir))) do
    if name:match(pattern) then out[#out + 1] = root .. dir .. "/" .. name end
  end
  table.sort(out)
  return out
end

local function check(read, bytes, what)
  local ok, doc, err, code = pcall(read, bytes)
  if not ok then error(what .. " raised: " .. tostring(doc), 0) end
  if doc == nil then
    if code ~= "EPROTO" then error(("%s: code %s (%s), expected EPROTO"):format(what, tostring(code), tostring(err)), 0) end
    return false
  end
  return doc
end

local readers = {
  { "etdump", files("etdump", "%.etd[ump]*$"), etdump.decode, true },
  { "pte", files("pte", "%.pte$"), pte.decode, false },
}

for _, r in ipairs(readers) do
  local kind, list, read, prefixed = r[1], r[2], r[3], r[4]
  T.test(kind .. ": every truncation of every fixture is an error or a document, never a crash", function()
    T.ok(#list >= 4, "fixtures found")
    for _, path in ipairs(list) do
      local bytes = T.read(path)
      local step = math.max(1, #bytes // 600)
      local errors_seen = 0
      for len = 0, #bytes - 1, step do
        local doc = check(read, bytes:sub(1, len), ("%s cut to %d"):format(path, len))
        if not doc then
          errors_seen = errors_seen + 1
        elseif prefixed and len > 0 and not (doc.partial and doc.partial.bytes == len) then
          -- read as far as it goes (odp.parse.etdump), but never passed off as whole
          error(("%s cut to %d bytes was accepted as whole: the size prefix must catch it"):format(path, len), 0)
        end
      end
      T.ok(errors_seen > 0, path .. ": truncations too short to read are errors")
    end
  end)

  T.test(kind .. ": random byte corruption of every fixture is an error or a document, never a crash", function()
    local rnd = T.lcg(7)
    for _, path in ipairs(list) do
      local bytes = T.read(path)
      if #bytes >= 16 then
        for i = 1, 300 do
          local b = { bytes:byte(1, -1) }
          for _ = 1, 1 + rnd(4) do
            local pos = 9 + rnd(#b - 8) -- keep the identifier, so the walk goes deep
            b[pos] = rnd(256)
          end
          local s = {}
          for j = 1, #b, 4096 do s[#s + 1] = string.char(table.unpack(b, j, math.min(j + 4095, #b))) end
          check(read, table.concat(s), ("%s corruption %d"):format(path, i))
        end
      end
    end
  end)
end

T.done()
