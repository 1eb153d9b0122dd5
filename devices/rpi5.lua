-- Raspberry Pi 5 (BCM2712, 4x Cortex-A76) running 64-bit Raspberry Pi OS or Ubuntu, reached over SSH.
-- Data only (docs/devices.md): scripts/rpi5.lua and the preflight read it.
return {
  name = "rpi5",
  description = "Raspberry Pi 5 (aarch64 Linux) over SSH",
  kind = "ssh",
  arch = "aarch64",                                  -- uname -m
  binary = "executor_runner-linux-aarch64",          -- from the Arm AI Model Optimizer profiling binaries
  remote_dir = "/tmp/odp",
  os_notes = "64-bit Raspberry Pi OS (Bookworm, glibc 2.36) or Ubuntu 24.04+ (glibc 2.39); a 32-bit OS " ..
    "(armv7l) cannot run the aarch64 runner. /usr/bin/time is often absent: odp pushes its own odp-rusage.",
  glibc_advice = "update the board's OS (64-bit Raspberry Pi OS or a newer Ubuntu), or ask for a runner " ..
    "built against the board's glibc",
  -- the vendor guide's example (docs/sources.md §8): 10 inferences of a 3-class classifier, 42.6 ms each, peak RSS 43600 kB, 4 threads.
  reference = { threads = 4, avg_ms = 42.645, peak_rss_kb = 43600, planned_buffer = 9633856 },
}
