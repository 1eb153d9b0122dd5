-- vivo X300 Pro (Android 16, MediaTek Dimensity 9500, arm64-v8a): profiled over adb (USB or `adb tcpip`).
-- Data only (schema: docs/devices.md). See docs/devices.md, section Android, for USB debugging and udev.
return {
  name = "vivo_x300_pro",
  description = "vivo X300 Pro, Android, arm64 (adb over USB or TCP)",
  transport = "adb",
  flow = "executorch",
  arch = "aarch64",                      -- `uname -m` on the phone; the runner must be built for it
  runner = "executor_runner-android-arm64", -- what ExecuTorch's android preset builds
  remote_dir = "/data/local/tmp/odp",    -- writable by the shell user, executable (not /sdcard)
  -- ExecuTorch's Android build logs to logcat: cleared before each run, read after it
  log = { clear = "logcat -c", dump = "logcat -d -s ExecuTorch:I" },
  -- GNU-time-style commands tried when odp has no odp-rusage helper for the phone (mksh's `time` has no -v)
  time_commands = { "/system/bin/time -v", "toybox time -v", "/usr/bin/time -v" },
}
