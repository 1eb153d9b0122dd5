-- Profile an ExecuTorch runner on a Raspberry Pi 5 over SSH:
--   odp run scripts/rpi5.lua --host rpi5 --runner executor_runner-linux-aarch64 --model m.pte -n 10 \
--       --etdump p.etdump
-- Preflight (ELF machine, glibc, ET12, free space) runs before anything is uploaded.
local ex = require("odp.flows.executorch")
return require("odp.target.preflight").wrap(ex.script {
  name = "rpi5",
  description = "Run an ExecuTorch executor_runner on a Raspberry Pi 5 over SSH and report latency, peak\n" ..
    "memory (odp-rusage), planned buffers, outputs and (with --etdump) the operator table.\n" ..
    "Arguments after -- go to the runner.",
  target = "ssh",
  device = "devices/rpi5.lua",
}, require("odp.target.ssh"), "devices/rpi5.lua")
