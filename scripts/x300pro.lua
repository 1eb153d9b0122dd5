-- Profile an ExecuTorch runner on a vivo X300 Pro (or any Android device) over adb: through Google's adb server
-- when one runs (Android Studio's), else directly over USB:
--   odp run scripts/x300pro.lua --runner executor_runner-android-arm64 --model m.pte -n 10 --etdump p.etdump
--   odp run scripts/x300pro.lua --adb tcp:192.168.1.20:5555 --runner ... --model ...
return require("odp.flows.executorch").script {
  name = "x300pro",
  description = "Run an ExecuTorch executor_runner on an Android phone over adb (through the adb server when one\n" ..
    "runs, else USB; or --adb tcp:HOST:PORT):\n" ..
    "push runner and model (skipped when unchanged), run, read logcat (or stderr), pull the ETDump, report.",
  target = "adb",
  device = "devices/vivo_x300_pro.lua",
  preflight = true, -- ELF machine (vs the device's uname -m), glibc and free space checked before any upload
}
