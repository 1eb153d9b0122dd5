--- ssh_config(5) resolution: what `ssh HOST` would use for the keywords odp honours, read from ~/.ssh/config
-- (or another file, like `ssh -F`). The rules are OpenSSH's (readconf.c): a keyword's first value wins; `Host`
-- patterns (`*`, `?`, `!`) match the name given on the command line; `Match host|originalhost|user|localuser|all`
-- is evaluated, other Match criteria (exec, canonical, final, localnetwork, tagged, ...) cannot be here, so
-- their block is skipped with one warning; `Include` takes globs, relative ones under ~/.ssh, and an Include in
-- a block that does not apply is parsed but never applies; every keyword OpenSSH knows is accepted, unknown
-- ones are syntax errors unless `IgnoreUnknown` lists them. tests/lua/ssh_config_test.lua holds odp's result
-- against `ssh -G` over a corpus of files.
local sys = require("odp.sys")

local M = {}

-- Every keyword of OpenSSH's client (readconf.c's table, including deprecated and unsupported ones, which
-- OpenSSH accepts with at most a warning); those odp honours are handled below, the others are ignored.
local KNOWN = {}
for k in ([[protocol cipher fallbacktorsh rhostsauthentication useroaming usersh useprivilegedport afstokenpassing
  kerberosauthentication kerberostgtpassing rsaauthentication rhostsrsaauthentication compressionlevel
  gssapiauthentication gssapidelegatecredentials gssapikeyexchange gssapiclientidentity gssapiserveridentity
  gssapirenewalforceskeyx gssapitrustdns gssapikexalgorithms smartcarddevice pkcs11provider usekeychain
  forwardagent exitonforwardfailure xauthlocation gatewayports passwordauthentication kbdinteractiveauthentication
  kbdinteractivedevices challengeresponseauthentication skeyauthentication tisauthentication pubkeyauthentication
  dsaauthentication hostbasedauthentication identityfile identitiesonly certificatefile addkeystoagent
  identityagent hostname hostkeyalias proxycommand port ciphers macs remoteforward localforward permitremoteopen
  user host match tag escapechar globalknownhostsfile userknownhostsfile connectionattempts batchmode checkhostip
  stricthostkeychecking compression tcpkeepalive keepalive numberofpasswordprompts syslogfacility loglevel
  logverbose dynamicforward preferredauthentications hostkeyalgorithms casignaturealgorithms bindaddress
  bindinterface clearallforwardings enablesshkeysign verifyhostkeydns nohostauthenticationforlocalhost rekeylimit
  connecttimeout addressfamily serveraliveinterval serveralivecountmax sendenv setenv controlpath controlmaster
  controlpersist hashknownhosts include tunnel tunneldevice localcommand permitlocalcommand remotecommand
  visualhostkey kexalgorithms ipqos requesttty sessiontype stdinnull forkafterauthentication proxyusefdpass
  canonicaldomains canonicalizefallbacklocal canonicalizehostname canonicalizemaxdots canonicalizepermittedcnames
  streamlocalbindmask streamlocalbindunlink revokedhostkeys fingerprinthash updatehostkeys
  hostbasedacceptedalgorithms hostbasedkeytypes pubkeyacceptedalgorithms pubkeyacceptedkeytypes ignoreunknown
  proxyjump securitykeyprovider knownhostscommand requiredrsasize enableescapecommandline obscurekeystroketiming
  channeltimeout versionaddendum refuseconnection warnweakcrypto pubkeyauthoptions]]):gmatch("%S+") do
  KNOWN[k] = true
end

local MAX_DEPTH = 16 -- Include nesting, as OpenSSH

local function home_dir()
  local h = os.getenv("HOME")
  if h and h ~= "" then return h end
  return "/"
end

local function local_user()
  return os.getenv("USER") or os.getenv("LOGNAME") or "root"
end

local function fail(file, line, msg)
  error({ ssh_config_error = ("%s line %d: %s"):format(file, line, msg) }, 0)
end

-- A config line's arguments: whitespace-separated, '…' and "…" quote, backslash escapes quotes, backslash and
-- (outside quotes) space; a token starting with # ends the line. nil on an unterminated quote.
local function split_args(s)
  local args, i, n = {}, 1, #s
  while i <= n do
    local c = s:sub(i, i)
    if c == " " or c == "\t" then
      i = i + 1
    elseif c == "#" then
      break
    else
      local out, quote = {}, nil
      while i <= n do
        c = s:sub(i, i)
        local nx = s:sub(i + 1, i + 1)
        if c == "\\" and (nx == "'" or nx == '"' or nx == "\\" or (not quote and nx == " ")) then
          out[#out + 1] = nx; i = i + 2
        elseif not quote and (c == " " or c == "\t") then
          break
        elseif not quote and (c == '"' or c == "'") then
          quote = c; i = i + 1
        elseif quote and c == quote then
          quote = nil; i = i + 1
        else
          out[#out + 1] = c; i = i + 1
        end
      end
      if quote then return nil end
      args[#args + 1] = table.concat(out)
    end
  end
  return args
end

--- Shell-style wildcard match of one pattern (`*`, `?`), anchored; case-sensitive like OpenSSH's.
function M.match_pattern(s, pat)
  local lp = "^" .. pat:gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", ".*"):gsub("%?", ".") .. "$"
  return s:match(lp) ~= nil
end

-- A comma-separated pattern list: true when some pattern matches and no negated one does.
local function match_list(s, list, lower)
  if lower then s = s:lower() end
  local got = false
  for pat in list:gmatch("[^,]+") do
    local neg = pat:sub(1, 1) == "!"
    if neg then pat = pat:sub(2) end
    if lower then pat = pat:lower() end
    if M.match_pattern(s, pat) then
      if neg then return false end
      got = true
    end
  end
  return got
end

-- OpenSSH's time format: 30, 30s, 1m30s, 2h, 1d, 1w (seconds when no unit).
local function conv_time(s)
  if s:match("^%d+$") then return tonumber(s) end
  local total, rest = 0, s
  local mult = { s = 1, S = 1, m = 60, M = 60, h = 3600, H = 3600, d = 86400, D = 86400, w = 604800, W = 604800 }
  while rest ~= "" do
    local num, unit, tail = rest:match("^(%d+)([sSmMhHdDwW]?)(.*)$")
    if not num then return nil end
    total = total + tonumber(num) * mult[unit ~= "" and unit or "s"]
    rest = tail
  end
  return total
end

local YESNO = { yes = true, ["true"] = true, no = false, ["false"] = false }

--- Expands %tokens (tokens: a table char -> string; %% is a percent) and a leading ~ (home). Raises on a token
-- the keyword does not have, as ssh does.
function M.expand(s, tokens, home, what)
  if home and (s == "~" or s:sub(1, 2) == "~/") then s = home .. s:sub(2) end
  return (s:gsub("%%(.?)", function(c)
    if c == "%" then return "%" end
    local v = tokens[c]
    if v == nil then error({ ssh_config_error = ("%s: unknown token %%%s in '%s'"):format(what, c, s) }, 0) end
    return v
  end))
end

-- Expands ${VAR} as OpenSSH does for paths (IdentityAgent, Include); unknown variables are errors there too.
local function expand_env(s, what)
  return (s:gsub("%${([%w_]+)}", function(v)
    local val = os.getenv(v)
    if not val then error({ ssh_config_error = ("%s: environment variable ${%s} is not set"):format(what, v) }, 0) end
    return val
  end))
end

-- Paths matching a glob (`*`, `?` per component; a leading dot only when the pattern has one), sorted.
local function glob(path)
  if not path:find("[%*%?]") then
    return sys.stat(path) and { path } or {}
  end
  local parts, out = {}, {}
  for p in path:gmatch("[^/]+") do parts[#parts + 1] = p end
  local function walk(dir, i)
    if i > #parts then out[#out + 1] = dir; return end
    local part = parts[i]
    local base = dir == "" and "" or dir
    if not part:find("[%*%?]") then
      local p = base .. "/" .. part
      if sys.stat(p) then walk(p, i + 1) end
      return
    end
    local names = sys.readdir(base == "" and "/" or base) or {}
    table.sort(names)
    for _, name in ipairs(names) do
      if name ~= "." and name ~= ".." and (name:sub(1, 1) ~= "." or part:sub(1, 1) == ".")
        and M.match_pattern(name, part) then
        walk(base .. "/" .. name, i + 1)
      end
    end
  end
  walk("", 1)
  return out
end

local function parse_port(file, n, a)
  local p = a and a:match("^%d+$") and tonumber(a)
  if not p or p < 1 or p > 65535 then fail(file, n, ("Bad port '%s'"):format(tostring(a))) end
  return p
end

-- A ProxyJump value's syntax (each hop [user@]host[:port] or ssh://[user@]host[:port]).
local function parse_jump_hop(hop)
  local u, h, p = hop:match("^ssh://([^@/]+)@([^:/]+):?(%d*)/?$")
  if not u then h, p = hop:match("^ssh://([^@:/]+):?(%d*)/?$") end
  if not h then
    u, h = hop:match("^([^@]+)@(.+)$")
    h = h or hop
    local hh, pp = h:match("^%[(.+)%]:(%d+)$")
    if not hh then hh, pp = h:match("^([^:]+):(%d+)$") end
    if hh then h, p = hh, pp end
  end
  if not h or h == "" or h:find("[%s/]") then return nil end
  return { user = u, host = h, port = (p and p ~= "") and tonumber(p) or nil }
end

--- Splits a ProxyJump value ("a,user@b:2222") into hops {user=, host=, port=}; nil for "none"; raises a syntax
-- error on a malformed hop.
function M.jump_hops(value, file, line)
  if not value or value:lower() == "none" then return nil end
  local hops = {}
  for hop in value:gmatch("[^,]+") do
    local h = parse_jump_hop(hop)
    if not h then fail(file or "ProxyJump", line or 0, ("Invalid ProxyJump \"%s\""):format(value)) end
    hops[#hops + 1] = h
  end
  return hops
end

-- The parse state of one resolution: the options set so far (first value wins) and what was read.
local function new_state(host, opts)
  return { host = host, original = host, home = opts.home or home_dir(), luser = opts.local_user or local_user(),
    cli_user = opts.user,
    o = { identity_files = {}, ignore_unknown = nil }, files = {}, warnings = {}, skipped_match = false }
end

local function set1(o, k, v) if o[k] == nil then o[k] = v end end

local function eval_match(st, file, n, args)
  local ok, i = true, 1
  local unevaluable = nil
  while i <= #args do
    local crit = args[i]
    local neg = crit:sub(1, 1) == "!"
    if neg then crit = crit:sub(2) end
    crit = crit:lower()
    local r
    if crit == "all" then
      r = true
      i = i + 1
    elseif crit == "canonical" or crit == "final" then
      unevaluable = unevaluable or crit
      r = false
      i = i + 1
    else
      local arg = args[i + 1]
      if not arg or arg == "" then fail(file, n, ("Match keyword %s requires an argument"):format(crit)) end
      i = i + 2
      if crit == "host" then
        local h = st.o.hostname and M.expand(st.o.hostname, { h = st.host }, nil, "HostName") or st.host
        r = match_list(h, arg, true)
      elseif crit == "originalhost" then
        r = match_list(st.original, arg, true)
      elseif crit == "user" then
        r = match_list(st.cli_user or st.o.user or st.luser, arg)
      elseif crit == "localuser" then
        r = match_list(st.luser, arg)
      elseif crit == "exec" or crit == "localnetwork" or crit == "tagged" or crit == "command"
        or crit == "version" or crit == "sessiontype" then
        unevaluable = unevaluable or crit
        r = false
      else
        fail(file, n, ("Unsupported Match attribute %s"):format(crit))
      end
    end
    if neg then r = not r end
    ok = ok and r
  end
  if #args == 0 then fail(file, n, "Missing Match criteria") end
  if unevaluable then
    if not st.skipped_match then
      st.warnings[#st.warnings + 1] = ("%s line %d: `Match %s` cannot be evaluated by odp: its block is skipped")
        :format(file, n, unevaluable)
      st.skipped_match = true
    end
    return false
  end
  return ok
end

local read_file -- forward

local function process_line(st, file, n, line, active, never, depth, user_conf)
  line = line:gsub("[%s\f]+$", "")
  local kw, rest = line:match("^%s*([^%s=]+)(.*)$")
  if not kw or kw:sub(1, 1) == "#" then return active end
  -- The keyword is separated by whitespace or one '='.
  rest = rest:gsub("^%s*=?%s*", "", 1)
  kw = kw:lower()
  if rest == "" then fail(file, n, ("no argument after keyword \"%s\""):format(kw)) end
  local args = split_args(rest)
  if not args then fail(file, n, "invalid quotes") end
  local o = st.o
  local on = active and not never

  if kw == "host" then
    if #args == 0 then fail(file, n, "Host requires a pattern") end
    local match = false
    for _, pat in ipairs(args) do
      local neg = pat:sub(1, 1) == "!"
      if M.match_pattern(st.host, neg and pat:sub(2) or pat) then
        if neg then return false end
        match = true
      end
    end
    return match
  elseif kw == "match" then
    return eval_match(st, file, n, args)
  elseif kw == "include" then
    for _, a in ipairs(args) do
      local p = expand_env(a, "Include")
      if p:sub(1, 1) ~= "/" and p:sub(1, 1) ~= "~" then
        if not user_conf then fail(file, n, "bad include path " .. p) end
        p = st.home .. "/.ssh/" .. p
      elseif p == "~" or p:sub(1, 2) == "~/" then
        p = st.home .. p:sub(2)
      end
      for _, f in ipairs(glob(p)) do
        if depth >= MAX_DEPTH then fail(file, n, "Includes nested too deeply (loop?)") end
        local what = sys.stat(f)
        if what and what.type ~= "file" then fail(file, n, ("Can't open user config file %s: not a file"):format(f)) end
        read_file(st, f, depth + 1, not on, user_conf)
      end
    end
    return active
  end

  if not KNOWN[kw] then
    if o.ignore_unknown and match_list(kw, o.ignore_unknown, true) then return active end
    fail(file, n, "Bad configuration option: " .. kw)
  end
  local a1 = args[1]
  if kw == "ignoreunknown" then
    if on then set1(o, "ignore_unknown", a1) end
  elseif kw == "hostname" then
    if on then set1(o, "hostname", a1) end
  elseif kw == "user" then
    if on then set1(o, "user", a1) end
  elseif kw == "port" then
    local p = parse_port(file, n, a1)
    if on then set1(o, "port", p) end
  elseif kw == "identityfile" then
    if on then
      local dup = false
      for _, f in ipairs(o.identity_files) do dup = dup or f == a1 end
      if not dup then o.identity_files[#o.identity_files + 1] = a1 end
    end
  elseif kw == "identitiesonly" or kw == "stricthostkeychecking" then
    local v = a1:lower()
    if kw == "stricthostkeychecking" then
      local norm = ({ yes = "yes", ["true"] = "yes", no = "no", ["false"] = "no", off = "no", ask = "ask",
        ["accept-new"] = "accept-new" })[v]
      if not norm then fail(file, n, ("unsupported option \"%s\""):format(a1)) end
      if on then set1(o, "strict_host_key_checking", norm) end
    else
      if YESNO[v] == nil then fail(file, n, ("unsupported option \"%s\""):format(a1)) end
      if on then set1(o, "identities_only", YESNO[v]) end
    end
  elseif kw == "identityagent" then
    if on then set1(o, "identity_agent", a1) end
  elseif kw == "hostkeyalias" then
    if on then set1(o, "host_key_alias", a1) end
  elseif kw == "userknownhostsfile" then
    if on and o.known_hosts_files == nil then o.known_hosts_files = args end
  elseif kw == "globalknownhostsfile" then
    if on and o.global_known_hosts_files == nil then o.global_known_hosts_files = args end
  elseif kw == "connecttimeout" or kw == "serveraliveinterval" then
    local v = a1 == "none" and kw == "connecttimeout" and -1 or conv_time(a1)
    if not v then fail(file, n, "invalid time value") end
    if on then set1(o, kw == "connecttimeout" and "connect_timeout" or "server_alive_interval", v) end
  elseif kw == "serveralivecountmax" then
    local v = a1:match("^%d+$") and tonumber(a1)
    if not v then fail(file, n, "integer value invalid") end
    if on then set1(o, "server_alive_count_max", v) end
  elseif kw == "controlpath" then
    if on then set1(o, "control_path", a1) end
  elseif kw == "controlmaster" then
    local norm = ({ yes = "yes", ["true"] = "yes", no = "no", ["false"] = "no", ask = "ask", auto = "auto",
      autoask = "autoask" })[a1:lower()]
    if not norm then fail(file, n, ("unsupported option \"%s\""):format(a1)) end
    if on then set1(o, "control_master", norm) end
  elseif kw == "controlpersist" then
    local v = a1:lower()
    local norm = (v == "yes" or v == "true") and "yes" or (v == "no" or v == "false") and "no" or conv_time(a1)
    if not norm then fail(file, n, "invalid time value") end
    if on then set1(o, "control_persist", norm == 0 and "yes" or norm) end
  elseif kw == "proxycommand" then
    -- The rest of the line as written (not split into arguments).
    if on and o.proxy_command == nil and (o.proxy_jump == nil or o.proxy_jump == "none") then
      o.proxy_command = rest
    end
  elseif kw == "proxyjump" then
    local v = rest:gsub("#.*$", ""):gsub("%s+$", "")
    if v:lower() == "none" then
      if on then set1(o, "proxy_jump", "none") end
    else
      M.jump_hops(v, file, n)
      if on and o.proxy_command == nil and o.proxy_jump == nil then o.proxy_jump = v end
    end
  end
  return active
end

read_file = function(st, path, depth, never, user_conf)
  local what = sys.stat(path)
  local f = (not what or what.type == "file") and io.open(path, "r")
  if not f then
    if depth == 0 then return nil, path end
    return true -- an Include that names an unreadable file is skipped, as by OpenSSH when it does not exist
  end
  st.files[#st.files + 1] = path
  local active, n = true, 0
  for line in f:lines() do
    n = n + 1
    active = process_line(st, path, n, line, active, never, depth, user_conf)
  end
  f:close()
  return true
end

--- Resolves host like `ssh host` would. opts: file (path; "none" reads none; default ~/.ssh/config, absent is
-- fine), home, local_user, and the command line's overrides: user, port, identity (tried first, like ssh -i),
-- known_hosts, connect_timeout. Returns the settings:
--   alias, hostname, user, port, identity_files (expanded), identity_files_raw, identities_only,
--   identity_agent (expanded; "none" = no agent; nil = $SSH_AUTH_SOCK), proxy_jump (string), proxy_command
--   (as written), proxy_command_line (%h %p %r %n filled in), known_hosts_files (expanded),
--   global_known_hosts_files (as written), strict_host_key_checking
--   ("yes"|"ask"|"accept-new"|"no"), connect_timeout (seconds or nil), server_alive_interval (0 = off),
--   server_alive_count_max, host_key_alias, control_path (as written; nil for none), control_master
--   ("no"|"yes"|"ask"|"auto"|"autoask"), control_persist ("no"|"yes"|seconds), files (read), warnings (one line
--   each)
-- or nil, "EUSAGE: file line N: why", "EUSAGE" for a file OpenSSH would refuse too.
function M.resolve(host, opts)
  opts = opts or {}
  -- Blocks match the name as given; the resulting host name is lower-cased (addresses aside), as by ssh.
  local st = new_state(host, opts)
  local ok, err = pcall(function()
    local file = opts.file
    if file ~= "none" then
      local path = file or (st.home .. "/.ssh/config")
      local read, missing = read_file(st, path, 0, false, true)
      if not read and file then
        error({ ssh_config_error = ("cannot read ssh config %s"):format(missing) }, 0)
      end
    end
  end)
  if not ok then
    if type(err) == "table" and err.ssh_config_error then return nil, "EUSAGE: " .. err.ssh_config_error, "EUSAGE" end
    error(err, 0)
  end
  local o = st.o
  local s = { alias = host, files = st.files, warnings = st.warnings }
  s.user = opts.user or o.user or st.luser
  s.port = opts.port or o.port or 22
  local ok2, err2 = pcall(function()
    s.hostname = o.hostname and M.expand(o.hostname, { h = host }, nil, "HostName") or host
    if not s.hostname:find(":") then s.hostname = s.hostname:lower() end
    local lhost = sys.hostname()
    local tok = { d = st.home, h = s.hostname, r = s.user, u = st.luser, p = tostring(s.port), n = host,
      l = lhost, L = lhost:match("^[^.]*") }
    s.identity_files_raw = {}
    if opts.identity then s.identity_files_raw[1] = opts.identity end
    for _, f in ipairs(o.identity_files) do
      if f ~= opts.identity then s.identity_files_raw[#s.identity_files_raw + 1] = f end
    end
    s.identity_files = {}
    for i, f in ipairs(s.identity_files_raw) do s.identity_files[i] = M.expand(f, tok, st.home, "IdentityFile") end
    s.identities_only = o.identities_only or false
    if o.identity_agent and o.identity_agent ~= "none" and o.identity_agent ~= "SSH_AUTH_SOCK" then
      s.identity_agent = M.expand(expand_env(o.identity_agent, "IdentityAgent"), tok, st.home, "IdentityAgent")
    else
      s.identity_agent = o.identity_agent
    end
    if o.proxy_jump and o.proxy_jump ~= "none" then
      local parts = {}
      for i, h in ipairs(M.jump_hops(o.proxy_jump)) do
        parts[i] = (h.user and h.user .. "@" or "") .. h.host .. (h.port and ":" .. h.port or "")
      end
      s.proxy_jump = table.concat(parts, ",")
    end
    s.proxy_command = o.proxy_command ~= "none" and o.proxy_command or nil
    s.proxy_command_line = s.proxy_command and M.expand(s.proxy_command, { h = s.hostname, p = tostring(s.port),
      r = s.user, n = host }, nil, "ProxyCommand")
    local kh = opts.known_hosts and { opts.known_hosts } or o.known_hosts_files
      or { "~/.ssh/known_hosts", "~/.ssh/known_hosts2" }
    s.known_hosts_files = {}
    for i, f in ipairs(kh) do s.known_hosts_files[i] = M.expand(f, tok, st.home, "UserKnownHostsFile") end
    -- used as written: OpenSSH expands no tokens there
    s.global_known_hosts_files = o.global_known_hosts_files or { "/etc/ssh/ssh_known_hosts",
      "/etc/ssh/ssh_known_hosts2" }
    s.strict_host_key_checking = o.strict_host_key_checking or "ask"
    s.connect_timeout = opts.connect_timeout or (o.connect_timeout and o.connect_timeout >= 0 and o.connect_timeout)
      or nil
    s.server_alive_interval = o.server_alive_interval or 0
    s.server_alive_count_max = o.server_alive_count_max or 3
    s.host_key_alias = o.host_key_alias and o.host_key_alias:lower()
    -- as written: ssh expands its tokens (%C is its own hash; odp.target.ssh asks `ssh -G`)
    s.control_path = o.control_path ~= "none" and o.control_path or nil
    s.control_master = o.control_master or "no"
    s.control_persist = o.control_persist or "no"
  end)
  if not ok2 then
    if type(err2) == "table" and err2.ssh_config_error then
      return nil, "EUSAGE: " .. err2.ssh_config_error, "EUSAGE"
    end
    error(err2, 0)
  end
  return s
end

return M
