-- vivo X300 Pro (Android 16, MediaTek Dimensity 9500, arm64-v8a): profiled over adb (USB or `adb tcpip`).
-- Data only (docs/devices.md). See docs/devices.md, section Android, for USB debugging and udev.
return {
  name = "vivo_x300_pro",
  description = "vivo X300 Pro, Android, arm64 (adb over USB or TCP)",
  kind = "executorch",
  target = "adb",
  arch = "aarch64",                      -- `uname -m` on the phone; the runner must be built for it
  runner = "executor_runner-android-arm64", -- what ExecuTorch's android preset builds
  remote_dir = "/data/local/tmp/odp",    -- writable by the shell user, executable (not /sdcard)
  log = { source = "logcat", tag = "ExecuTorch", clear = "logcat -c", dump = "logcat -d -s ExecuTorch:I" },
  rusage = { "odp-rusage", "toybox time -v" }, -- the static aarch64 odp-rusage runs on Android
}
