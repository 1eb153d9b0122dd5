-- The twin board: a Cortex-M55 in QEMU (mps3-an547) standing in for the Alif E8 in CI and on machines
-- without the board. Data only (schema: docs/devices.md). Everything here is described in tests/twin/README.md; the same
-- keys as devices/alif_e8.lua where the meaning is the same, so scripts/alif_e8.lua runs on either.
return {
  name = "twin_m55",
  description = "Cortex-M55 twin of the Alif E8 HP core in QEMU mps3-an547 (test firmware, shared-RAM RTT)",
  transport = "probe",
  flow = "ethos_u", -- lua/odp/flows/ethos_u

  -- Where the twin lives: tests/twin/launch.sh writes these files into the state directory.
  twin = {
    launch = "tests/twin/launch.sh",     -- launch.sh [-S] IMAGE.elf STATE_DIR
    stop = "tests/twin/stop.sh",         -- stop.sh STATE_DIR
    state_env = "ODP_TWIN_STATE",        -- SETOOLS stand-ins and the test libjlinkarm.so read it
  },

  -- Probe: the qemu backend (shared DDR file + QMP); the guest keeps running like J-Link background access.
  -- shm/qmp are filled in from the state files at run time.
  probe = {
    backend = "qemu",
    base = 0x60000000,                   -- file offset 0 of the shared DDR file
    -- alternatives that reach the same twin:
    --   {backend = "gdb", address = "127.0.0.1:<gdb_port>"}  (every access stops the guest)
    --   {backend = "jlink", lib = "<build>/libjlinkarm.so"}  (tests/twin/jlinkarm_twin.c, env ODP_TWIN_STATE)
    jlink_device = "AE822FA0E5597LS0_M55_HP", -- accepted and ignored by the test DLL
    interface = "swd",
    speed_khz = 4000,
  },

  -- RTT: the control block is at a fixed address in shared DDR; ranges for a scan.
  rtt = {
    address = 0x60000000,
    ranges = { { 0x60000000, 0x10000 } },
    channel = 0,                         -- "Terminal": text + XMODEM bytes of the flasher
  },

  -- Build: a real CMake project (tests/twin/CMakeLists.txt) in place of the MLEK build.
  build = {
    source_dir = "tests/twin",
    toolchain_file = "tests/twin/cmake/arm-none-eabi.cmake",
    target = "mlek_executorch_inference_runner",
    -- MLEK cache names are accepted as aliases (model path, activation buffer, memory mode).
    cmake = {
      TWIN_MODE = "runner",
      TWIN_INFERENCES = 10,
      executorch_inference_runner_MODEL_PATH = "<model>",
      executorch_inference_runner_ACTIVATION_BUF_SZ = "0x00600000",
      ETHOS_U_NPU_MEMORY_MODE = "Dedicated_Sram",
      TWIN_ETDUMP_PATH = "tests/fixtures/etdump/docs_tutorial.etdp",
      TWIN_INPUTS_PATH = "",             -- --inputs: the build's odp-inputs.bin (empty: none)
    },
    -- option -> cmake name beyond the MLEK ones: --inputs, embedded by the firmware (tests/twin/README.md "Inputs")
    vars = { inputs = "TWIN_INPUTS_PATH" },
    defaults = { memory_mode = "Dedicated_Sram", activation_buf_sz = 0x00600000, tmp_mem_size = 0x00040000 },
    -- the largest values the firmware holds: its activation area in DDR (tests/twin/README.md), 32-bit sizes, the
    -- runner's int counter
    limits = { activation_buf_sz = 0x10000000, tmp_mem_size = 0xFFFFFFFF, inferences = 0x7FFFFFFF },
    outputs = {
      mram = "bin/sectors/executorch_inference_runner/mram.bin",        -- ELF of the runner
      ext_flash = "bin/sectors/executorch_inference_runner/ext_flash.bin", -- copy of the .pte
      flasher = "bin/flasher.bin",                                     -- ELF of the flasher mode
    },
  },

  -- Flash: SETOOLS stand-ins with Alif's command lines, run from a SETOOLS-like directory.
  setools = {
    dir = "tests/twin/setools",          -- copy build/config/ into a scratch dir; images go to build/images/
    flasher_cfg = "build/config/flasher-cfg.json",
    app_cfg = "build/config/asr.json",
    flasher_image = "build/images/flasher_he.bin",
    app_image = "build/images/mram.bin",
  },

  -- What the firmware prints (tests/twin/README.md "Output").
  lines = {
    inference = "^Inference: (%S+) ms$",
    done = "^odp%-twin done$",
    flasher_start = "Starting xmodemReceive...",
    flasher_ok = "^Success, (%d+) bytes received%.$",
    flasher_crc = "^CRC32: (%x+)$",
    flasher_fail = "^Failed = (%-?%d+)$",
  },
  xmodem = { mode = "1k" },
}
