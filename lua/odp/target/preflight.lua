--- Preflight: checks that need the board, made before anything is uploaded or run, on every kind of board
-- that runs a Linux program (this host, SSH, adb). Each failure is one line
-- and exit code 3 (errors.fail). check(target, {runner=, model=, data=, device=, remote_dir=, need_bytes=,
-- stage= (the files the run stages, {path, mode?, sha256} each: odp.target.shell.space)})
-- -> facts. odp.run makes them once per board (board:preflight) for scripts declared with preflight = true.
--   * the remote dir on a mount that allows exec, and free space in it for runner, model, odp's helper (+ margin
--     for the ETDump), first: before anything is uploaded; what provably dead odps left there removed before
--     (odp.target.shell.space)
--   * the runner's ELF machine vs the board's `uname -m`; a runner of another machine the board would run
--     under emulation (a binfmt_misc handler such as qemu-user) is refused unless allow_emulated, and then the
--     facts say emulated = "qemu-user" (the record, and every view, say so)
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


-- binfmt_misc entries are device output: the listing is bounded, as is each magic and mask.
local MAX_BINFMT = 64 * 1024
local MAX_MAGIC = 128

local function unhex(v)
  if not v or #v > 2 * MAX_MAGIC or #v % 2 ~= 0 or not v:match("^%x+$") then return nil end
  return (v:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end))
end

--- The binfmt_misc entries a board listed: for each, `name NAME` then the text of
--- /proc/sys/fs/binfmt_misc/NAME (enabled, interpreter, flags, offset, magic, mask).
--- -> list of {name, enabled, interpreter, offset, magic, mask} (magic and mask as bytes). Never raises.
function M.parse_binfmt(text)
  local out, cur = {}, nil
  for line in tostring(text):sub(1, MAX_BINFMT):gmatch("[^\n]+") do
    local name = line:match("^name (%S+)$")
    if name then
      cur = { name = name }
      out[#out + 1] = cur
    elseif cur then
      local k, v = line:match("^(%a+):? (.-)%s*$")
      if line == "enabled" or line == "disabled" then cur.enabled = line == "enabled"
      elseif k == "interpreter" then cur.interpreter = v
      elseif k == "resolved" then cur.resolved = v ~= "" and v or nil
      elseif k == "offset" then cur.offset = math.tointeger(tonumber(v))
      elseif k == "magic" or k == "mask" then cur[k] = unhex(v)
      end
    end
  end
  return out
end

--- The enabled entry whose magic (under its mask) matches header, a program's first bytes, as the kernel
--- matches them; nil when none would run it.
function M.binfmt_for(entries, header)
  for _, e in ipairs(entries) do
    local off, magic = e.offset, e.magic
    if e.enabled and e.interpreter and magic and off and off >= 0 and off + #magic <= #header then
      local hit = true
      for i = 1, #magic do
        local m = e.mask and e.mask:byte(i) or 0xff
        if header:byte(off + i) & m ~= magic:byte(i) & m then hit = false break end
      end
      if hit then return e end
    end
  end
end

--- What an entry's interpreter is called in the record: "qemu-user" for QEMU's user-mode emulators, else
--- the name of the program the interpreter resolves to. Debian registers QEMU by links whose own names do
--- not say it (qemu-user-static: /usr/libexec/qemu-binfmt/aarch64-binfmt-P -> qemu-aarch64-static), so the
--- end of the link chain is read (entry.resolved, as the board resolved it); a board that cannot resolve it
--- (the interpreter opened outside a chroot, flag F) still has QEMU's directory in the path.
function M.emulator_kind(entry)
  local path = entry.resolved or entry.interpreter or ""
  local name = path:match("([^/]+)$") or path
  if name:match("^qemu%-") or (entry.interpreter or ""):match("/qemu%-binfmt/[^/]+$") then return "qemu-user" end
  return name
end

-- The board's binfmt_misc entries (one exec), each followed by the end of its interpreter's link chain
-- ("resolved PATH", when the board can resolve it); dir: where they are listed (a test's fake ones).
local function list_binfmt(target, dir)
  return target:exec({ "sh", "-c", "cd \"$1\" 2>/dev/null || exit 0; for f in *; do case $f in register|status) ;; " ..
    "*) echo \"name $f\"; head -c 4096 \"$f\"; echo; i=$(sed -n 's/^interpreter //p' \"$f\" | head -n 1); " ..
    "if r=$(readlink -f \"$i\" 2>/dev/null) && [ -n \"$r\" ]; then echo \"resolved $r\"; fi ;; esac; done", "sh",
    dir or "/proc/sys/fs/binfmt_misc" }, { timeout = 10, rusage = false })
end

--- What runs program path on the board when its machine is not the board's: the binfmt_misc entry that
--- matches its header, and what it is (M.emulator_kind); nil when none would; nil, nil, err, code when the
--- board could not be asked. dir: where the entries are listed (default /proc/sys/fs/binfmt_misc).
function M.emulator(target, path, dir)
  local f = io.open(path, "rb")
  local header = f and f:read(MAX_MAGIC) or ""
  if f then f:close() end
  local r, err, code = list_binfmt(target, dir)
  if not r then return nil, nil, err, code end
  local e = r.status == 0 and M.binfmt_for(M.parse_binfmt(r.stdout), header)
  if not e then return nil end
  return e, M.emulator_kind(e)
end

local function mb(n) return ("%.1f MB"):format(n / 1e6) end

-- A query the board did not answer: the check cannot be made, and the cause is the failure (never a fact
-- guessed in its place: a dropped connection is no wrong architecture).
local KEEP = { ECONNLOST = true, ECANCELED = true, ETIMEDOUT = true }
local function unanswered(what, target, err, code)
  errors.fail(KEEP[code] and code or "EIO", ("cannot tell %s of %s: %s"):format(what, target.uri,
    errors.text(err or "no answer")))
end

function M.check(target, opts)
  opts = opts or {}
  local facts = {}
  local device = opts.device or {}
  local script = false
  if opts.runner then
    -- a script runs through its #! interpreter, the board's own (a wrapper around the runner, e.g. one that
    -- moves its log into logcat): nothing of another machine to check
    local f = io.open(opts.runner, "rb")
    script = f and f:read(2) == "#!"
    if f then f:close() end
  end
  local e
  if opts.runner and not script then
    local err
    e, err = elf.read(opts.runner)
    if not e then errors.fail("EPROTO", ("runner %s is not a Linux program: %s"):format(opts.runner, err)) end
    facts.runner = e
  end
  -- Space first, before the runner and the model are uploaded; what an earlier odp left half-uploaded
  -- there is removed first, so it is not counted against it.
  local dir = opts.remote_dir or target.remote_dir
  local space_needed
  if dir then
    local need = (opts.need_bytes or 0) + M.MARGIN_BYTES
    local helper = e and target.kind ~= "host" and shell.local_helper(e.machine)
    for _, p in ipairs { opts.runner, opts.model, opts.data, helper } do
      local st = p and sys.stat(p)
      if st then need = need + st.size end
    end
    local free, removed, code
    -- the helper answers the free space (and the glibc version): no exec of its own. Its start (or install:
    -- about 1 MB) by the board session's one exec (odp.target.shell.helper) carries the question, so the answer
    -- comes behind its hello; the runner and the model are uploaded only once the space is known. What the run
    -- stages rides in the same flight (odp.target.shell.space): checked, nothing uploaded
    if target.space then free, removed, code = target:space(dir, opts.stage)
    else free, removed, code = target:free_bytes(dir) end
    if free == nil and code == "ENODEV" then errors.fail(code, errors.text(removed)) end -- a noexec mount
    if free == nil then unanswered("the free space in " .. dir, target, removed, code) end
    if type(removed) == "table" and #removed > 0 then facts.removed_partials = removed end
    facts.free_bytes = free or nil
    space_needed = need
  end
  local function check_space()
    if space_needed and facts.free_bytes and facts.free_bytes < space_needed then
      errors.fail("ENOSPC", ("only %s free in %s on %s; runner, model, odp's helper and ETDump need about %s: pick " ..
        "another --remote-dir"):format(mb(facts.free_bytes), dir, target.uri, mb(space_needed)))
    end
  end
  check_space()
  local arch, aerr, acode = target:arch()
  if not arch then unanswered("the architecture (uname -m)", target, aerr, acode) end
  facts.arch = arch
  if space_needed and not facts.free_bytes then
    -- the board's df could not say (busybox without a mount table): its helper can (started here when the
    -- preflight found none to ask: the probe named the architecture without it)
    shell.helper(target) -- nil where no helper can run there: df once more, which says why
    local free, err, code = target:free_bytes(dir)
    if not free then unanswered("the free space in " .. dir, target, err, code) end
    facts.free_bytes = free
    check_space()
  end
  if e then
    if e.machine ~= M.normalize_arch(arch) then
      local entry, kind, eerr, ecode = M.emulator(target, opts.runner)
      if eerr then unanswered("how it would run a " .. e.machine .. " program (binfmt_misc)", target, eerr, ecode) end
      local here = target.kind == "host" and "this host" or target.uri
      if not entry then
        errors.fail("ENODEV", ("runner %s is built for %s but %s is %s (uname -m): use the runner built for this board%s")
          :format(opts.runner, e.machine, here, arch, device.runner and (" (" .. device.runner .. ")") or ""))
      end
      local interp = entry.interpreter
      if entry.resolved and entry.resolved ~= interp then interp = interp .. " -> " .. entry.resolved end
      if not opts.allow_emulated then
        -- it would run, slower and bigger than natively: numbers a user would take for the board's own
        errors.fail("ENODEV", ("runner %s is built for %s, %s is %s; it would run under %s emulation (binfmt_misc %s: %s); "
          .. "pass --allow-emulated to measure it anyway"):format(opts.runner, e.machine, here, arch, kind,
          entry.name, interp))
      end
      facts.emulated, facts.emulator = kind, interp
    end
    -- this machine's glibc is the one odp runs on: its loader names a missing GLIBC_ in the runner's stderr,
    -- which the failure's line quotes (a getconf per run would cost more than the rest of the preflight)
    if not e.static and e.glibc_required and target.kind ~= "host" then
      local libc, lerr, lcode = target:libc_version()
      if lerr then unanswered("the glibc version", target, lerr, lcode) end
      facts.libc = libc
      if not libc then
        errors.fail("ENODEV", ("runner %s needs glibc %s but %s has no glibc (musl or Android?): use a static runner " ..
          "or one built for that system"):format(opts.runner, e.glibc_required, target.uri))
      end
      if elf.version_cmp(e.glibc_required, libc) > 0 then
        errors.fail("ENODEV", ("runner %s needs GLIBC_%s but %s has glibc %s, so it would not start: %s")
          :format(opts.runner, e.glibc_required, target.uri, libc, device.glibc_advice or
            "run it on a newer OS image, or use a runner built against an older glibc"))
      end
    end
  end
  return facts
end

return M
