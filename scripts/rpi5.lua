-- Profile an ExecuTorch runner on a Raspberry Pi 5 over SSH:
--   odp run scripts/rpi5.lua --host rpi5 --runner executor_runner-linux-aarch64 --model m.pte -n 10 \
--       --etdump p.etdump
-- The model is checked here first; preflight (ELF machine, glibc, free space) runs on the board before
-- anything is uploaded.
return require("odp.flows.executorch").script {
  name = "rpi5",
  description = "Run an ExecuTorch executor_runner on a Raspberry Pi 5 over SSH and report latency, peak\n" ..
    "memory (odp-rusage), planned buffers, outputs and (with --etdump) the operator table.\n" ..
    "Arguments after -- go to the runner.",
  target = "ssh",
  device = "devices/rpi5.lua",
  preflight = true, -- ELF machine, glibc and free space checked on the board before any upload
}
