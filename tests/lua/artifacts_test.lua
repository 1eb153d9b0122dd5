-- odp.parse.artifacts: base64 artifact blocks in device logs (both forms), against the real fixture bytes.
local T = require("t")
local A = require("odp.parse.artifacts")
local sys = require("odp.sys")

local etd = T.read(T.root() .. "/tests/fixtures/etdump/docs_tutorial.etdp")
local b64 = sys.base64_encode(etd)

local function run_this(data, name, size)
  return ("[base64] buffer size: %d\n#[RUN THIS]\necho \"%s\" | base64 -d >%s\n#[END]\n")
    :format(size or #data, sys.base64_encode(data), name)
end

local function begin_end(data, name, width)
  local s = sys.base64_encode(data)
  local lines = { "begin " .. name }
  for i = 1, #s, width or 76 do lines[#lines + 1] = s:sub(i, i + (width or 76) - 1) end
  lines[#lines + 1] = "end"
  return table.concat(lines, "\n") .. "\n"
end

T.test("base64 agrees with Python's base64 module on every length 0..300, both ways", function()
  local data = {}
  for n = 0, 300 do
    local s = {}
    for i = 1, n do s[i] = string.char((i * 37 + n) % 256) end
    data[n + 1] = table.concat(s)
  end
  local hex = {}
  for i, s in ipairs(data) do hex[i] = (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end
  local py = assert(require("odp.proc").run { "/usr/bin/python3", "-c",
    "import base64, json, sys\nprint(json.dumps([base64.b64encode(bytes.fromhex(h)).decode() for h in json.load(sys.stdin)]))",
    stdin = require("odp.core.json").encode(hex), timeout = 60 })
  T.eq(py.status, 0, py.stderr)
  local want = require("odp.core.json").decode(py.stdout)
  T.eq(#want, 301)
  for i, s in ipairs(data) do
    T.eq(sys.base64_encode(s), want[i], "odp.sys.base64_encode, length " .. i - 1)
    T.eq(A.base64_decode(want[i]), s, "odp.parse.artifacts.base64_decode, length " .. i - 1)
  end
end)

T.test("base64_decode rejects bad length, characters and padding", function()
  T.eq(select(2, A.base64_decode("abc")):match("multiple of 4") ~= nil, true)
  T.match(select(2, A.base64_decode("ab!d")), "invalid character")
  T.match(select(2, A.base64_decode("a===")), "padding")
  T.eq(A.base64_decode("ab=d"), nil, "padding in the middle")
  -- the C decoder alone (odp.sys): whitespace ignored, padding checked
  T.eq(sys.base64_decode("aGVs\nbG8=\n"), "hello")
  T.eq(sys.base64_decode("aGVsbG8"), nil, "missing padding")
  T.eq(sys.base64_decode("aG=sbG8="), nil, "'=' inside")
end)

T.test("base64_decode of more than one 4 MiB slice, checked against coreutils base64", function()
  local data = ("0123456789abcdef"):rep(6 * 65536 + 7) -- 6 MiB + 112 bytes
  local f = T.tmpdir() .. "/big.b64"
  T.write(f, sys.base64_encode(data))
  local r = require("odp.proc").run { argv = { "base64", "-d", f }, timeout = 60 }
  T.eq(r.stdout == data, true, "coreutils agrees with the encoder")
  T.eq(A.base64_decode(T.read(f)) == data, true, "decoded across slices")
end)

T.test("RUN THIS block: the fixture ETDump comes back byte-identical, with its announced size", function()
  local log = "odp-twin runner v1 boot 1\nInference: 0.7 ms\n" .. run_this(etd, "etdump.bin") .. "odp-twin done\n"
  local r = A.decode(log)
  T.eq(#r.errors, 0, "errors")
  T.eq(#r.artifacts, 1)
  T.eq(r.artifacts[1].name, "etdump.bin")
  T.eq(r.artifacts[1].expected_bytes, #etd)
  T.ok(r.artifacts[1].data == etd, "identical bytes")
end)

T.test("RUN THIS with the bare-metal runner's log prefix and two files in one block", function()
  local log = "I [executorch:arm_executor_runner.cpp:500 main()] [base64] buffer size: 2320\n#[RUN THIS]\n" ..
    "echo \"" .. b64 .. "\" | base64 -d >etdump.bin\necho \"AAEC\" | base64 -d > debug_buffer.bin\n#[END]\n"
  local r = A.decode(log)
  T.eq(#r.errors, 0)
  T.eq(#r.artifacts, 2)
  T.ok(r.artifacts[1].data == etd)
  T.eq(r.artifacts[2].name, "debug_buffer.bin")
  T.eq(r.artifacts[2].data, "\0\1\2")
end)

T.test("begin/end block with wrapped lines and CRLF", function()
  local log = begin_end(etd, "output.bin", 76):gsub("\n", "\r\n")
  local r = A.decode(log)
  T.eq(#r.errors, 0)
  T.eq(r.artifacts[1].name, "output.bin")
  T.ok(r.artifacts[1].data == etd)
end)

T.test("fed line by line (as RTT delivers them) equals the whole-text decode", function()
  local d = A.decoder()
  for line in (run_this(etd, "etdump.bin") .. begin_end("hello", "output.bin")):gmatch("([^\n]*)\n") do d:line(line) end
  local r = d:finish()
  T.eq(#r.artifacts, 2)
  T.eq(r.artifacts[2].data, "hello")
end)

T.test("truncated block (the firmware stopped half way): an error, no artifact", function()
  local half = b64:sub(1, #b64 // 2)
  local r = A.decode("[base64] buffer size: 2320\n#[RUN THIS]\necho \"" .. half .. "\nodp-twin done\n")
  T.eq(#r.artifacts, 0)
  T.ok(#r.errors >= 1)
  T.match(r.errors[1].message, "truncated")
  T.eq(r.errors[1].name, "?") -- the name sits after the quote that never came
  local r2 = A.decode("begin output.bin\nAAAA\n")
  T.eq(#r2.artifacts, 0)
  T.match(r2.errors[1].message, "never ended")
  T.eq(r2.errors[1].name, "output.bin")
end)

T.test("corrupt base64 and a wrong size are errors naming the file", function()
  local bad = b64:sub(1, 100) .. "!!!!" .. b64:sub(105)
  local r = A.decode("#[RUN THIS]\necho \"" .. bad .. "\" | base64 -d >etdump.bin\n#[END]\n")
  T.eq(#r.artifacts, 0)
  T.eq(r.errors[1].name, "etdump.bin")
  T.match(r.errors[1].message, "corrupt base64: invalid character")
  local r2 = A.decode(run_this(etd, "etdump.bin", #etd + 1))
  T.eq(#r2.artifacts, 0)
  T.match(r2.errors[1].message, "announced 2321 bytes, decoded 2320")
end)

T.test("a foreign line inside a begin/end block ends it with an error", function()
  local r = A.decode("begin out.bin\nAAAA\nInference: 1.0 ms\nend\n")
  T.eq(#r.artifacts, 0)
  T.match(r.errors[1].message, "unexpected line")
end)

T.test("max_bytes bounds what one artifact may hold", function()
  local r = A.decode(run_this(etd, "etdump.bin"), { max_bytes = 1000 })
  T.eq(#r.artifacts, 0)
  T.match(r.errors[1].message, "refused")
  T.raises(function() A.decoder { bogus = 1 } end, "unknown option")
end)

T.test("forms are a table a user extends", function()
  local forms = { table.unpack(A.forms) }
  forms[#forms + 1] = { name = "hex", start = "^<<<(%S+)$", stop = "^>>>$",
    data = function(line) return nil, sys.base64_encode((line:gsub("%x%x", function(h)
      return string.char(tonumber(h, 16)) end))) end }
  local r = A.decode("<<<x.bin\n414243\n>>>\n", { forms = forms })
  T.eq(#r.errors, 0)
  T.eq(r.artifacts[1].data, "ABC")
end)

T.test("safe_name keeps artifacts inside the run directory", function()
  T.eq(A.safe_name("../../etc/passwd"), "passwd")
  T.eq(A.safe_name(".bashrc"), "bashrc")
  T.eq(A.safe_name("etdump.bin"), "etdump.bin")
  T.eq(A.safe_name(""), "artifact.bin")
end)

T.done()
