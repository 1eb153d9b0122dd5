-- odp.target.ssh_config against OpenSSH itself: for a corpus of config files, odp's resolution of each host equals
-- `ssh -G -F FILE HOST` for the keywords odp honours, and the expanded IdentityFile paths equal what
-- `ssh -v` reports loading. Syntax errors, Match blocks odp cannot evaluate and Include under ~/.ssh besides.
local T = require("t")
local proc = require("odp.proc")
local cfg = require("odp.target.ssh_config")

local tmp = T.tmpdir()
local fixtures = T.root() .. "/tests/fixtures/ssh_config"
local corpus = tmp .. "/corpus.conf"
T.write(corpus, (T.read(fixtures .. "/corpus.conf"):gsub("@DIR@", fixtures)))

-- ssh -G's answer: key -> list of values (keys lower-case, as ssh prints them).
local function ssh_G(file, host, extra)
  local argv = { "ssh", "-G", "-F", file }
  for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = host
  argv.timeout = 20
  local r = assert(proc.run(argv))
  assert(r.ok, "ssh -G failed: " .. r.stderr)
  local out = {}
  for line in r.stdout:gmatch("[^\n]+") do
    local k, v = line:match("^(%S+) (.*)$")
    if k then
      k = k:lower()
      out[k] = out[k] or {}
      table.insert(out[k], v)
    end
  end
  return out
end

-- odp's settings in ssh -G's words.
local function as_G(s)
  local strict = { yes = "true", no = "false", ask = "ask", ["accept-new"] = "accept-new" }
  return {
    hostname = s.hostname, user = s.user, port = tostring(s.port),
    identitiesonly = s.identities_only and "yes" or "no",
    identityagent = s.identity_agent,
    proxyjump = s.proxy_jump, proxycommand = s.proxy_command,
    userknownhostsfile = table.concat(s.known_hosts_files, " "),
    globalknownhostsfile = table.concat(s.global_known_hosts_files, " "),
    stricthostkeychecking = strict[s.strict_host_key_checking],
    connecttimeout = s.connect_timeout and tostring(s.connect_timeout) or "none",
    serveraliveinterval = tostring(s.server_alive_interval),
    serveralivecountmax = tostring(s.server_alive_count_max),
    hostkeyalias = s.host_key_alias,
  }
end

local function compare(file, host, overrides, G_args)
  local s, err = cfg.resolve(host, setmetatable({ file = file }, { __index = overrides or {} }))
  T.ok(s, err)
  local want = ssh_G(file, host, G_args)
  local got = as_G(s)
  for k, v in pairs(got) do
    T.eq(v, want[k] and table.concat(want[k], " "), host .. " " .. k)
  end
  for _, k in ipairs({ "identityagent", "proxyjump", "proxycommand", "hostkeyalias" }) do
    if want[k] then T.eq(got[k], table.concat(want[k], " "), host .. " " .. k .. " (ssh has it)") end
  end
  -- ssh -G lists its default keys when the config names none; odp then uses its own defaults.
  if #s.identity_files_raw > 0 then T.eq(s.identity_files_raw, want.identityfile, host .. " identityfile") end
  return s
end

local HOSTS = { "rpi5", "RPi5", "graviton", "graviton-2", "graviton-x", "bastion", "a.lab", "secret.lab", "dev1",
  "dev2", "tennet", "10.0.0.5", "proxied", "unknown.example" }

for _, h in ipairs(HOSTS) do
  T.test("resolves " .. h .. " as ssh -G does", function() compare(corpus, h) end)
end

T.test("command-line user, port and identity override the config, as ssh -l -p -i", function()
  local key = tmp .. "/cli_key"
  T.write(key, "") -- ssh -i drops a file that does not exist
  local s = compare(corpus, "rpi5", { user = "bob", port = 2000, identity = key },
    { "-l", "bob", "-p", "2000", "-i", key })
  T.eq(s.identity_files[1], key)
end)

T.test("Match user sees the command line's user, as ssh -l", function()
  compare(corpus, "proxied", { user = "root" }, { "-l", "root" })
  compare(corpus, "proxied", { user = "bob" }, { "-l", "bob" })
end)

T.test("expanded IdentityFile paths equal the files ssh -v loads", function()
  for _, h in ipairs({ "rpi5", "graviton" }) do
    local s = assert(cfg.resolve(h, { file = corpus }))
    local r = assert(proc.run { "ssh", "-v", "-F", corpus, "-o", "ProxyCommand=true", "-o", "ProxyJump=none",
      "-o", "BatchMode=yes", h, "true", timeout = 20 })
    local loaded = {}
    for f in r.stderr:gmatch("identity file ([^\n]-) type %-?%d+") do
      if not f:match("%-cert$") then loaded[#loaded + 1] = f end
    end
    T.eq(s.identity_files, loaded, h)
  end
end)

T.test("ProxyCommand is expanded with the target's %h %p %r", function()
  local s = assert(cfg.resolve("a.lab", { file = corpus }))
  T.eq(s.proxy_command_line, "socat - TCP:a.lab:22 # a comment stays in ProxyCommand")
  T.eq(cfg.jump_hops(assert(cfg.resolve("secret.lab", { file = corpus })).proxy_jump),
    { { user = "u1", host = "hop1", port = 2022 }, { user = "u2", host = "hop2", port = 2023 } })
end)

T.test("files read are listed; none reads nothing; a missing ~/.ssh/config is no error", function()
  local s = assert(cfg.resolve("rpi5", { file = corpus }))
  T.eq(s.files, { corpus, fixtures .. "/corpus.d/10-late.conf", fixtures .. "/corpus.d/20-more.conf" })
  s = assert(cfg.resolve("rpi5", { file = "none" }))
  T.eq(s.files, {}); T.eq(s.hostname, "rpi5"); T.eq(s.port, 22)
  s = assert(cfg.resolve("rpi5", { home = tmp .. "/nohome" }))
  T.eq(s.files, {})
  local _, err, code = cfg.resolve("rpi5", { file = tmp .. "/absent.conf" })
  T.eq(code, "EUSAGE"); T.match(err, "cannot read ssh config .*absent%.conf")
end)

T.test("Include is relative to ~/.ssh and nests; a block that does not apply includes nothing", function()
  local home = tmp .. "/home"
  os.execute("mkdir -p " .. home .. "/.ssh/conf.d")
  T.write(home .. "/.ssh/config", "Host other\n  Include never\nHost *\n  Include conf.d/*\n")
  T.write(home .. "/.ssh/conf.d/a", "Host box\n  HostName box.example\n  Include ~/.ssh/conf.d/nested\n")
  T.write(home .. "/.ssh/conf.d/nested", "Port 2022\n")
  T.write(home .. "/.ssh/never", "User never\n")
  local s = assert(cfg.resolve("box", { home = home }))
  T.eq(s.hostname, "box.example"); T.eq(s.port, 2022); T.ok(s.user ~= "never", "inactive include")
  T.write(home .. "/.ssh/conf.d/nested", "Include ~/.ssh/conf.d/nested\n")
  local _, err = cfg.resolve("box", { home = home })
  T.match(err, "nested too deeply")
end)

T.test("Match blocks odp cannot evaluate are skipped with one warning", function()
  local f = tmp .. "/match.conf"
  T.write(f, "Match exec \"true\"\n  User fromexec\nMatch canonical\n  Port 1\nHost *\n  User plain\n")
  local s = assert(cfg.resolve("x", { file = f }))
  T.eq(s.user, "plain"); T.eq(s.port, 22)
  T.eq(#s.warnings, 1); T.match(s.warnings[1], "match%.conf line 1: `Match exec` cannot be evaluated")
end)

T.test("syntax errors name the file and line, as ssh does", function()
  local cases = {
    { "Host a\n  Port 70000\n", "line 2: Bad port '70000'" },
    { "\n\nFrobnicate yes\n", "line 3: Bad configuration option: frobnicate" },
    { "Host a\n  User\n", "line 2: no argument after keyword \"user\"" },
    { "Host a\n  IdentityFile \"unterminated\n", "line 2: invalid quotes" },
    { "Host a\n  ProxyJump a b\n", "line 2: Invalid ProxyJump" },
    { "Match nonsense x\n", "line 1: Unsupported Match attribute nonsense" },
    { "Host a\n  StrictHostKeyChecking maybe\n", "line 2: unsupported option \"maybe\"" },
  }
  for i, c in ipairs(cases) do
    local f = ("%s/bad%d.conf"):format(tmp, i)
    T.write(f, c[1])
    local s, err, code = cfg.resolve("a", { file = f })
    T.eq(s, nil, c[2]); T.eq(code, "EUSAGE")
    T.match(err, "^EUSAGE: " .. f:gsub("%p", "%%%0") .. " " .. c[2]:gsub("%p", "%%%0"))
    -- OpenSSH refuses the same files
    local r = assert(proc.run { "ssh", "-G", "-F", f, "a", timeout = 20 })
    T.ok(not r.ok, "ssh -G refuses " .. c[2])
  end
end)

T.test("an unknown %token is an error, not a silent empty string", function()
  local f = tmp .. "/tok.conf"
  T.write(f, "Host a\n  IdentityFile ~/.ssh/%Z\n")
  local _, err = cfg.resolve("a", { file = f })
  T.match(err, "unknown token %%Z")
  T.write(f, "Host a\n  ProxyCommand nc %h %q\n")
  _, err = cfg.resolve("a", { file = f })
  T.match(err, "^EUSAGE: ProxyCommand: unknown token %%q")
end)

T.test("fuzz: 3000 mutated configs resolve or fail with one EUSAGE line, never raise", function()
  local base = T.read(corpus)
  local alphabet = { "%", "!", "*", "?", "\"", "'", "\\", "=", "#", ",", " ", "\t", "\n", "Host ", "Match ",
    "Include ", "ProxyJump ", "Port ", "%h", "%Z", "${HOME}", "${NO_SUCH_VAR_ODP}", "~", "none", "exec", "all",
    "\0", "\255", "9999999999" }
  math.randomseed(1313)
  local f = tmp .. "/fuzz.conf"
  for i = 1, 3000 do
    local text = base
    for _ = 1, math.random(1, 6) do
      local at = math.random(1, #text)
      if math.random() < 0.5 then
        text = text:sub(1, at - 1) .. alphabet[math.random(#alphabet)] .. text:sub(at)
      else
        text = text:sub(1, at - 1) .. text:sub(at + math.random(1, 8))
      end
    end
    T.write(f, text)
    local ok, s, err, code = pcall(cfg.resolve, ({ "rpi5", "graviton-2", "a.lab", "x" })[i % 4 + 1], { file = f })
    T.ok(ok, "raised on mutation " .. i .. ": " .. tostring(s))
    if not s then
      T.eq(code, "EUSAGE", "code for: " .. tostring(err))
      T.ok(not err:find("\n"), "one line: " .. err)
    end
  end
end)

T.done()
