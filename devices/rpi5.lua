-- Raspberry Pi 5 (BCM2712, 4x Cortex-A76) running 64-bit Raspberry Pi OS or Ubuntu, reached over SSH.
-- Data only (schema: docs/devices.md): scripts/rpi5.lua, the ssh target and the preflight read it.
return {
  name = "rpi5",
  description = "Raspberry Pi 5 (aarch64 Linux) over SSH",
  transport = "ssh",
  flow = "executorch",
  arch = "aarch64",                                  -- uname -m
  runner = "executor_runner-linux-aarch64",          -- from the Arm AI Model Optimizer profiling binaries
  remote_dir = "/tmp/odp",
  glibc_advice = "update the board's OS (64-bit Raspberry Pi OS or a newer Ubuntu), or ask for a runner " ..
    "built against the board's glibc",
}
