-- AWS Graviton4 (Neoverse V2): an r8g/c8g/m8g EC2 instance, reached over SSH. Data only (schema: docs/devices.md).
return {
  name = "graviton4",
  description = "AWS Graviton4 EC2 instance (aarch64 Linux, Ubuntu 26.04) over SSH",
  transport = "ssh",
  flow = "executorch",
  arch = "aarch64",
  runner = "executor_runner-linux-aarch64-graviton",
  remote_dir = "/tmp/odp",
  user = "ubuntu",                       -- when --host has no user@
  glibc_advice = "launch the instance with Ubuntu 26.04 (the image the Graviton runner is built and validated " ..
    "on); an older image's glibc is too old for it",
}
