-- The Raspberry Pi 5 and Graviton4 flows with the static aarch64 ExecuTorch runner, on an aarch64 "board" made
-- here: this machine's sshd with a ChrootDirectory holding Debian 12's arm64 userland (busybox, glibc, GNU
-- time; tests/lib/aarch64_user.sh), whose programs the kernel runs through qemu-aarch64-static (binfmt_misc,
-- registered by this suite as root). So the board answers `uname -m` aarch64 and glibc 2.36 as an arm64 Debian
-- would, and odp pushes and runs the aarch64 odp-rusage helper and runner there. The oracle of peak RSS is GNU
-- time -v (Debian's arm64 build) run on the same board, under the same qemu-user.
local T = require("t")
local sshd = require("sshd")
local craft = require("elfcraft")
local json = require("odp.core.json")
local proc = require("odp.proc")
local sys = require("odp.sys")
local preflight = require("odp.target.preflight")
local target_ssh = require("odp.target.ssh")

local root = T.root()
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local odp = os.getenv("ODP") or (build .. "/odp")
local helper = root .. "/tests/lib/aarch64_user.sh"
local model = root .. "/tests/fixtures/pte/add_arduino.pte"
local q = sshd.quote
local sh = sshd.sh

-- The set-up: binfmt_misc, the cached arm64 userland, and a chroot of it for this run. ChrootDirectory wants
-- every component of its path root-owned and not writable by others: /run is, a checkout may not be.
local setup = { binfmt = proc.run { "sh", helper, "binfmt", timeout = 60 } }
setup.rootfs = proc.run { "sh", helper, "rootfs", build .. "/qemu-user", timeout = 600 }
local chroot = sh("mktemp -d /run/odp-aarch64.XXXXXX"):match("%S+")
local board = chroot .. "/root"
local user = sshd.ensure_user("odptest")
sh(("chmod 755 %s && cp -a %s/qemu-user/root %s"):format(q(chroot), q(build), q(board)))
sh(("mknod -m 666 %s/dev/null c 1 3 && mknod -m 666 %s/dev/zero c 1 5 && mknod -m 666 %s/dev/urandom c 1 9")
  :format(q(board), q(board), q(board)))
sh(("mkdir -p %s/home/%s %s/srv/odp && chown %s %s/home/%s %s/srv/odp"):format(q(board), user, q(board), user, q(board),
  user, q(board)))
-- df and ps read /proc, as on a board; where this machine refuses the mount, free space is not checked
setup.proc = proc.run { "mount", "-t", "proc", "proc", board .. "/proc", timeout = 30 }

local srv = sshd.start { config = { "ChrootDirectory " .. board }, sftp = "internal-sftp" }
local function opts(extra)
  local o = { host = srv.user .. "@127.0.0.1", port = srv.port, identity = srv.identity,
    known_hosts = srv.known_hosts, remote_dir = "/srv/odp/t" }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

T.test("the set-up: qemu-aarch64 with binfmt_misc (as root), the arm64 userland in a chroot # rig", function()
  T.eq(setup.binfmt.status, 0, setup.binfmt.stderr)
  print("# binfmt_misc: " .. setup.binfmt.stdout:gsub("\n", ""))
  T.eq(setup.rootfs.status, 0, setup.rootfs.stderr)
  if setup.proc.status ~= 0 then print("# /proc not mounted in the chroot: " .. setup.proc.stderr) end
  -- the kernel runs the arm64 busybox itself (binfmt_misc), no wrapper named
  local r = proc.run { "chroot", board, "/bin/sh", "-c", "uname -m; getconf GNU_LIBC_VERSION", timeout = 60 }
  T.eq(r.stdout, "aarch64\nglibc 2.36\n", r.stderr)
end)

local t = assert(target_ssh.new(opts()))

T.test("the ssh target sees an aarch64 board with glibc 2.36, and pushes odp-rusage-aarch64 there", function()
  T.eq(t:arch(), "aarch64")
  T.eq(t:libc_version(), "2.36")
  T.eq(t:rusage_method(), "odp-rusage")
  T.eq(sys.sha256_file(board .. "/srv/odp/t/.odp/odp-rusage"), sys.sha256_file(build .. "/odp-rusage-aarch64"))
  local r = assert(t:exec({ "sh", "-c", "echo $(uname -m); head -c 30000000 /dev/zero | tail -c 1 >/dev/null" }))
  T.eq(r.stdout, "aarch64\n")
  T.ok(r.rusage and r.rusage.maxrss_kb > 0, "maxrss from the aarch64 helper")
end)

-- Preflight raises structured failures (exit 3)
local function refused(o)
  local ok, e = pcall(preflight.check, t, o)
  T.eq(ok, false, "preflight should refuse")
  T.eq(e.exit, 3)
  return e
end

T.test("preflight on the aarch64 board: arch (uname -m) and glibc (getconf) checks, both ways", function()
  local tmp = T.tmpdir()
  -- an aarch64 program linked against glibc: its GLIBC_ needs are below 2.36, and it runs there
  local hello = craft.aarch64(tmp)
  local facts = preflight.check(t, { runner = hello, model = model })
  T.eq({ facts.arch, facts.runner.machine, facts.libc }, { "aarch64", "aarch64", "2.36" })
  T.ok(t:push(hello, "/srv/odp/t/hello_aarch64", { mode = tonumber("755", 8) }))
  T.eq(assert(t:exec({ "/srv/odp/t/hello_aarch64" })).status, 0, "the glibc-linked aarch64 program runs on the board")
  -- this machine's programs are x86_64: refused by arch
  local e = refused { runner = odp, model = model }
  T.eq(e.code, "ENODEV"); T.match(e.message, "built for x86_64 but .- is aarch64 %(uname %-m%)")
  -- an aarch64 program needing GLIBC_9.99: refused with the board's glibc and the device's advice
  local device = require("odp.target.device").load(root .. "/devices/graviton4.lua")
  e = refused { runner = craft.needs_glibc(tmp, "9.99", "aarch64-linux-gnu-gcc"), model = model, device = device }
  T.eq(e.code, "ENODEV"); T.match(e.message, "needs GLIBC_9%.99 but .- has glibc 2%.36"); T.match(e.message, "Ubuntu 26%.04")
end)

-- GNU time -v's peak RSS of the runner on the board, under the same qemu-user: the oracle of peak_rss_kb
local function time_v_rss(runner_on_board, n)
  local r = assert(t:exec({ "sh", "-c", ("/usr/bin/time -v %s --model_path /srv/odp/t/add.pte --num_executions %d " ..
    ">/dev/null 2>/srv/odp/t/time.txt; cat /srv/odp/t/time.txt"):format(runner_on_board, n) }))
  return tonumber(r.stdout:match("Maximum resident set size %(kbytes%): (%d+)")), r.stdout
end

for _, flow in ipairs { { script = "rpi5", n = 5 }, { script = "graviton4", n = 3 } } do
  T.with_real_runner(("scripts/%s.lua with the static aarch64 runner on the aarch64 board; peak RSS as GNU time -v")
    :format(flow.script), function(runner)
    local tmp = T.tmpdir()
    local rdir = "/srv/odp/" .. flow.script
    local r = proc.run { odp, "run", root .. "/scripts/" .. flow.script .. ".lua", "--host", srv.user .. "@127.0.0.1",
      "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts,
      "--remote-dir", rdir, "--runner", runner, "--model", model, "-n", tostring(flow.n),
      "--runs-dir", tmp .. "/runs", "--format", "json", cwd = tmp, timeout = 600 }
    T.eq(r.status, 0, r.stderr .. r.stdout)
    local rec = assert(json.decode(r.stdout))
    T.eq(rec.ok, true)
    T.match(rec.target, "^ssh://odptest@127%.0%.0%.1")
    T.eq(rec.latency_ms.n, flow.n)
    -- kept by its sha256 on the board (docs/devices.md "A shared board")
    local staged = rdir .. "/.odp/blobs/" .. sys.sha256_file(runner)
    T.eq(sys.sha256_file(board .. staged), sys.sha256_file(runner), "runner pushed")
    T.eq(sys.sha256_file(board .. rdir .. "/.odp/odp-rusage"), sys.sha256_file(build .. "/odp-rusage-aarch64"),
      "the aarch64 helper pushed")
    -- the oracle: GNU time -v of the same runner and model on the board, three times (qemu's own RSS varies
    -- a little between runs, by well under 1% here): odp's figure lies within 3% of their range
    sh(("cp %s %s/srv/odp/t/add.pte"):format(q(model), q(board)))
    local lo, hi = math.huge, 0
    for _ = 1, 3 do
      local kb, out = time_v_rss(staged, flow.n)
      T.ok(kb, "time -v: " .. out)
      lo, hi = math.min(lo, kb), math.max(hi, kb)
    end
    print(("# peak RSS: odp %d kB, GNU time -v %d..%d kB"):format(rec.peak_rss_kb, lo, hi))
    T.ok(rec.peak_rss_kb >= lo * 0.97 and rec.peak_rss_kb <= hi * 1.03,
      ("odp's peak_rss_kb %d against GNU time -v's %d..%d kB"):format(rec.peak_rss_kb, lo, hi))
  end, "aarch64")
end

T.test("binfmt_misc entries: the kernel's own text parsed, matched against ELF headers as the kernel does; fuzzed",
  function()
    local text = T.read("/proc/sys/fs/binfmt_misc/qemu-aarch64")
    local entries = preflight.parse_binfmt("name qemu-aarch64\n" .. text)
    T.eq(#entries, 1)
    T.eq({ entries[1].enabled, entries[1].offset, #entries[1].magic, #entries[1].mask }, { true, 0, 20, 20 })
    T.match(entries[1].interpreter, "^/") -- which program it is: the layouts' test below
    local tmp = T.tmpdir()
    local head = function(p) local f = assert(io.open(p, "rb")) local h = f:read(128) f:close() return h end
    T.eq(preflight.binfmt_for(entries, head(craft.aarch64(tmp))).name, "qemu-aarch64", "an aarch64 program")
    T.eq(preflight.binfmt_for(entries, head(odp)), nil, "this machine's own program")
    entries[1].enabled = false
    T.eq(preflight.binfmt_for(entries, head(craft.aarch64(tmp))), nil, "a disabled entry runs nothing")
    local rnd = T.lcg(28)
    for _ = 1, 2000 do
      local ok, err = pcall(function()
        local e = preflight.parse_binfmt(T.mutate("name qemu-aarch64\n" .. text, rnd, "0123456789abcdef \nxmoa"))
        preflight.binfmt_for(e, head(odp))
      end)
      if not ok then T.eq(err, nil, "mutated binfmt text") end
    end
  end)

-- Debian's layouts of the same emulator: qemu-user-static on a booted Debian 12 registers a link
-- (/usr/libexec/qemu-binfmt/aarch64-binfmt-P -> ../../bin/qemu-aarch64-static); a hand registration (this
-- suite's rig without that package's binfmt.d file, qemu-user-binfmt) names the program itself. Entries as the
-- kernel writes them, in a directory of their own, listed by the same shell odp runs on a board.
T.test("the emulator is named for what it is, whatever the layout: the link chain resolved on the board; the "
  .. "real machine's entry says the same", function()
  local tmp = T.tmpdir()
  local function entry(name, interp)
    T.write(("%s/binfmt/%s"):format(tmp, name), ("enabled\ninterpreter %s\nflags: POCF\noffset 0\n" ..
      "magic 7f454c460201010000000000000000000200b700\nmask ffffffffffffff00fffffffffffffffffeffffff\n"):format(interp))
  end
  sh(("mkdir -p %s/usr/bin %s/usr/libexec/qemu-binfmt %s/chain && cp /bin/true %s/usr/bin/qemu-aarch64-static"
    .. " && ln -s ../../bin/qemu-aarch64-static %s/usr/libexec/qemu-binfmt/aarch64-binfmt-P"
    .. " && cp /bin/true %s/usr/bin/box64 && ln -s ../usr/bin/box64 %s/chain/b && ln -s b %s/chain/aarch64")
    :format(q(tmp), q(tmp), q(tmp), q(tmp), q(tmp), q(tmp), q(tmp), q(tmp)))
  local host = require("odp.target.host").new {}
  local arm = craft.aarch64(tmp)
  local cases = {
    { tmp .. "/usr/libexec/qemu-binfmt/aarch64-binfmt-P", tmp .. "/usr/bin/qemu-aarch64-static", "qemu-user" },
    { tmp .. "/usr/bin/qemu-aarch64-static", tmp .. "/usr/bin/qemu-aarch64-static", "qemu-user" },
    -- flag F opened it outside the board's chroot: nothing there to resolve, QEMU's directory still says it
    { "/nonexistent/qemu-binfmt/aarch64-binfmt-P", nil, "qemu-user" },
    -- not QEMU: named by the program at the end of the chain, not by a link's name
    { tmp .. "/chain/aarch64", tmp .. "/usr/bin/box64", "box64" },
  }
  for i, c in ipairs(cases) do
    sh(("rm -rf %s && mkdir %s"):format(q(tmp .. "/binfmt"), q(tmp .. "/binfmt")))
    entry("qemu-aarch64", c[1])
    local e, kind = preflight.emulator(host, arm, tmp .. "/binfmt")
    T.eq({ e and e.name, e and e.interpreter, e and e.resolved, kind }, { "qemu-aarch64", c[1], c[2], c[3] },
      "layout " .. i)
  end
  T.eq(preflight.emulator(host, odp, tmp .. "/binfmt"), nil, "this machine's own program: no emulator")
  -- this machine's own entry (the rig's registration, or the one the machine booted with)
  local e, kind = preflight.emulator(host, arm)
  T.ok(e, "the real qemu-aarch64 entry matches an aarch64 program")
  print(("# this machine: binfmt_misc %s: %s -> %s"):format(e.name, e.interpreter, tostring(e.resolved)))
  T.eq(kind, "qemu-user")
  T.match(e.resolved, "/qemu%-aarch64%-static$")
end)

T.test("the same check on an ssh board: this machine over loopback sshd would run an aarch64 program emulated",
  function()
    local plain = sshd.start()
    local ok, err = pcall(function()
      local x86 = assert(target_ssh.new { host = plain.user .. "@127.0.0.1", port = plain.port, identity = plain.identity,
        known_hosts = plain.known_hosts, ssh_config = "none", remote_dir = plain.remote_dir })
      local hello = craft.aarch64(T.tmpdir())
      local e = T.failure(function() preflight.check(x86, { runner = hello, model = model }) end)
      T.eq({ e.code, e.exit }, { "ENODEV", 3 })
      T.match(e.message, "is built for aarch64, ssh://[^ ]+ is x86_64; it would run under qemu%-user emulation "
        .. "%(binfmt_misc qemu%-aarch64: [^)]+%); pass %-%-allow%-emulated")
      local facts = preflight.check(x86, { runner = hello, model = model, allow_emulated = true })
      T.eq({ facts.arch, facts.runner.machine, facts.emulated }, { "x86_64", "aarch64", "qemu-user" })
      x86:close()
    end)
    plain:stop()
    if not ok then error(err, 0) end
  end)

T.with_real_runner("the host flow refuses a runner this machine would run under qemu-user (exit 3, why); with "
  .. "--allow-emulated it measures it and every view says emulated", function(runner)
  local tmp = T.tmpdir()
  local base = { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", model, "--runs-dir",
    tmp .. "/runs", "--history", tmp .. "/h.db", timeout = 300 }
  local r = assert(proc.run(base))
  T.eq(r.status, 3, r.stderr)
  T.match(r.stderr, "^odp: runner .- is built for aarch64, this host is x86_64; it would run under qemu%-user emulation "
    .. "%(binfmt_misc qemu%-aarch64: [^)]*qemu%-aarch64[^)]*%); pass %-%-allow%-emulated to measure it anyway\n$")
  T.eq(sys.readdir(tmp .. "/runs"), nil, "nothing ran, no run directory")
  local a = table.move(base, 1, #base, 1, { timeout = 300 })
  table.move({ "--allow-emulated", "--format", "json" }, 1, 3, #a + 1, a)
  r = assert(proc.run(a))
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.eq({ rec.ok, rec.emulated }, { true, "qemu-user" })
  T.match(table.concat(rec.warnings, "\n"), "ran under qemu%-user emulation")
  -- the terminal's headline, the HTML page, the history's series
  local human = require("odp.results.report").formats.human { rec }
  local page = assert(proc.run { odp, "report", rec.artifacts.run_dir, timeout = 60 })
  T.eq(page.status, 0, page.stderr)
  T.match(T.read(rec.artifacts.run_dir .. "/report.html"), "emulated: qemu%-user")
  local history = require("odp.results.history")
  local emulated = history.series_of(rec, "latency_ms", "ms")
  rec.emulated = nil
  local native = history.series_of(rec, "latency_ms", "ms")
  T.ok(emulated.key ~= native.key, "an emulated run is not in the native runs' series")
  T.match(emulated.name, "%(emulated: qemu%-user%)")
  T.match(human, "^OK +executorch on [^\n]*: measured under qemu%-user emulation, not natively\n")
end, "aarch64")

t:close()
srv:stop()
if setup.proc.status == 0 then proc.run { "umount", board .. "/proc", timeout = 30 } end
sh("rm -rf " .. q(chroot))
-- a registration this suite made is the machine's state: it goes again (one that was there stays)
if setup.binfmt.status == 0 and setup.binfmt.stdout:match("^registered:") then
  local f = io.open("/proc/sys/fs/binfmt_misc/qemu-aarch64", "w")
  if f then f:write("-1") f:close() end
end
T.done()
