-- Alif Ensemble E8 DevKit (Cortex-M55 HP + HE cores, Ethos-U85 Z256), profiled with the MLEK
-- executorch_inference_runner use case: build -> flash (SETOOLS + XMODEM over RTT) -> SWD reset -> RTT capture.
-- Data only (schema: docs/devices.md): lua/odp/flows/ethos_u.lua reads it; scripts/alif_e8.lua uses it by default.
-- Every value comes from the vendor's guide (docs/sources.md §8) or docs/sources.md §4-§6; docs/alif_e8.md
-- explains each one. Copy this file to change anything (your own commands included) and pass --device.
--
-- Placeholders in strings are filled at run time: <mlek> <setools> <build_dir> <model> <jobs> <target>
-- <cfg> <toolchain_file> <activation_buf_sz> <tmp_mem_size> <memory_mode> <inferences> <flasher>.
-- An argv element that is exactly "<cmake_defs>" expands to the -DNAME=VALUE list.
return {
  name = "alif_e8",
  description = "Alif Ensemble E8 DevKit, M55 HP core + Ethos-U85 (MLEK executorch_inference_runner)",
  transport = "probe",
  flow = "ethos_u", -- lua/odp/flows/ethos_u

  -- Probe: SEGGER J-Link over SWD. The application runs on the HP core; Alif's USB-to-OSPI flasher
  -- (flasher-cfg.json, cpu_id M55_HE) runs on the HE core, so XMODEM talks to the HE core's RTT block.
  probe = {
    backend = "jlink",
    jlink_device = "AE822FA0E5597LS0_M55_HP",
    flasher_jlink_device = "AE822FA0E5597LS0_M55_HE",
    interface = "swd",
    speed_khz = 4000,
  },

  -- RTT: where to search for the "SEGGER RTT" control block (the cores' DTCM, local addresses). The block
  -- must sit in DTCM or non-cacheable RAM (docs/sources.md §4). If your firmware puts it elsewhere, pass
  -- --rtt-address (from the map file: symbol _SEGGER_RTT) or --rtt-ranges START:SIZE[,START:SIZE...].
  rtt = {
    ranges = { { 0x20000000, 0x100000 } },          -- M55 HP DTCM (1 MiB)
    flasher_ranges = { { 0x20000000, 0x40000 } },   -- M55 HE DTCM (256 KiB)
    channel = 0,
  },

  -- Build: the MLEK (nota-github/mlek_experimental) cmake project, the vendor guide's cache values.
  build = {
    source_dir = "<mlek>",
    dir = "<mlek>/build_benchmark",
    toolchain_file = "scripts/cmake/toolchains/bare-metal-gcc.cmake", -- relative to the MLEK tree, as in the vendor guide (docs/sources.md §8)
    compiler = "arm-none-eabi-gcc",
    target = "mlek_executorch_inference_runner",
    cmake = {
      USE_CASE_BUILD = "executorch_inference_runner",
      TARGET_PLATFORM = "alif",
      TARGET_SUBSYSTEM = "RTSS-HP",
      TARGET_BOARD = "DevKit-e8",
      ML_FRAMEWORK = "ExecuTorch",
      CMAKE_TOOLCHAIN_FILE = "<toolchain_file>",
      CMAKE_BUILD_TYPE = "Release",
      ETHOS_U_NPU_ID = "U85",
      ETHOS_U_NPU_CONFIG_ID = "Z256",
      ETHOS_U_NPU_MEMORY_MODE = "<memory_mode>",
      ETHOS_U_NPU_CACHE_SIZE = "0x00060000",
      ML_FWK_TMP_MEM_SIZE = "<tmp_mem_size>",
      executorch_inference_runner_ACTIVATION_BUF_SZ = "<activation_buf_sz>",
      EXECUTORCH_ENABLE_EVENT_TRACER = "ON",
      OSPI_RAM_SUPPORT = "ON",
      OSPI_RAM_TEST = "ON",
      executorch_inference_runner_MODEL_PATH = "<model>",
    },
    -- Per memory mode: cache entries to drop (docs/sources.md §8: Shared_Sram runs from on-chip SRAM, no NPU cache
    -- and no OSPI RAM test). The mode must match the one Vela compiled the .pte for, or the device faults.
    memory_modes = {
      Dedicated_Sram = { drop = {} },
      Shared_Sram = { drop = { "ETHOS_U_NPU_CACHE_SIZE", "OSPI_RAM_TEST" } },
      Sram_Only = { drop = {} },
    },
    defaults = { memory_mode = "Dedicated_Sram", activation_buf_sz = 0x00600000, tmp_mem_size = 0x00040000 },
    -- the largest values the firmware holds (checked before the build, exit 2): sizes within the M55's 32-bit
    -- address space, the inference count in the runner's int counter
    limits = { activation_buf_sz = 0xFFFFFFFF, tmp_mem_size = 0xFFFFFFFF, inferences = 0x7FFFFFFF },
    -- What the stale-build guard hashes besides the flags and the .pte: the executorch source revision and
    -- its patch state (docs/sources.md §8: a changed source or patch must wipe build_benchmark).
    state = {
      { "git", "-C", "<mlek>/dependencies/executorch", "rev-parse", "HEAD" },
      { "git", "-C", "<mlek>/dependencies/executorch", "diff", "HEAD" },
      { "git", "-C", "<mlek>", "rev-parse", "HEAD" },
    },
    env = { PYTHONPATH = "<mlek>/dependencies/executorch" },
    outputs = {
      mram = "bin/sectors/executorch_inference_runner/mram.bin",
      ext_flash = "bin/sectors/executorch_inference_runner/ext_flash.bin",
    },
  },

  -- Flash: Alif SETOOLS (SE_FW 1.109.00), run from its directory; images are copied into build/images/.
  setools = {
    dir = "<setools>",
    flasher_cfg = "build/config/flasher-cfg.json",
    app_cfg = "build/config/asr.json",
    flasher_image = "build/images/flasher_he.bin",
    app_image = "build/images/mram.bin",
    -- where alifsemi/alif_usb-to-ospi-flasher puts the HE flasher (under --flasher-dir)
    flasher_build = "out/flasher/E8-HE/debug/flasher.bin",
  },

  -- The commands each step runs (argv lists; cwd/env per command). Replace any of them to use your own
  -- build or flash tooling; the flow only adds streaming, logging, timeouts and checks.
  commands = {
    configure = { argv = { "cmake", "-S", "<source_dir>", "-B", "<build_dir>", "<cmake_defs>" }, env = "build" },
    build = { argv = { "make", "-C", "<build_dir>", "-j<jobs>", "<target>" }, env = "build" },
    gen_toc = { argv = { "<setools_bin>/app-gen-toc", "-f", "<cfg>" }, cwd = "<setools_dir>" },
    write_mram = { argv = { "<setools_bin>/app-write-mram", "-p" }, cwd = "<setools_dir>" },
  },

  -- What the firmware prints over RTT.
  lines = {
    inference = "^Inference: (%S+) ms",
    flasher_start = "Starting xmodemReceive...",
    flasher_ok = "^Success, (%d+) bytes received%.$",
    flasher_crc = "^CRC32: (%x+)$",            -- not printed by Alif's flasher; checked when present
    flasher_fail = "^Failed = (%-?%d+)$",
  },
  xmodem = { mode = "1k" },
}
