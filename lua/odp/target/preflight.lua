--- Preflight: checks that need the board, made before anything is uploaded or run. Each failure is one line
-- and exit code 3 (errors.fail). check(target, {runner=, model=, data=, device=, remote_dir=, need_bytes=})
-- -> facts. odp.run makes them once per board (board:preflight) for scripts declared with preflight = true.
--   * free space in the remote dir for runner, model, odp's helper (+ margin for the ETDump), first: before
--     anything is uploaded; what an earlier odp left half-uploaded there (`*.odp-part-*`) removed before
--   * the runner's ELF machine vs the board's `uname -m`
--   * the newest GLIBC_x.y the runner needs (.gnu.version_r) vs the board's glibc (with the device's advice,
--     e.g. Graviton4: launch Ubuntu 26.04)
-- A query the board does not answer fails the check with its cause (ECONNLOST: the connection dropped and did
-- not come back); nothing is inferred in its place.
-- The model's own check (a .pte this runner can load) needs no board: the flow's validate makes it first
-- (odp.run.check_model, exit 2).
local elf = require("odp.elf")
local sys = require("odp.sys")
local errors = require("odp.core.errors")
local shell = require("odp.target.shell")

local M = {}

M.MARGIN_BYTES = 64 * 1024 * 1024 -- ETDump, logs, the helper

-- uname -m spellings -> ELF machine names (odp.elf)
local ARCH = { aarch64 = "aarch64", arm64 = "aarch64", armv8l = "arm", armv7l = "arm", armv6l = "arm",
  x86_64 = "x86_64", amd64 = "x86_64", i386 = "i386", i486 = "i386", i586 = "i386", i686 = "i386",
  riscv64 = "riscv", ppc64le = "ppc64", ppc64 = "ppc64", s390x = "s390x" }

function M.normalize_arch(a) return a and (ARCH[a] or a) end

local function fail(code, msg) errors.fail(code, msg, 3) end

local function mb(n) return ("%.1f MB"):format(n / 1e6) end

-- A query the board did not answer: the check cannot be made, and the cause is the failure (never a fact
-- guessed in its place: a dropped connection is no wrong architecture).
local KEEP = { ECONNLOST = true, ECANCELED = true, ETIMEDOUT = true }
local function unanswered(what, target, err, code)
  errors.fail(KEEP[code] and code or "EIO", ("cannot tell %s of %s: %s"):format(what, target.uri,
    (tostring(err or "no answer"):gsub("^E%u+: ", ""))), code == "ECANCELED" and 130 or 3)
end

function M.check(target, opts)
  opts = opts or {}
  local facts = {}
  local device = opts.device or {}
  local e
  if opts.runner then
    local err
    e, err = elf.read(opts.runner)
    if not e then fail("EPROTO", ("runner %s is not a Linux program: %s"):format(opts.runner, err)) end
    facts.runner = e
  end
  -- Space first, before anything (the helper included) is uploaded; what an earlier odp left half-uploaded
  -- there is removed first, so it is not counted against it.
  local dir = opts.remote_dir or target.remote_dir
  if dir then
    local need = (opts.need_bytes or 0) + M.MARGIN_BYTES
    local helper = e and target.kind ~= "host" and shell.local_helper(e.machine)
    for _, p in ipairs { opts.runner, opts.model, opts.data, helper } do
      local st = p and sys.stat(p)
      if st then need = need + st.size end
    end
    local free, removed, code
    if target.space then free, removed, code = target:space(dir) else free, removed, code = target:free_bytes(dir) end
    if not free then unanswered("the free space in " .. dir, target, removed, code) end
    if type(removed) == "table" and #removed > 0 then facts.removed_partials = removed end
    facts.free_bytes = free
    if free < need then
      fail("ENOSPC", ("only %s free in %s on %s; runner, model, odp's helper and ETDump need about %s: pick " ..
        "another --remote-dir"):format(mb(free), dir, target.uri, mb(need)))
    end
  end
  if e then
    local arch, aerr, acode = target:arch()
    if not arch then unanswered("the architecture (uname -m)", target, aerr, acode) end
    facts.arch = arch
    if e.machine ~= M.normalize_arch(arch) then
      fail("ENODEV", ("runner %s is built for %s but %s is %s (uname -m): use the runner built for this board%s")
        :format(opts.runner, e.machine, target.uri, arch, device.runner and (" (" .. device.runner .. ")") or ""))
    end
    if not e.static and e.glibc_required then
      local libc, lerr, lcode = target:libc_version()
      if lerr then unanswered("the glibc version", target, lerr, lcode) end
      facts.libc = libc
      if not libc then
        fail("ENODEV", ("runner %s needs glibc %s but %s has no glibc (musl or Android?): use a static runner " ..
          "or one built for that system"):format(opts.runner, e.glibc_required, target.uri))
      end
      if elf.version_cmp(e.glibc_required, libc) > 0 then
        fail("ENODEV", ("runner %s needs GLIBC_%s but %s has glibc %s, so it would not start: %s")
          :format(opts.runner, e.glibc_required, target.uri, libc, device.glibc_advice or
            "run it on a newer OS image, or use a runner built against an older glibc"))
      end
    end
  else
    facts.arch = target:arch()
  end
  return facts
end

return M
