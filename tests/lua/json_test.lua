-- odp.core.json (lua-dkjson underneath) and the record codec of odp.results.result: lossless round trips.
local T = require("t")
local json = require("odp.core.json")
local result = require("odp.results.result")

-- Exact equality: integer vs float, NaN == NaN, json.null, the array marker of empty arrays.
local function same(a, b, path)
  path = path or "$"
  if type(a) ~= type(b) then return false, ("%s: %s vs %s"):format(path, type(a), type(b)) end
  if type(a) == "number" then
    if math.type(a) ~= math.type(b) then return false, ("%s: %s %s vs %s %s"):format(path, math.type(a), a, math.type(b), b) end
    if a ~= b and not (a ~= a and b ~= b) then return false, ("%s: %.17g vs %.17g"):format(path, a, b) end
    return true
  end
  if type(a) ~= "table" then
    if a ~= b then return false, ("%s: %q vs %q"):format(path, tostring(a), tostring(b)) end
    return true
  end
  if a == json.null or b == json.null then return a == b, path .. ": null vs value" end
  if json.is_array(a) ~= json.is_array(b) then return false, path .. ": array vs object" end
  for k, v in pairs(a) do
    local ok, why = same(v, b[k], path .. "." .. tostring(k))
    if not ok then return false, why end
  end
  for k in pairs(b) do
    if a[k] == nil then return false, path .. "." .. tostring(k) .. ": extra" end
  end
  return true
end

T.test("round trip keeps types, null places and empty arrays", function()
  local v = { a = 1, b = 2.5, c = "x\n\"y\"", d = { 1, 2, 3 }, e = true, f = json.array(), g = 1.0,
    h = { 1, json.null, 2 }, n = 3 }
  local back = assert(json.decode(json.encode(v)))
  T.ok(same(v, back))
  T.eq(json.encode(back.f), "[]")
  T.eq(math.type(back.g), "float"); T.eq(json.encode(1.0), "1.0")
  T.eq(json.encode({ n = 3 }), '{"n":3}', "an object with an n field is not an array")
  local arr = assert(json.decode("[1,null,2]"))
  T.eq(#arr, 3); T.eq(arr[2], json.null); T.eq(arr[3], 2)
  T.eq(assert(json.decode('{"a":null,"b":1}')).a, nil, "null in an object is an absent key")
  -- dkjson's lpeg grammar alone rejects whitespace in empty containers, which its pretty printer writes
  T.eq(json.encode(assert(json.decode('{"a": { }, "b": [\n ]}'))), '{"a":{},"b":[]}')
end)

T.test("keyorder puts the listed keys first, the rest sorted; a record comes out in the result module's order", function()
  T.eq(json.encode({ ok = true, schema = "odp.result/1", zzz = 1, flow = "x", aaa = 2 }),
    '{"aaa":2,"flow":"x","ok":true,"schema":"odp.result/1","zzz":1}')
  T.eq(result.encode({ ok = true, schema = "odp.result/1", zzz = 1, flow = "x", aaa = 2 }),
    '{"schema":"odp.result/1","ok":true,"flow":"x","aaa":2,"zzz":1}')
end)

T.test("floats survive exactly; NaN and Inf have no JSON form outside outputs", function()
  for _, x in ipairs({ 0.1, 0.1 + 0.2, 42.6452859, 1e-300, 123456789.123, 5e-324, 1.7976931348623157e308, -0.0 }) do
    T.ok(same(json.decode(json.encode(x)), x), ("%.17g"):format(x))
  end
  T.eq(json.encode(0 / 0), "null"); T.eq(json.encode({ 1 / 0 }), "[null]")
end)

T.test("model outputs with NaN/Inf round-trip through the record codec as strings", function()
  local rec = { schema = result.SCHEMA, ok = true,
    outputs = { { index = 0, values = { 1.5, 0 / 0, 1 / 0, -1 / 0, json.null, 2.0 } } } }
  local text = result.encode(rec)
  T.match(text, '"values":%[1%.5,"NaN","Infinity","%-Infinity",null,2%.0%]')
  T.ok(rec.outputs[1].values[2] ~= rec.outputs[1].values[2], "the record itself is not changed")
  local back = assert(result.decode(text))
  T.ok(same(back, rec))
end)

T.test("malformed input is an error value, not a raise", function()
  for _, bad in ipairs({ "{", '{"a":}', '"\\q"', "tru", "1 2", "", '{"a":1', "[1", '"abc' }) do
    local v, err = json.decode(bad)
    T.eq(v, nil, bad)
    T.match(err, "^json: ", bad)
  end
  T.eq(select(2, json.decode(nil)), "json: not a string")
end)

T.test("unicode escapes", function()
  T.eq(json.decode('"\\u00e9\\ud83d\\ude00"'), "é😀")
end)

-- Random records: nested objects and arrays, nulls in arrays, NaN/Inf in outputs, big integers, floats
-- of every exponent (random bit patterns), 1.0, 1e-300, unicode and control characters.
-- Each test runs on a fixed seed (the same records every run); the property also runs on a fresh seed, named
-- in its test line, that ODP_JSON_SEED=N replays.
local FIXED_SEED = 1
local fresh_seed = tonumber(os.getenv("ODP_JSON_SEED") or "") or (os.time() * 1000 + require("odp.sys").getpid() % 1000)
local function rnd_string()
  local cps = {}
  for i = 1, math.random(0, 12) do
    local pick = math.random(5)
    if pick == 1 then cps[i] = math.random(0, 31)
    elseif pick == 2 then cps[i] = math.random(0x80, 0xD7FF)
    elseif pick == 3 then cps[i] = math.random(0x10000, 0x10FFFF)
    else cps[i] = math.random(32, 126) end
  end
  return utf8.char(table.unpack(cps))
end
T.test("the encoder writes dkjson's own text (its pretty layout, its escapes) where dkjson writes a value alike", function()
  local dkjson = require("dkjson")
  local empty_object = setmetatable({}, { __jsontype = "object" })
  local v = { name = "x", n = 3, list = { 1, 2, { a = true, b = json.null } }, none = json.array(), obj = empty_object,
    nested = { deep = { deeper = { false, "y" } }, z = -7 }, [5] = "five",
    text = "quote\" back\\ nl\n tab\t ctl\1 del\127 u2028\226\128\168 bom\239\187\191 shy\194\173 é ✓ 😀" }
  local keys = { "5", "deep", "deeper", "list", "n", "name", "nested", "none", "obj", "text", "a", "b", "z" }
  table.sort(keys)
  local marked = {} -- dkjson's keys are as given: the integer key as the string odp writes it
  for k, x in pairs(v) do marked[tostring(k)] = x end
  for _, indent in ipairs { true, false } do
    T.eq(json.encode(v, { indent = indent }), dkjson.encode(marked, { indent = indent, keyorder = keys }))
  end
  math.randomseed(FIXED_SEED)
  for _ = 1, 300 do
    local str = rnd_string()
    T.eq(json.encode(str), dkjson.encode(str), ("%q"):format(str))
  end
end)

local function rnd_float()
  local pick = math.random(6)
  if pick == 1 then return 1.0 elseif pick == 2 then return 1e-300 elseif pick == 3 then return -0.0 end
  while true do
    local x = string.unpack("<d", string.pack("<i8", math.random(math.mininteger, math.maxinteger)))
    if x == x and x ~= 1 / 0 and x ~= -1 / 0 then return x end
  end
end
local function rnd_scalar(in_array)
  local pick = math.random(in_array and 8 or 7)
  if pick == 1 then return math.random(math.mininteger, math.maxinteger)
  elseif pick == 2 then return ({ math.maxinteger, math.mininteger, 0, -1, 2 ^ 53 // 1 + 1 })[math.random(5)]
  elseif pick == 3 then return rnd_float()
  elseif pick == 4 then return rnd_string()
  elseif pick == 5 then return math.random(2) == 1
  elseif pick <= 7 then return math.random(-1000, 1000) + 0.0
  else return json.null end
end
local rnd_value
local function rnd_table(depth)
  if math.random(2) == 1 then
    local a = json.array()
    for i = 1, math.random(0, 6) do a[i] = rnd_value(depth + 1, true) end
    return a
  end
  local o = {}
  for _ = 1, math.random(0, 6) do o[rnd_string()] = rnd_value(depth + 1, false) end
  return o
end
function rnd_value(depth, in_array)
  if depth < 5 and math.random(3) == 1 then return rnd_table(depth) end
  return rnd_scalar(in_array)
end
local function rnd_record()
  local values = json.array()
  for i = 1, math.random(0, 8) do
    values[i] = ({ 0 / 0, 1 / 0, -1 / 0, json.null, rnd_float(), math.random(100) })[math.random(6)]
  end
  return { schema = result.SCHEMA, ok = math.random(2) == 1, params = rnd_table(1), extra = rnd_value(0, false),
    outputs = json.array { { index = 0, values = values } }, latency_ms = { p50 = rnd_float(), n = math.random(1000) } }
end

for _, seed in ipairs { FIXED_SEED, fresh_seed } do
T.test(("property: decode(encode(r)) == r for 500 random records (seed %d%s)")
    :format(seed, seed == FIXED_SEED and ", fixed" or ", fresh: ODP_JSON_SEED=" .. seed .. " replays it"), function()
  math.randomseed(seed)
  for i = 1, 500 do
    local r = rnd_record()
    for _, indent in ipairs { false, true } do
      local text = result.encode(r, { indent = indent })
      local back, err = result.decode(text)
      T.ok(back, ("record %d: %s\n%s"):format(i, err, text))
      local ok, why = same(r, back)
      T.ok(ok, ("record %d: %s\n%s"):format(i, why, text))
    end
  end
end)
end
T.test(("fuzz: 3000 mutated and truncated records decode or fail with an error value, never raise (seed %d)")
    :format(FIXED_SEED), function()
  math.randomseed(FIXED_SEED)
  for i = 1, 3000 do
    local text = result.encode(rnd_record(), { indent = i % 2 == 0 })
    local bytes = { text:byte(1, -1) }
    for _ = 1, math.random(1, 4) do
      local at = math.random(#bytes)
      local how = math.random(3)
      if how == 1 then bytes[at] = math.random(0, 255)
      elseif how == 2 then table.remove(bytes, at)
      else
        local chars = "{}[],:\"\\ 0-eE.n"
        table.insert(bytes, at, chars:byte(math.random(#chars)))
      end
    end
    local mutated = string.char(table.unpack(bytes)):sub(1, math.random(#bytes))
    local ok, v, err = pcall(result.decode, mutated)
    T.ok(ok, ("decode raised on %q: %s"):format(mutated, tostring(v)))
    T.ok(v ~= nil or type(err) == "string", "a value or an error")
  end
end)

T.test("result.file_info: sha256 cached by real path, device, inode, size, mtime and ctime; hashed again when any differs", function()
  local sys, proc = require("odp.sys"), require("odp.proc")
  local dir = T.tmpdir()
  local f, cache = dir .. "/runner", dir .. "/cache.json"
  T.write(f, "abc")
  local want = sys.sha256_file(f)
  -- a file changed within result.RACY_S is hashed, not remembered (a write in the same clock tick would not show)
  T.eq(result.file_info(f, cache), { path = f, sha256 = want, bytes = 3 })
  T.eq(sys.stat(cache), nil, "a file changed just now is not remembered")
  local racy = result.RACY_S
  result.RACY_S = -1 -- remember every file, however recent
  local ok, err = pcall(function()
    T.eq(result.file_info(f, cache), { path = f, sha256 = want, bytes = 3 })
    local known = assert(json.decode(T.read(cache)))
    local entry = known[sys.realpath(f)]
    local st = sys.stat(f)
    T.eq(entry, { bytes = 3, mtime = st.mtime, ctime = st.ctime, dev = st.dev, ino = st.ino, sha256 = want })
    -- an entry that matches in every field is believed (no hashing) ...
    local function with(field, value)
      local e = {}
      for k, v in pairs(entry) do e[k] = v end
      e.sha256 = "cached"
      if field then e[field] = value end
      T.write(cache, json.encode({ [sys.realpath(f)] = e }))
      return result.file_info(f, cache).sha256
    end
    T.eq(with(nil), "cached", "every field the same: the cached sha256")
    -- ... and one that differs in any of them is not: another file at the path, a file changed in place
    T.eq(with("ino", st.ino + 1), want, "another inode (a file renamed into place)")
    T.eq(with("dev", st.dev + 1), want, "another device")
    T.eq(with("ctime", st.ctime - 1), want, "another ctime (changed, then its mtime set back)")
    T.eq(with("mtime", st.mtime - 1), want, "another mtime")
    T.eq(with("bytes", 4), want, "another size")
    -- the same for real: a file of the same size, given the old one's mtime, renamed into its place ...
    T.eq(result.file_info(f, cache).sha256, want)
    T.write(dir .. "/other", "xyz")
    T.eq(proc.run { "touch", "-r", f, dir .. "/other", timeout = 10 }.status, 0)
    T.eq(assert(os.rename(dir .. "/other", f)), true)
    T.eq(sys.stat(f).mtime, st.mtime, "same mtime")
    T.eq(result.file_info(f, cache).sha256, sys.sha256("xyz"), "hashed again")
    -- ... and the file changed in place, its size and mtime kept (a clock tick later: ctime moves on)
    sys.sleep(0.05)
    local mtime = sys.stat(f).mtime
    T.eq(proc.run { "sh", "-c", 'touch -r "$1" "$1.ref" && printf abc > "$1" && touch -r "$1.ref" "$1"', "sh", f,
      timeout = 10 }.status, 0)
    T.eq(sys.stat(f).mtime, mtime, "same mtime")
    T.eq(result.file_info(f, cache).sha256, want, "hashed again")
    T.eq(result.file_info(dir .. "/none", cache), nil)
    T.eq(result.file_info(f).sha256, want, "no cache: always hashed")
    -- a cache in a runs dir not made yet (a run's first record) is written all the same
    local later = dir .. "/runs/.sha256-cache.json"
    T.eq(result.file_info(f, later).sha256, want)
    T.eq(assert(json.decode(T.read(later)))[sys.realpath(f)].sha256, want)
  end)
  result.RACY_S = racy
  assert(ok, err)
end)

T.test("result.file_fact: a file's facts share its cache entry, remembered until the file changes; a changed runner is asked again whether it takes --etdump_path", function()
  local sys, proc = require("odp.sys"), require("odp.proc")
  local stage = require("odp.flows.executorch.stage")
  local dir = T.tmpdir()
  local f, cache = dir .. "/runner", dir .. "/cache.json"
  T.write(f, "ELF ... --etdump_path ...")
  local racy = result.RACY_S
  result.RACY_S = -1 -- remember every file, however recent
  local ok, err = pcall(function()
    local asked = 0
    local function flag(path) asked = asked + 1 return sys.file_contains(path, "etdump_path") end
    T.eq(result.file_fact(f, cache, "etdump_path", flag), true)
    T.eq(result.file_fact(f, cache, "etdump_path", flag), true)
    T.eq(asked, 1, "asked once, then remembered")
    T.eq(stage.takes_etdump_path(f, cache), true)
    local sha = result.file_info(f, cache).sha256
    T.eq(sha, sys.sha256_file(f))
    local entry = assert(json.decode(T.read(cache)))[sys.realpath(f)]
    T.eq({ entry.etdump_path, entry.sha256 }, { true, sha }, "both facts in the file's one entry")
    -- a runner rebuilt without the event tracer, its size and mtime kept, renamed into place: every fact asked again
    T.write(dir .. "/other", "ELF ... --etdump_paht ...")
    T.eq(proc.run { "touch", "-r", f, dir .. "/other", timeout = 10 }.status, 0)
    T.eq(assert(os.rename(dir .. "/other", f)), true)
    T.eq(stage.takes_etdump_path(f, cache), false, "the new runner's own answer")
    T.eq(assert(json.decode(T.read(cache)))[sys.realpath(f)].sha256, nil, "the old runner's sha256 dropped with it")
    T.eq(result.file_info(f, cache).sha256, sys.sha256_file(f))
    -- ... and changed in place again (a clock tick later: ctime moves on), the flag back
    sys.sleep(0.05)
    T.eq(proc.run { "sh", "-c",
      'touch -r "$1" "$1.ref" && printf "ELF ... --etdump_path ..." > "$1" && touch -r "$1.ref" "$1"',
      "sh", f, timeout = 10 }.status, 0)
    T.eq(stage.takes_etdump_path(f, cache), true, "changed in place: asked again")
    -- a fact computed as nil is not remembered (nothing to say), false is
    T.eq(result.file_fact(f, cache, "nothing", function() return nil end), nil)
    T.eq(assert(json.decode(T.read(cache)))[sys.realpath(f)].nothing, nil)
    T.eq(result.file_fact(dir .. "/none", cache, "etdump_path", flag), nil, "no such file")
  end)
  result.RACY_S = racy
  assert(ok, err)
end)

T.test("sys.file_contains agrees with grep -F: across its 64 KiB reads, at either end, absent, a missing file", function()
  local sys, proc = require("odp.sys"), require("odp.proc")
  local dir = T.tmpdir()
  local needle = "etdump_path"
  local function grep(path)
    local r = assert(proc.run { "grep", "-q", "-F", "-a", "--", needle, path, timeout = 10 })
    return r.status == 0
  end
  local filler = ("x"):rep(200 * 1024)
  local cases = {
    { "absent", filler },
    { "at the start", needle .. filler },
    { "at the end", filler .. needle },
    { "across the first 64 KiB read", filler:sub(1, 65536 - 5) .. needle .. filler },
    { "across the second", filler:sub(1, 2 * 65536 - 1) .. needle .. filler },
    { "all but its last byte", filler .. needle:sub(1, -2) },
    { "empty file", "" },
    { "the needle alone", needle },
  }
  for i, c in ipairs(cases) do
    local f = ("%s/%d"):format(dir, i)
    T.write(f, c[2])
    T.eq(sys.file_contains(f, needle), grep(f), c[1])
  end
  T.eq(sys.file_contains(dir .. "/4", needle), true, "the oracle agrees with a case that holds it")
  local found, err, code = sys.file_contains(dir .. "/none", needle)
  T.eq({ found, code }, { nil, "ENOTFOUND" }, err)
  T.ok(not pcall(sys.file_contains, dir .. "/1", ""), "an empty needle is misuse")
end)

T.test("an installed odp finds dkjson too (make install into a temporary prefix)", function()
  local proc = require("odp.proc")
  local prefix = T.tmpdir() .. "/usr"
  local build = os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")
  -- with the flags of the build under test (make asan's ODP_MAKEFLAGS), so that nothing is rebuilt
  local q = require("odp.target.shell").quote
  local r = assert(proc.run { "sh", "-c", ("make -s -C %s %s BUILD=%s install PREFIX=%s"):format(q(T.root()),
    os.getenv("ODP_MAKEFLAGS") or "", q(build), q(prefix)), timeout = 300 })
  T.eq(r.status, 0, r.stderr)
  T.write(prefix .. "/probe.lua", 'local json = require("odp.core.json") print(package.searchpath("odp.core.json", package.path),'
    .. ' json.encode(json.decode("[1,null,2.0]")))')
  r = assert(proc.run { prefix .. "/bin/odp", "run", prefix .. "/probe.lua", timeout = 30 })
  T.eq(r.status, 0, r.stderr)
  T.eq(r.stdout, prefix .. "/share/odp/lua/odp/core/json.lua\t[1,null,2.0]\n")
end)
T.done()
