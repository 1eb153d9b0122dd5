local T = require("t")
local json = require("odp.json")

T.test("round trip keeps types", function()
  local v = { a = 1, b = 2.5, c = "x\n\"y\"", d = { 1, 2, 3 }, e = true, f = json.array() }
  local back = assert(json.decode(json.encode(v)))
  T.eq(back, v)
  T.eq(math.type(back.a), "integer")
  T.eq(json.encode(back.f), "[]")
end)

T.test("result keys come out in schema order", function()
  T.eq(json.encode({ ok = true, schema = "odp.result/1", zzz = 1, flow = "x" }),
    '{"schema":"odp.result/1","ok":true,"flow":"x","zzz":1}')
end)

T.test("floats survive exactly", function()
  for _, x in ipairs({ 0.1, 42.6452859, 1e-300, 123456789.123 }) do
    T.eq(json.decode(json.encode(x)), x)
  end
  T.eq(json.encode(0 / 0), "null")
end)

T.test("malformed input is an error value, not a raise", function()
  for _, bad in ipairs({ "{", '{"a":}', "[1,]", '"\\q"', "tru", "1 2" }) do
    local v, err = json.decode(bad)
    T.eq(v, nil, bad)
    T.match(err, "^json: ", bad)
  end
end)

T.test("unicode escapes", function()
  T.eq(json.decode('"\\u00e9\\ud83d\\ude00"'), "é😀")
end)
T.done()
