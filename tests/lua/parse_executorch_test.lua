local T = require("t")
local et = require("odp.parse.executorch")
local gnutime = require("odp.parse.gnutime")

local DIR = T.root() .. "/tests/fixtures/transcripts/"
local function fixture(name) return T.read(DIR .. name) end
local function exit_code(text) return tonumber(text:match("\n# exit code: (%d+)")) end

local function near_list(got, want, what)
  T.eq(#got, #want, (what or "list") .. " length")
  for i = 1, #want do T.near(got[i], want[i], 1e-12, ("%s[%d]"):format(what or "list", i)) end
end

local function no_internal_error(r) T.eq(r.internal_error, nil, "internal_error") end

---------------------------------------------------------------------------------------------------------
-- every transcript, every value it really holds
---------------------------------------------------------------------------------------------------------
T.test("00 RPi5 doc example: 10 executions, 426.452859 ms, 9633856 B, 4 threads, output, no error", function()
  local text = fixture("00_rpi5_doc_example.txt")
  local r = et.parse(text)
  no_internal_error(r)
  T.eq(r.num_executions, 10)
  T.near(r.total_ms, 426.452859)
  T.near(r.total_ms / r.num_executions, 42.645, 1e-4)
  T.eq(r.planned_buffers, { 9633856 })
  T.eq(r.planned_buffers_info[1].device, "cpu")
  T.eq(r.threads, 4)
  T.eq(r.model_path, "/tmp/model.pte")
  T.eq(r.method, "forward")
  T.eq(r.method_loaded, true)
  T.eq(r.executed, true)
  T.eq(r.num_outputs, 1)
  T.eq(r.etdump_path, "/tmp/profile.etdump")
  T.eq(#r.iterations_ms, 0, "the old runner prints no per-iteration lines")
  T.eq(r.load_ms, nil)
  T.eq(#r.outputs, 1)
  local o = r.outputs[1]
  T.eq(o.index, 0)
  T.eq(o.sizes, { 1, 3 })
  near_list(o.values, { -0.225492, 0.129735, 0.0447894 }, "values")
  T.eq(o.elided, false)
  T.eq(o.numel, 3)
  T.eq(#r.errors, 0, "the CPU-probe lines are not errors")
  T.eq(#r.warnings, 0)
  T.eq(#r.messages, 10)
  T.eq(r.messages[1], { level = "I", file = "cpuinfo_utils.cpp", line = 87,
    text = "Failed to open midr file /sys/devices/soc0/image_version" })
  T.eq(r.messages[3].text, "Resetting threadpool with num threads = 4")
  T.eq(r.messages[3].time_s, nil)
  local tm = gnutime.parse(text)
  T.eq(tm.max_rss_kb, 43600)
  T.eq(tm.exit_status, 0)
  T.near(tm.elapsed_s, 0.45)
  T.eq(tm.cpu_percent, 325)
end)

local ADD10 = {
  ["01_add_n10_etdump.txt"] = { load = 0.178027, total = 0.200932, etdump = "/tmp/et/etdumps/add_n10.etdump",
    iters = { 0.176204, 0.001434, 0.000861, 0.000791, 0.000781, 0.017643, 0.000822, 0.000802, 0.000812, 0.000782 },
    rss = 4592 },
  ["15_add_n10_print_all.txt"] = { load = 0.167148, total = 0.199505,
    etdump = "/tmp/et/etdumps/add_n10_printall.etdump", all = true, rss = 4572,
    iters = { 0.172988, 0.001533, 0.000861, 0.000822, 0.000811, 0.019196, 0.000831, 0.000811, 0.000791, 0.000861 } },
  ["16_add_n10_print_none.txt"] = { load = 0.237390, total = 0.188649,
    etdump = "/tmp/et/etdumps/add_n10_printnone.etdump", none = true, rss = 4504,
    iters = { 0.166977, 0.001443, 0.000802, 0.000791, 0.000792, 0.014698, 0.000812, 0.000772, 0.000781, 0.000781 } },
}
for name, want in pairs(ADD10) do
  T.test(name .. ": iterations, totals, buffer, outputs", function()
    local text = fixture(name)
    local r = et.parse(text)
    no_internal_error(r)
    T.eq(exit_code(text), 0)
    T.eq(r.num_executions, 10)
    T.eq(r.iterations_total, 10)
    near_list(r.iterations_ms, want.iters, "iterations_ms")
    T.near(r.total_ms, want.total)
    T.near(r.load_ms, want.load)
    T.eq(r.planned_buffers, { 32 })
    T.eq(r.model_path, "/tmp/et/pte/examples_arduino_examples_AddModel_model.pte")
    T.eq(r.method, "forward")
    T.eq(r.etdump_path, want.etdump)
    T.eq(r.num_outputs, 1)
    T.eq(r.threads, nil)
    T.eq(#r.errors, 0)
    T.eq(#r.messages, 17)
    T.eq(r.messages[5].file, "executor_runner.cpp")
    T.eq(r.messages[5].line, 779)
    if want.none then
      T.eq(#r.outputs, 0)
    else
      T.eq(#r.outputs, 1)
      T.eq(r.outputs[1].values, { 2.0, 2.0, 2.0 })
      T.eq(r.outputs[1].sizes, { 3 })
      T.eq(r.outputs[1].elided, false)
      if want.all then
        T.eq(r.outputs[1].dtype, "float")
        T.eq(r.outputs[1].flat, true)
      end
    end
    T.eq(gnutime.parse(text).max_rss_kb, want.rss)
  end)
end

T.test("01: timestamps become time_s", function()
  local r = et.parse(fixture("01_add_n10_etdump.txt"))
  T.near(r.messages[1].time_s, 0.001029)
  T.near(r.messages[17].time_s, 0.001705)
end)

T.test("02 add n1: one iteration equal to the total", function()
  local text = fixture("02_add_n1_etdump.txt")
  local r = et.parse(text)
  no_internal_error(r)
  T.eq(r.num_executions, 1)
  near_list(r.iterations_ms, { 0.148862 })
  T.near(r.total_ms, 0.148862)
  T.near(r.load_ms, 0.218343)
  T.eq(r.planned_buffers, { 32 })
  T.eq(r.etdump_path, "/tmp/et/etdumps/add_n1.etdump")
  T.eq(r.outputs[1].values, { 2.0, 2.0, 2.0 })
  T.eq(#r.errors, 0)
  T.eq(exit_code(text), 0)
  T.eq(gnutime.parse(text).max_rss_kb, 4608)
end)

T.test("05 missing model: E + F AccessFailed, SIGABRT", function()
  local text = fixture("05_missing_model.txt")
  local r = et.parse(text)
  no_internal_error(r)
  T.eq(exit_code(text), 134)
  T.eq(#r.errors, 2)
  T.eq(r.errors[1], { level = "E",
    text = "Failed to open /tmp/et/pte/does_not_exist.pte: No such file or directory (2)" })
  T.eq(r.errors[2].level, "F")
  T.eq(r.errors[2].status, 0x22)
  T.eq(r.errors[2].status_name, "AccessFailed")
  T.match(r.errors[2].text, "^In function main%(%), assert failed %(file_loader%.ok%(%)%)")
  T.eq(r.executed, false)
  T.eq(r.num_executions, nil)
  T.eq(r.total_ms, nil)
  T.eq(r.model_path, nil)
  T.eq(#r.outputs, 0)
  T.eq(#r.planned_buffers, 0)
  local tm = gnutime.parse(text)
  T.eq(tm.terminated_by_signal, 6)
  T.eq(tm.exit_status, 0, "GNU time says 0 after an abort: why odp takes status from wait4")
end)

T.test("06 truncated .pte: two E lines, exit 1, no status", function()
  local text = fixture("06_corrupt_truncated_600B.txt")
  local r = et.parse(text)
  no_internal_error(r)
  T.eq(exit_code(text), 1)
  T.eq(#r.errors, 2)
  T.eq(r.errors[1].text, "File size is too small. Expected file size from extended header is 1156, " ..
    "actual file size from data loader is 600")
  T.eq(r.errors[2].text, "Failed to parse model file /tmp/et/pte/corrupt_truncated_600B.pte")
  T.eq(r.errors[1].status, nil)
  T.eq(r.errors[2].status, nil)
  T.eq(r.executed, false)
  local tm = gnutime.parse(text)
  T.eq(tm.nonzero_status, 1)
  T.eq(tm.exit_status, 1)
end)

T.test("08 ETDump dir missing: ran 10 times, then E + F, SIGABRT", function()
  local text = fixture("08_etdump_dir_missing.txt")
  local r = et.parse(text)
  no_internal_error(r)
  T.eq(exit_code(text), 134)
  T.eq(r.num_executions, 10)
  T.near(r.total_ms, 0.181232)
  T.near(r.load_ms, 0.170393)
  near_list(r.iterations_ms, { 0.159042, 0.001592, 0.000831, 0.000781, 0.000761, 0.015079, 0.000811, 0.000771,
    0.000782, 0.000782 })
  T.eq(r.outputs[1].values, { 2.0, 2.0, 2.0 })
  T.eq(r.etdump_path, nil, "never written")
  T.eq(#r.errors, 2)
  T.eq(r.errors[1].text, "Failed to open ETDump file at /tmp/et/no_such_dir/x.etdump.")
  T.eq(r.errors[2].level, "F")
  T.eq(r.errors[2].status, nil)
  T.match(r.errors[2].text, "Failed to save ETDump file%.$")
  T.eq(gnutime.parse(text).terminated_by_signal, 6)
end)

T.test("12 linear without .ptd: Loading of method failed 0x2 InvalidState", function()
  local text = fixture("12_linear_without_ptd.txt")
  local r = et.parse(text)
  no_internal_error(r)
  T.eq(exit_code(text), 134)
  T.eq(r.planned_buffers, { 144 })
  T.eq(r.model_path, "/tmp/et/pte/hist_extension_module_test_resources_linear.pte")
  T.eq(#r.errors, 2)
  T.eq(r.errors[1], { level = "E", text = "external_data_map is null" })
  T.eq(r.errors[2].status, 2)
  T.eq(r.errors[2].status_name, "InvalidState")
  T.match(r.errors[2].text, "Loading of method forward failed with status 0x2$")
  T.eq(r.load_ms, nil)
  T.eq(r.executed, false)
end)

T.test("17 n0: zero executions in 0 ms, outputs still printed", function()
  local text = fixture("17_add_n0.txt")
  local r = et.parse(text)
  no_internal_error(r)
  T.eq(r.num_executions, 0)
  T.eq(r.total_ms, 0.0)
  T.eq(#r.iterations_ms, 0)
  T.near(r.load_ms, 0.182647)
  T.eq(r.outputs[1].values, { 0.0, 0.0, 0.0 })
  T.eq(r.etdump_path, "/tmp/et/etdumps/add_n0.etdump")
  T.eq(#r.errors, 0)
  T.eq(exit_code(text), 0)
end)

T.test("19 datamap with .ptd: data path, 2x2 output", function()
  local text = fixture("19_datamap_with_ptd_n10.txt")
  local r = et.parse(text)
  no_internal_error(r)
  T.eq(r.data_path, "/tmp/et/pte/barakugav_executorch-rs_data_map__default_external_constant.ptd")
  T.eq(r.model_path, "/tmp/et/pte/barakugav_executorch-rs_data_map_model.pte")
  T.eq(r.num_executions, 10)
  T.near(r.total_ms, 0.323574)
  T.near(r.load_ms, 0.152128)
  T.eq(#r.iterations_ms, 10)
  T.near(r.iterations_ms[1], 0.297464)
  T.near(r.iterations_ms[10], 0.001172)
  T.eq(r.outputs[1].sizes, { 2, 2 })
  T.eq(r.outputs[1].values, { 5.0, 5.0, 5.0, 5.0 })
  T.eq(r.outputs[1].numel, 4)
  T.eq(#r.errors, 0)
  T.eq(#r.messages, 20)
  local tm = gnutime.parse(text)
  T.eq(tm.max_rss_kb, 4964)
  T.eq(tm.major_faults, 4)
  T.eq(tm.fs_inputs, 1104)
end)

local function split(base)
  return fixture(base .. ".stderr"), fixture(base .. ".stdout"), tonumber(fixture(base .. ".rc"):match("rc=(%d+)"))
end

T.test("22 split streams: stderr + stdout", function()
  local err, out, rc = split("22_add_n10_split")
  T.eq(rc, 0)
  local r = et.parse(err, out)
  no_internal_error(r)
  T.eq(r.num_executions, 10)
  T.near(r.total_ms, 0.917971)
  T.near(r.load_ms, 0.469341)
  T.eq(#r.iterations_ms, 10)
  T.near(r.iterations_ms[1], 0.871282)
  T.eq(r.outputs[1].values, { 2.0, 2.0, 2.0 })
  T.eq(r.etdump_path, "/tmp/et/etdumps/add_n10_split.etdump")
  -- stdout alone holds only the tensor; stderr alone everything else
  local only_out = et.parse(nil, out)
  T.eq(#only_out.outputs, 1)
  T.eq(only_out.num_executions, nil)
  T.eq(#et.parse(err).outputs, 0)
end)

T.test("23 split streams, --print_output all", function()
  local err, out, rc = split("23_add_n10_printall_split")
  T.eq(rc, 0)
  local r = et.parse(err, out)
  no_internal_error(r)
  T.near(r.total_ms, 0.187054)
  T.eq(r.outputs[1].values, { 2.0, 2.0, 2.0 })
  T.eq(r.outputs[1].dtype, "float")
  T.eq(r.etdump_path, "/tmp/et/etdumps/add_n10_split_all.etdump")
end)

T.test("24 split streams, missing model", function()
  local err, out, rc = split("24_missing_model_split")
  T.eq(rc, 134)
  T.eq(out, "")
  local r = et.parse(err, out)
  T.eq(#r.errors, 2)
  T.eq(r.errors[2].status_name, "AccessFailed")
end)

T.test("every transcript parses without internal error; exit 134 has an F line", function()
  local n = 0
  for _, name in ipairs(require("odp.sys").readdir(DIR)) do
    if name:match("%.txt$") then
      n = n + 1
      local text = fixture(name)
      local r = et.parse(text)
      no_internal_error(r)
      local fatal = false
      for _, e in ipairs(r.errors) do if e.level == "F" then fatal = true end end
      T.eq(fatal, exit_code(text) == 134, name .. ": F line iff SIGABRT")
      -- CRLF copies parse to the same result
      local crlf = et.parse((text:gsub("\n", "\r\n")))
      T.eq(crlf.total_ms, r.total_ms, name .. " CRLF total")
      T.eq(crlf.iterations_ms, r.iterations_ms, name .. " CRLF iterations")
      T.eq(crlf.outputs, r.outputs, name .. " CRLF outputs")
      T.eq(crlf.errors, r.errors, name .. " CRLF errors")
      T.eq(crlf.model_path, r.model_path, name .. " CRLF model")
    end
  end
  T.eq(n, 11)
end)

---------------------------------------------------------------------------------------------------------
-- spellings no fixture covers (docs/sources.md §1)
---------------------------------------------------------------------------------------------------------
T.test("old and new buffer spellings, device buffers, index order", function()
  local r = et.parse(table.concat({
    "I executorch:executor_runner.cpp:412] Setting up planned buffer 0, size 9633856.",
    "I 00:00:00.001100 executorch:executor_runner.cpp:556] Setting up CPU planned buffer 1, size 32.",
    "I 00:00:00.001101 executorch:executor_runner.cpp:590] Setting up device planned buffer 2, size 4096, device_type 1.",
  }, "\n"))
  T.eq(r.planned_buffers, { 9633856, 32, 4096 })
  T.eq(r.planned_buffers_info[3], { index = 2, size = 4096, device = "device", device_type = 1 })
  T.eq(r.planned_buffers_info[2].device, "cpu")
  -- a cut log: index 1 without index 0, out of order, repeated -> dense, sorted, last wins
  local c = et.parse("Setting up planned buffer 2, size 7.\nSetting up planned buffer 1, size 5.\n" ..
    "Setting up planned buffer 2, size 9.\n")
  T.eq(c.planned_buffers, { 5, 9 })
  T.eq(#c.planned_buffers_info, 3)
end)

T.test("Model loaded in, Iteration i of N, executed, outputs line with trailing space", function()
  local r = et.parse(table.concat({
    "I 00:00:01.500000 executorch:executor_runner.cpp:624] Model loaded in 12.5 ms.",
    "I 00:00:01.600000 executorch:executor_runner.cpp:779] Iteration 1 of 2: 3.25 ms",
    "I 00:00:01.700000 executorch:executor_runner.cpp:779] Iteration 2 of 2: 1.75 ms",
    "I 00:00:01.800000 executorch:executor_runner.cpp:789] Model executed successfully 2 time(s) in 5.000000 ms.",
    "I 00:00:01.800001 executorch:executor_runner.cpp:798] 2 outputs: ",
  }, "\n") .. "\n")
  T.eq(r.load_ms, 12.5)
  T.eq(r.iterations_ms, { 3.25, 1.75 })
  T.eq(r.iterations_total, 2)
  T.eq(r.num_executions, 2)
  T.eq(r.total_ms, 5.0)
  T.eq(r.num_outputs, 2)
  T.near(r.messages[1].time_s, 1.5)
  T.eq(math.type(r.total_ms), "float")
end)

T.test("old runner: `Model executed successfully.` without count", function()
  local r = et.parse("I executorch:executor_runner.cpp:170] Model executed successfully.\n")
  T.eq(r.executed, true)
  T.eq(r.num_executions, nil)
  T.eq(r.total_ms, nil)
end)

T.test("Arm bare-metal prefix and PMU report (U85)", function()
  local log = table.concat({
    "I [executorch:arm_executor_runner.cpp:491 main()] Model in 0x70000000 $",
    "I [executorch:arm_executor_runner.cpp:560 main()] Setting up planned buffer 0, size 1024.",
    "I [executorch:arm_executor_runner.cpp:632 main()] Method loaded.",
    "I [executorch:arm_executor_runner.cpp:700 main()] Model executed successfully.",
    "I [executorch:arm_perf_monitor.cpp:181 StopMeasurements()] NPU Inferences : 1",
    "I [executorch:arm_perf_monitor.cpp:182 StopMeasurements()] NPU delegations: 1 (1.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:185 StopMeasurements()] Profiler report, CPU cycles per operator:",
    "I [executorch:arm_perf_monitor.cpp:189 StopMeasurements()] ethos-u : cycle_cnt : 1498202 cycles (1498202.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:196 StopMeasurements()] Operator(s) total: 1498202 CPU cycles (1498202.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:202 StopMeasurements()] Inference runtime: 6925114 CPU cycles total (6925114.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:208 StopMeasurements()] NOTE: CPU cycle values and ratio calculations require FPGA and identical CPU/NPU frequency",
    "I [executorch:arm_perf_monitor.cpp:217 StopMeasurements()] Inference CPU ratio: 99.99 %",
    "I [executorch:arm_perf_monitor.cpp:221 StopMeasurements()] Inference NPU ratio: 0.01 %",
    "I [executorch:arm_perf_monitor.cpp:230 StopMeasurements()] cpu_wait_for_npu_cntr : 729 CPU cycles (729.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:235 StopMeasurements()] Ethos-U PMU report:",
    "I [executorch:arm_perf_monitor.cpp:236 StopMeasurements()] ethosu_pmu_cycle_cntr :  1496962 (1496962.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:243 StopMeasurements()] ethosu_pmu_cntr0 : 359158 (359158.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:243 StopMeasurements()] ethosu_pmu_cntr1 : 7 (7.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:243 StopMeasurements()] ethosu_pmu_cntr2 : 4 (4.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:243 StopMeasurements()] ethosu_pmu_cntr3 : 503 (503.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:243 StopMeasurements()] ethosu_pmu_cntr4 : 1497 (1497.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:243 StopMeasurements()] ethosu_pmu_cntr5 : 95000 (95000.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:243 StopMeasurements()] ethosu_pmu_cntr6 : 12 (12.00 per inference)",
    "I [executorch:arm_perf_monitor.cpp:253 StopMeasurements()] Ethos-U PMU Events:[ETHOSU_PMU_SRAM_RD_DATA_BEAT_RECEIVED, ETHOSU_PMU_SRAM_WR_DATA_BEAT_WRITTEN, ETHOSU_PMU_EXT_RD_DATA_BEAT_RECEIVED, ETHOSU_PMU_EXT_WR_DATA_BEAT_WRITTEN, ETHOSU_PMU_NPU_IDLE, ETHOSU_PMU_MAC_ACTIVE, ETHOSU_PMU_WD_ACTIVE]",
    "E [executorch:arm_executor_runner.cpp:720 main()] Execution of method forward failed with status 0x14",
  }, "\n") .. "\n"
  local r = et.parse(log)
  no_internal_error(r)
  T.eq(r.messages[1], { level = "I", file = "arm_executor_runner.cpp", line = 491, func = "main",
    text = "Model in 0x70000000 $" })
  T.eq(r.messages[5].func, "StopMeasurements")
  T.eq(r.planned_buffers, { 1024 })
  T.eq(r.method_loaded, true)
  T.eq(r.executed, true)
  local p = r.pmu
  T.eq(p.npu_inferences, 1)
  T.eq(p.npu_delegations, 1)
  T.eq(p.backend_cycles, 1498202)
  T.eq(p.operators_cycles, 1498202)
  T.eq(p.cpu_cycles_total, 6925114)
  T.eq(p.cpu_cycles_per_inference, 6925114.0)
  T.eq(p.cpu_ratio_pct, 99.99)
  T.eq(p.npu_ratio_pct, 0.01)
  T.eq(p.cpu_wait_for_npu_cycles, 729)
  T.eq(p.npu_cycles, 1496962)
  T.eq(#p.counters, 7)
  T.eq(p.counters[1], { index = 0, count = 359158, per_inference = 359158.0, event = "SRAM_RD_DATA_BEAT_RECEIVED" })
  T.eq(p.counters[6].event, "MAC_ACTIVE")
  T.eq(p.counters[7].count, 12)
  T.eq(r.errors[1].status_name, "OperatorMissing")
end)

T.test("PMU counters without the events line get the U55 default names; `?.??` ratios", function()
  local lines = { "I [executorch:arm_perf_monitor.cpp:217 StopMeasurements()] Inference CPU ratio: ?.?? %" }
  for i = 0, 3 do
    lines[#lines + 1] = ("I [executorch:arm_perf_monitor.cpp:243 StopMeasurements()] ethosu_pmu_cntr%d : %d"):format(i, i * 10)
  end
  local r = et.parse(table.concat(lines, "\n"))
  T.eq(r.pmu.cpu_ratio_pct, nil)
  T.eq(#r.pmu.counters, 4)
  T.eq(r.pmu.counters[4], { index = 3, count = 30, event = "NPU_IDLE" })
end)

T.test("Alif RTT `Inference: f ms` lines, bare and prefixed", function()
  local r = et.parse("Inference: 12.345 ms\r\nI [executorch:main.cpp:10 run()] Inference: 11.5 ms\nInference: 13 ms\n")
  T.eq(r.inferences_ms, { 12.345, 11.5, 13.0 })
end)

T.test("Android logcat: bare messages, threadtime and brief prefixes", function()
  local bare = table.concat({
    "Model file /data/local/tmp/m.pte is loaded.",
    "Using method forward",
    "Setting up planned buffer 0, size 9633856.",
    "Resetting threadpool with num threads = 8",
    "Iteration 1 of 2: 10.5 ms",
    "Iteration 2 of 2: 9.5 ms",
    "Model executed successfully 2 time(s) in 20.000000 ms.",
    "1 outputs: ",
    "ETDump written to file 'p.etdump'.",
    "Missing operator: [3] aten::convolution.out",
    "some unrelated line",
  }, "\n")
  local r = et.parse(bare)
  T.eq(r.model_path, "/data/local/tmp/m.pte")
  T.eq(r.method, "forward")
  T.eq(r.planned_buffers, { 9633856 })
  T.eq(r.threads, 8)
  T.eq(r.iterations_ms, { 10.5, 9.5 })
  T.eq(r.num_executions, 2)
  T.eq(r.total_ms, 20.0)
  T.eq(r.etdump_path, "p.etdump")
  T.eq(r.missing_operators, { "aten::convolution.out" })
  T.eq(#r.errors, 1, "a bare failure line is an error")
  T.eq(r.errors[1].level, nil)
  T.eq(#r.messages, 10, "unrelated bare lines are not messages")

  local tt = et.parse(table.concat({
    "12-02 17:19:00.123  4242  4242 I ExecuTorch: Model executed successfully 3 time(s) in 30.000000 ms.",
    "12-02 17:19:00.124  4242  4242 E ExecuTorch: Execution of method forward failed with status 0x21",
    "E/ExecuTorch( 4242): Loading of method forward failed with status 0x14",
    "I/ExecuTorch: Iteration 1 of 3: 9.000000 ms",
  }, "\n"))
  T.eq(tt.num_executions, 3)
  T.eq(tt.total_ms, 30.0)
  T.eq(tt.iterations_ms, { 9.0 })
  T.eq(#tt.errors, 2)
  T.eq(tt.errors[1], { level = "E", tag = "ExecuTorch", status = 0x21, status_name = "MemoryAllocationFailed",
    text = "Execution of method forward failed with status 0x21" })
  T.eq(tt.errors[2].status_name, "OperatorMissing")
  T.eq(tt.messages[1].tag, "ExecuTorch")
end)

T.test("summary outputs: old `Output`, ints, bools, scalars, nan/inf, several outputs", function()
  local out = table.concat({
    "OutputX 0: tensor(sizes=[2], [1, -3])",
    "Output 1: tensor(sizes=[3], [True, False, True])",
    "OutputX 2: tensor(sizes=[4], [nan, inf, -inf, -0.])",
    "OutputX 3: 7",
    "OutputX 4: tensor(sizes=[], [3.5])",
  }, "\n")
  local r = et.parse(nil, out)
  T.eq(#r.outputs, 5)
  T.eq(r.outputs[1].values, { 1, -3 })
  T.eq(r.outputs[2].values, { true, false, true })
  local v = r.outputs[3].values
  T.ok(v[1] ~= v[1], "nan")
  T.eq(v[2], math.huge)
  T.eq(v[3], -math.huge)
  T.eq(r.outputs[4].kind, "scalar")
  T.eq(r.outputs[4].values, { 7 })
  T.eq(r.outputs[5].sizes, {})
  T.eq(r.outputs[5].numel, 1)
  T.eq(r.outputs[5].values, { 3.5 })
end)

T.test("elided summary output wrapped over lines (print_evalue with 100 edge items)", function()
  -- what ExecuTorch prints for a 1000-element tensor: 10 items a line, `...,` between the two ends
  local lines = { "OutputX 0: tensor(sizes=[1, 1000], [" }
  local k = 0
  local function row() local t = {}; for _ = 1, 10 do t[#t + 1] = k .. "., "; k = k + 1 end; return "  " .. table.concat(t) end
  for _ = 1, 10 do lines[#lines + 1] = row() end
  lines[#lines + 1] = "  ...,"
  k = 900
  for _ = 1, 10 do lines[#lines + 1] = row() end
  lines[#lines + 1] = "])"
  lines[#lines + 1] = "I executorch:executor_runner.cpp:261] ETDump written to file 'x.etdump'."
  local r = et.parse(table.concat(lines, "\n") .. "\n")
  no_internal_error(r)
  local o = r.outputs[1]
  T.eq(o.sizes, { 1, 1000 })
  T.eq(o.numel, 1000)
  T.eq(#o.values, 200)
  T.eq(o.values[1], 0.0)
  T.eq(o.values[100], 99.0)
  T.eq(o.values[101], 900.0)
  T.eq(o.values[200], 999.0)
  T.eq(o.elided, true)
  T.eq(o.elided_at, 100)
  T.eq(r.etdump_path, "x.etdump", "the line after the tensor still parses")
  -- the non-wrapping elision of a shorter print
  local s = et.parse(nil, "OutputX 0: tensor(sizes=[8], [1., 2., 3., ..., 6., 7., 8.])\n")
  T.eq(s.outputs[1].values, { 1.0, 2.0, 3.0, 6.0, 7.0, 8.0 })
  T.eq(s.outputs[1].elided_at, 3)
  T.eq(s.outputs[1].elided, true)
end)

T.test("--print_output all: int, char, bool, Not Tensor", function()
  local r = et.parse(nil, table.concat({
    "Output[0][0]: (int) 3", "Output[0][1]: (int) -4",
    "Output[1][0]: (char) -128",
    "Output[2][0]: (bool) true  (0x1)", "Output[2][1]: (bool) false (0x0)",
    "Output[3]: Not Tensor",
  }, "\n"))
  T.eq(r.outputs[1].values, { 3, -4 })
  T.eq(r.outputs[1].dtype, "int")
  T.eq(r.outputs[1].sizes, { 2 })
  T.eq(r.outputs[2].dtype, "char")
  T.eq(r.outputs[3].values, { true, false })
  T.eq(r.outputs[4].kind, "not_tensor")
  local cut = et.parse(nil, "Output[0][0]: (float) 1.000000\nOutput[0][2]: (float) 3.000000\n")
  T.eq(cut.outputs[1].numel, 3)
  T.eq(cut.outputs[1].values[2], require("odp.core.json").null)
  T.eq(cut.outputs[1].elided, true)
end)

T.test("an output print cut off before `])` keeps its shape, marked truncated", function()
  local r = et.parse(nil, "OutputX 0: tensor(sizes=[1, 1000], [\n  1., 2., ")
  T.eq(r.outputs[1].sizes, { 1, 1000 })
  T.eq(r.outputs[1].truncated, true)
  T.eq(r.outputs[1].elided, true)
end)

T.test("failure spellings and status names", function()
  local r = et.parse(table.concat({
    "E executorch:method.cpp:100] Missing operator: [0] aten::add.out",
    "E executorch:program.cpp:90] Program identifier 'ET11' != expected 'ET12'",
    "F executorch:executor_runner.cpp:617] In function main(), assert failed (method.ok()): Loading of method forward failed with status 0x14",
    "F executorch:executor_runner.cpp:700] In function main(), assert failed (status == Error::Ok): Execution of method forward failed with status 0x24",
    "E executorch:file_data_loader.cpp:110] Failed to open /tmp/0x22dir/m.pte: No such file or directory (2)",
    "D executorch:executor_runner.cpp:740] Preparing inputs.",
  }, "\n"))
  T.eq(#r.errors, 5)
  T.eq(r.missing_operators, { "aten::add.out" })
  T.eq(r.errors[2].status, nil)
  T.eq(r.errors[3].status_name, "OperatorMissing")
  T.eq(r.errors[4].status_name, "InvalidExternalData")
  T.eq(r.errors[5].status, nil, "a hex-looking path is not a status")
  T.eq(r.messages[6].level, "D")
  T.eq(et.status_names[0x21], "MemoryAllocationFailed")
  T.eq(et.status_names[0x23], "InvalidProgram")
  T.eq(et.status_name(0x32), "DelegateInvalidHandle")
  T.eq(et.status_name(0x99), nil)
end)

T.test("CPU probes are never errors, even at level E", function()
  local r = et.parse("E executorch:cpuinfo_utils.cpp:87] Failed to open midr file /sys/devices/soc0/image_version\n" ..
    "I executorch:cpuinfo_utils.cpp:100] Reading file /sys/devices/system/cpu/cpu0/regs/identification/midr_el1\n")
  T.eq(#r.errors, 0)
  T.eq(#r.warnings, 1)
end)

T.test("messages cut at 255 characters still parse what they carry", function()
  local long = "/tmp/" .. ("d"):rep(260)
  local msg = ("Failed to open %s: No such file or directory (2)"):format(long):sub(1, 255)
  local r = et.parse("E 00:00:00.000100 executorch:file_data_loader.cpp:110] " .. msg .. "\n" ..
    ("I executorch:executor_runner.cpp:352] Model file %s is loaded."):format(long):sub(1, 38 + 255) .. "\n" ..
    "I executorch:executor_runner.cpp:779] Iteration 1 of 1: 2.5 ms\n")
  T.eq(#r.errors, 1)
  T.eq(#r.errors[1].text, 255)
  T.eq(r.model_path, nil, "a cut path is not reported as a path")
  T.eq(r.iterations_ms, { 2.5 })
end)

T.test("a transcript with stdout and stderr interleaved parses as stderr alone", function()
  local err, out = split("22_add_n10_split")
  local a = et.parse(err, out)
  local b = et.parse(err .. out)
  T.eq(b.outputs, a.outputs)
  T.eq(b.iterations_ms, a.iterations_ms)
  T.eq(b.total_ms, a.total_ms)
end)

T.test("bounds: messages and errors capped and counted; iterations kept after the cap", function()
  local t = {}
  for i = 1, 3000 do t[#t + 1] = ("I executorch:executor_runner.cpp:779] Iteration %d of 3000: %d.5 ms"):format(i, i) end
  for _ = 1, 30 do t[#t + 1] = "E executorch:x.cpp:1] bad" end
  -- pieces are 256 KB: make the text long enough to switch to the fast path after the cap
  local body = table.concat(t, "\n")
  local big = (body .. "\n"):rep(40)
  local r = et.parse(big, nil, { max_messages = 100, max_errors = 7 })
  no_internal_error(r)
  T.eq(#r.iterations_ms, 120000)
  T.eq(r.iterations_ms[120000], 3000.5)
  T.eq(r.iterations_ms[3001], 1.5)
  T.eq(#r.messages, 100)
  T.eq(r.messages_dropped, 40 * 3030 - 100)
  T.eq(#r.errors, 7)
  T.eq(r.errors_dropped, 40 * 30 - 7)
  T.raises(function() et.parse("", nil, { bogus = 1 }) end, "unknown option")
  T.raises(function() et.parse(42) end, "string or nil expected")
end)

---------------------------------------------------------------------------------------------------------
-- robustness: untrusted input never raises, stays linear
---------------------------------------------------------------------------------------------------------
T.test("random bytes, truncated lines, a 2 MB line, NULs: no raise, no internal error", function()
  math.randomseed(1234)
  local base = fixture("01_add_n10_etdump.txt")
  for round = 1, 200 do
    local n = math.random(0, 4000)
    local b = {}
    for i = 1, n do b[i] = string.char(math.random(0, 255)) end
    local junk = table.concat(b)
    -- random bytes, a fixture cut anywhere, a fixture with random bytes spliced in
    local cutat = math.random(0, #base)
    for _, text in ipairs({ junk, base:sub(1, cutat), base:sub(1, cutat) .. junk .. base:sub(cutat + 1) }) do
      local ok, r = pcall(et.parse, text, junk)
      T.ok(ok, "round " .. round .. ": raised " .. tostring(r))
      no_internal_error(r)
    end
  end
  local huge = "I executorch:x.cpp:1] " .. ("A"):rep(2 * 1024 * 1024) .. "\n" .. ("B"):rep(2 * 1024 * 1024)
    .. "\nOutputX 0: tensor(sizes=[" .. ("1, "):rep(300000) .. "\n" .. ("Output[0][0]: (float) "):rep(50000)
  local t0 = os.clock()
  local r = et.parse(huge, huge)
  T.ok(os.clock() - t0 < 10, "linear time")
  no_internal_error(r)
  T.eq(#r.messages[1].text, 1024 + 3, "message text capped (+ ...)")
end)

T.test("10 MB of noise parses in bounded time", function()
  math.randomseed(99)
  local words = { "Model", "Iteration", "Output[", "OutputX 0: tensor(sizes=[", "E executorch:", "] ", "\n", "0x",
    "I [executorch:", "()]", "Inference:", "ms", "1", "2.5", "...", ",", "\r\n", "[", "]", " " }
  local parts = {}
  local size = 0
  while size < 10 * 1024 * 1024 do
    local w = words[math.random(#words)]
    parts[#parts + 1] = w
    size = size + #w
  end
  local t0 = os.clock()
  local r = et.parse(table.concat(parts))
  T.ok(os.clock() - t0 < 30, "bounded time")
  no_internal_error(r)
end)

T.done()
