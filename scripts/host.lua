-- Profile an ExecuTorch runner on this machine:
--   odp run scripts/host.lua --runner ./executor_runner --model m.pte -n 10 --etdump out.etdump
return require("odp.flows.executorch").script {
  name = "host",
  description = "Run an ExecuTorch executor_runner on this machine and report latency, peak memory,\n" ..
    "planned buffers, outputs and (with --etdump) the operator table. Arguments after -- go to the runner.",
  target = "host",
  preflight = true, -- the runner's ELF machine against this one's: another machine's would run emulated
}
