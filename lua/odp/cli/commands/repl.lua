--- odp repl [DEVICE [transport options]]: an interactive Lua prompt with odp's modules and, given a device file,
-- `board` (odp.run.board, connected on first use) and `device` (the file's table).
local repl = require("odp.cli.repl")
local device = require("odp.target.device")
local cli = require("odp.core.options")
local ui = require("odp.core.ui")

local M = { summary = "Interactive Lua prompt with every odp module; with a device file, its board connected",
  help_text = "usage: odp repl [DEVICE.lua [transport options]]\n       odp repl --boards LAB.lua[:TAG|NAMES]\n\n" ..
    "A Lua prompt. Globals: odp.<module> (odp.proc, odp.ssh, odp.probe, odp.run.board, ...); with DEVICE,\n" ..
    "`board` (odp.run.board.open(DEVICE, options): connected on first use; board:help() lists its verbs) and\n" ..
    "`device` (the file's table). `odp repl DEVICE --help` lists the device's transport options.\n" ..
    "With --boards, `boards`: boards:exec(\"uname -r\") runs on every board at once, each output under its\n" ..
    "name; boards[\"pi-2\"] is one Board (docs/many-boards.md). board:exec(...) shows its output as it comes.\n" ..
    "Tab completes names, members and board verbs; an incomplete statement continues on the next line (>>);\n" ..
    "an expression's value is printed (a result record as the report). Ctrl-C interrupts the running call\n" ..
    "and returns to the prompt; Ctrl-C at an empty prompt twice, or Ctrl-D, leaves.\n" ..
    "History: $XDG_STATE_HOME/odp/repl_history." }

-- What `odp repl DEVICE` accepts after the device: the transport's options (probe boards: the Ethos-U flow's).

function M.device_options(dev)
  if dev.transport ~= "probe" then return device.kind(dev.transport).options or {} end
  local out = {}
  for _, opt in ipairs(require("odp.run").flow("ethos_u").options) do -- lazy: start-up
    for _, name in ipairs(device.PROBE_OPTIONS) do if opt[1] == name then out[#out + 1] = opt end end
  end
  out[#out + 1] = { "image", "Twin: an ELF to boot when no twin runs (default: the twin firmware build)", nil, "file" }
  out[#out + 1] = { "keep", "Twin: leave QEMU running when the REPL ends", false, "bool" }
  return out
end

-- --help: the text above and the device files shipped (found at run time).
local function help()
  local lines = { M.help_text, "", "Device files shipped:" }
  for _, d in ipairs(device.shipped()) do
    lines[#lines + 1] = ("  %-26s %-6s %s"):format(d.path, d.transport, d.description or "")
  end
  return table.concat(lines, "\n")
end

function M.main(args)
  if args[1] == "--help" or args[1] == "-h" then
    print(help())
    return 0
  end
  local env = setmetatable({ odp = repl.odp_namespace() }, { __index = _G })
  if args[1] == "--boards" then
    if not args[2] then io.stderr:write("odp repl: --boards needs a lab file (LAB.lua[:TAG|NAMES], lava, labgrid:FILE)\n") return 2 end
    if args[3] then -- never dropped: the boards' transport options are the lab file's here
      io.stderr:write(("odp repl: --boards takes no other argument, got '%s' (transport options go in the lab "
        .. "file: docs/many-boards.md)\n"):format(args[3]))
      return 2
    end
    local entries = require("odp.target.lab").load(args[2]).boards -- lazy: start-up
    env.boards = require("odp.run.boards").open(entries, ui.new {}) -- lazy: start-up
    local names = env.boards:names()
    for _, n in ipairs(names) do env.boards[n].echo = true end
    io.stderr:write(("boards: %s -- boards:exec(\"uname -r\") runs on all at once; boards[\"%s\"] is one Board\n")
      :format(table.concat(names, ", "), names[1]))
  elseif args[1] then
    local dev = device.load(args[1])
    local options = M.device_options(dev)
    local opts = cli.parse(table.move(args, 2, #args, 1, {}), options, { cli.global_options[#cli.global_options] })
    if opts.help then
      print(cli.help(("odp repl %s [options]"):format(args[1]), dev.description, options))
      return 0
    end
    opts.ui = ui.new {}
    env.device = dev
    -- lazy: start-up
    env.board = require("odp.run").open_board(dev, opts) -- board:profile{} runs through odp.run.point
    env.board.echo = true -- board:exec(...) at the prompt: its output as it arrives, then one status line
    io.stderr:write(("board: %s (%s, %s) -- board:help() lists its verbs\n"):format(dev.name, args[1], dev.transport))
  end
  repl.loop(env)
  if env.board then require("odp.run").close(env.board) end -- lazy: start-up
  if env.boards then env.boards:close() end
  return 0
end

return M
