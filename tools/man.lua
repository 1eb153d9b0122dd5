-- Writes odp(1) to stdout: `build/odp run tools/man.lua > build/odp.1` (make does this; see lua/odp/cli/man.lua).
io.write(require("odp.cli.man").render())
