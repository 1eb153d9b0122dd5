-- probe.open{backend = "jlink", ip = "HOST[:PORT]"}: a J-Link through J-Link Remote Server (labgrid's
-- NetworkJLinkDevice, docs/labgrid.md), selected with the DLL's JLINKARM_SelectIP before it opens. The DLL is
-- the test libjlinkarm.so (tests/twin/jlinkarm_twin.c), whose SelectIP reaches the server like SEGGER's: a TCP
-- connect. A reachable server lets the open go on to the DLL's OpenEx (which then wants a twin: its error is
-- the proof selection passed); an unreachable one is one ENODEV line naming the address.
local T = require("t")
local probe = require("odp.probe")
local sshd = require("sshd") -- its shell helpers

local root = T.root()
local dir = T.tmpdir()
local dll = dir .. "/libjlinkarm.so"
sshd.sh(("cc -std=c11 -Wall -Wextra -Werror -O2 -shared -fPIC -fvisibility=hidden -o %s %s"):format(sshd.quote(dll),
  sshd.quote(root .. "/tests/twin/jlinkarm_twin.c")))

T.test("ip: a listening Remote Server is selected, then the DLL opens (here: it asks for the twin)", function()
  local port = 20000 + (require("odp.sys").getpid() * 13) % 30000
  sshd.with_background(("socat TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork SYSTEM:'cat >/dev/null'"):format(port),
    function()
      T.ok(sshd.wait_for(function() return sshd.sh("ss -ltn"):find("127%.0%.0%.1:" .. port .. " ") ~= nil end, 10))
      local p, e, code = probe.open { backend = "jlink", lib = dll, ip = "127.0.0.1:" .. port }
      T.eq(p, nil)
      T.eq(code, "ENODEV")
      T.match(e, "^ENODEV: J%-Link: ODP_TWIN_STATE is not set", "past SelectIP, in OpenEx")
    end)
end)

T.test("ip: no server there is one ENODEV line naming it; a bad address and serial with ip are refused", function()
  local p, e, code = probe.open { backend = "jlink", lib = dll, ip = "127.0.0.1:1" }
  T.eq({ p, code }, { nil, "ENODEV" })
  T.eq(e, "ENODEV: no J-Link Remote Server at 127.0.0.1:1")
  _, e, code = probe.open { backend = "jlink", lib = dll, ip = ":19020" }
  T.eq(code, "ENOTFOUND")
  T.match(e, "give HOST or HOST:PORT")
  T.raises(function() probe.open { backend = "jlink", lib = dll, ip = "10.0.0.5", serial = "600112233" } end,
    "give serial %(USB%) or ip")
end)

T.test("a lab file's jlink_ip reaches probe.open{ip=} (board options -> plan -> odp.target.probe)", function()
  local lab = require("odp.target.lab")
  local probe_target = require("odp.target.probe")
  T.write(dir .. "/lab.lua", ("return { boards = { { name = \"j\", device = %q, probe = \"jlink\", jlink_lib = %q, " ..
    "jlink_ip = \"127.0.0.1:1\" } } }"):format(root .. "/devices/twin_m55.lua", dll))
  local b = lab.load(dir .. "/lab.lua").boards[1]
  local board = require("odp.run.board").open(b.dev, lab.board_options(b))
  local p = board:_plan()
  T.eq(p.probe_backend, "jlink")
  local ok, e = pcall(probe_target.open, p, "app", board.opts)
  T.eq(ok, false)
  T.match(e.message, "no J%-Link Remote Server at 127%.0%.0%.1:1$", "the DLL was asked for the lab's address")
  board:close()
end)

T.test("the J-Link helper refuses a request of another protocol version, and anything before open, in one line", function()
  -- the helper is odp itself (`odp --jlink-helper PPID`): spoken to here directly, frames in on stdin
  local codec, sys, proc = require("odp.helper"), require("odp.sys"), require("odp.proc")
  local function u32(v) return string.pack("<I4", v) end
  local input = codec.encode("R", { u32(0x60000000), u32(4) }) -- before open
    .. codec.encode("O", { u32(2), dll, "", u32(4000), "", "" }) -- a protocol this helper does not speak
    .. codec.encode("?", {})
  local r = proc.run { argv = { require("odp.host").argv[0], "--jlink-helper", tostring(sys.getpid()) }, stdin = input,
    timeout = 30 }
  T.eq(r.status, 0, "it ends when its input does: " .. r.stderr)
  local d, replies = codec.decoder():feed(r.stdout), {}
  while true do
    local ty, fields = d:next()
    if not ty then break end
    replies[#replies + 1] = { ty, fields[1], fields[2] }
  end
  T.eq(#replies, 3, "one reply per request")
  T.eq(replies[1], { "!", "EPROTO", "J-Link request 'R' before open" })
  T.eq(replies[2], { "!", "EPROTO", "the J-Link helper speaks protocol 1; odp asked for 2" })
  T.eq(replies[3][1], "!", "an unknown request")
  T.eq(replies[3][2], "EPROTO")
end)

T.done()
