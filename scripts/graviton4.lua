-- Profile an ExecuTorch runner on an AWS Graviton4 instance (Ubuntu 26.04) over SSH:
--   odp run scripts/graviton4.lua --host ubuntu@ec2-host --identity ~/.ssh/aws.pem \
--       --runner executor_runner-linux-aarch64-graviton --model m.pte -n 10
return require("odp.flows.executorch").script {
  name = "graviton4",
  description = "Run an ExecuTorch executor_runner on an AWS Graviton4 instance over SSH and report latency,\n" ..
    "peak memory (odp-rusage), planned buffers, outputs and (with --etdump) the operator table.\n" ..
    "Launch the instance with Ubuntu 26.04. Arguments after -- go to the runner.",
  target = "ssh",
  device = "devices/graviton4.lua",
  preflight = true, -- ELF machine, glibc and free space checked on the board before any upload
}
