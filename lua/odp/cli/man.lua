--- The man page, odp(1), generated from what --help is generated from: the commands' summaries, usage lines
-- and option declarations, the shipped scripts' declarations (scripts/*.lua), and odp.core.options's exit codes,
-- environment and files. `make` writes it to build/odp.1 (tools/man.lua); `make install` to share/man/man1.
local cli = require("odp.core.options")
local host = require("odp.host")
local main = require("odp.cli.main")

local M = {}

-- roff text: backslashes escaped, hyphens as minus signs (so --help searches find them), no line starting
-- with a control character.
local function esc(s)
  s = tostring(s):gsub("\\", "\\e"):gsub("%-", "\\-")
  return (s:gsub("\n([.'])", "\n\\&%1"):gsub("^([.'])", "\\&%1"))
end

-- A paragraph of --help text (lines as written) kept as lines.
local function lines(out, text)
  out[#out + 1] = ".nf"
  out[#out + 1] = esc(text)
  out[#out + 1] = ".fi"
end

local function paragraph(out, text)
  out[#out + 1] = ".PP"
  out[#out + 1] = esc((text:gsub("\n", " ")))
end

local function options(out, list)
  for _, o in ipairs(list) do
    local d = cli.describe(o)
    out[#out + 1] = ".TP"
    out[#out + 1] = "\\fB" .. esc(d.short and (d.short .. ", ") or "") .. esc(d.long) .. "\\fR"
    out[#out + 1] = esc(d.help)
  end
end

local function list_dir(dir)
  local p = io.popen(("ls %s/*.lua 2>/dev/null"):format(dir))
  local files = {}
  for f in p:lines() do files[#files + 1] = f end
  p:close()
  return files
end

--- The shipped scripts that declare themselves: {path = "scripts/x.lua", spec = declaration}.
function M.scripts()
  local out = {}
  for _, path in ipairs(list_dir(host.root .. "/scripts")) do
    local spec = assert(loadfile(path))() -- a script that cannot load is a broken release, not a skipped page
    if type(spec) == "table" and spec.options then
      out[#out + 1] = { path = "scripts/" .. path:match("[^/]+$"), spec = spec }
    end
  end
  return out
end

--- odp(1) as roff source.
function M.render()
  local out = {
    (".TH ODP 1 \"\" \"odp %s\" \"User Commands\""):format(esc(host.version)),
    ".nh",
    ".ad l",
    ".SH NAME",
    "odp \\- on\\-device profiler for ExecuTorch models",
    ".SH SYNOPSIS",
    "\\fBodp\\fR \\fIcommand\\fR [\\fIoptions\\fR]",
    ".br",
    "\\fBodp run\\fR \\fISCRIPT\\fR [\\fIscript options\\fR] [\\fB\\-\\-\\fR \\fIrunner args\\fR]",
    ".SH DESCRIPTION",
  }
  paragraph(out, "odp measures latency, peak memory, planned buffers and operator timings of ExecuTorch .pte " ..
    "models on the device: a Linux board over SSH, an Android phone over adb, this machine, or an Ethos-U " ..
    "microcontroller through build, flash and RTT capture. What knows a device is Lua (the scripts and " ..
    "device files below, editable without rebuilding); every run prints a table, can write JSON, JSONL or " ..
    "CSV, and leaves the runner's output and its result record under runs/.")
  out[#out + 1] = ".SH COMMANDS"
  for _, name in ipairs(main.COMMANDS) do
    local cmd = main.command(name)
    local usage = cmd.usage or (cmd.help_text and cmd.help_text:match("^usage: ([^\n]+)")) or ("odp " .. name)
    out[#out + 1] = ".SS " .. esc(usage)
    paragraph(out, cmd.summary .. ".")
    if cmd.options then
      if cmd.description then lines(out, cmd.description) end
      options(out, cmd.options)
    elseif cmd.help_text then
      lines(out, (cmd.help_text:gsub("^usage: [^\n]*\n*", "")))
    end
  end
  out[#out + 1] = ".SH SCRIPTS"
  paragraph(out, "Run with odp run; odp run SCRIPT --help shows the same. Every script also takes the common " ..
    "options below.")
  for _, s in ipairs(M.scripts()) do
    out[#out + 1] = ".SS odp run " .. esc(s.path)
    if s.spec.description then lines(out, s.spec.description) end
    options(out, s.spec.options)
  end
  out[#out + 1] = ".SH COMMON OPTIONS"
  options(out, cli.global_options)
  -- a section of tagged paragraphs: the term in bold (fonts "B") or italics ("I"), its meaning under it
  local function terms(title, rows, font)
    out[#out + 1] = ".SH " .. title
    for _, e in ipairs(rows) do
      out[#out + 1] = ".TP"
      out[#out + 1] = "\\f" .. font .. esc(e[1]) .. "\\fR"
      out[#out + 1] = esc(e[2])
    end
  end
  terms("EXIT STATUS", cli.EXIT_CODES, "B")
  terms("ENVIRONMENT", cli.ENVIRONMENT, "B")
  terms("FILES", cli.FILES, "I")
  out[#out + 1] = ".SH SEE ALSO"
  paragraph(out, "docs/SCRIPTING.md (the Lua API and the result record), docs/devices.md (setting up each " ..
    "device), docs/sources.md (the formats odp reads), in odp's source tree.")
  return table.concat(out, "\n") .. "\n"
end

return M
