-- Profile a .pte on the Alif E8 (or its QEMU twin): build the MLEK firmware with the model, flash it with
-- SETOOLS + XMODEM over RTT, SWD reset, capture Inference: lines and base64 artifacts over RTT, report.
--   odp run scripts/alif_e8.lua --model m.pte --mlek ~/mlek_experimental --setools ~/app-release-exec-linux \
--        --flasher-dir ~/alif_usb-to-ospi-flasher --memory-mode Dedicated_Sram --activation-buf-sz 0x600000 \
--        --tmp-mem-size 0x40000 --inferences 10
--   odp run scripts/alif_e8.lua --device devices/twin_m55.lua --model tests/fixtures/pte/mnist_ethos_u55.pte
-- docs/alif_e8.md has the whole procedure; --dry-run prints every command.
return require("odp.flows.ethos_u").script {
  name = "alif_e8",
  description = "Alif E8 (Ethos-U85): build the firmware with the model, flash (SETOOLS + XMODEM over RTT),\n" ..
    "SWD reset, capture latency, PMU counters and the ETDump over RTT. Steps: build, flash, run\n" ..
    "(--steps/--only); --dry-run prints the commands. --device devices/twin_m55.lua runs on the QEMU twin.",
  device = "devices/alif_e8.lua",
}
