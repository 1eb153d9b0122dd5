--- The result record's fields, declared once (docs/architecture.md, "The record schema"). Every view reads
-- records through this module: the terminal report, the HTML page, JSON/CSV, the history, compare, JUnit,
-- LAVA and the GitHub step summary. A new record field is ONE entry in M.FIELDS; the views iterate it.
--   local schema = require("odp.results.schema")
--   local rec, notes = schema.read(record)   -- a checked copy; notes.unknown / notes.invalid: field paths
--   for _, m in ipairs(schema.metrics(rec)) do print(m.key, m.value, m.units) end
-- An entry is { path, type, of=, unit=, metric=, label=, format=, history=, group= }:
--   path     "load_ms"; "latency_ms.p50" (a field of an object); "ops[].name" (a field of each list item)
--   type     "string" | "integer" | "number" (finite) | "boolean" | "object" (its fields declared below it)
--            | "list" (items of type `of`) | "map" (any keys, values of type `of`) | "table" (not looked into:
--            its reader checks it) | "scalar" (string, finite number or boolean) | "any"
--   unit     the unit of a number ("ms", "kB", "cycles"): one unit per field, never mixed
--   metric   the one name of the value in the history, LAVA, JUnit (and the CSV/plot path is `path`)
--   label    shown by the terminal report and the HTML page under this label, formatted by `format`:
--            "duration" (ms shown in the unit that reads best), "integer" (whole numbers: counts, cycles),
--            "kB" (kilobytes with MB beside), or a printf format ("%.3f") followed by the unit
--   group    the HTML section a labelled field goes in ("memory"; others: "measurements")
--   history  true: the history keeps the value as a series (metric name `metric`, unit `unit`); for an
--            object, {value = field, ci = field (a [lo, hi] pair), n = field, samples = true}
--   better   "higher" for a metric whose larger value is the better one (rates, agreement): the history's
--            regressions are then its falls (times, sizes and errors, the default, regress when they rise)
-- Fields a view draws itself (latency table, operators, device state) have no label: their view knows them.
local json = require("odp.core.json")

local M = {}

--- The record format's version (record.schema). A new field keeps it: readers of /1 ignore what they do not
--- know and say so (M.read). Only a change of an existing field's meaning or type would make it /2.
M.VERSION = "odp.result/1"

-- The statistics of a set of durations in ms (latency_ms, latency_ms.warm, ops[] rows): p50 first, the
-- order lab engines list them in.
local function stats_fields(prefix, metric_prefix)
  local out = {}
  for _, k in ipairs { "p50", "mean", "p90", "p99", "min", "max", "p10", "std", "avg" } do
    out[#out + 1] = { prefix .. "." .. k, "number", unit = "ms",
      metric = metric_prefix and k ~= "p10" and k ~= "std" and k ~= "avg" and (metric_prefix .. "_" .. k) or nil }
  end
  out[#out + 1] = { prefix .. ".n", "integer" }
  return out
end

--- Every field odp writes, in the order a reader looks for them (the terminal report and the HTML page show
--- labelled fields in this order; lab engines list metrics in it).
M.FIELDS = {
  { "schema", "string" },
  { "ok", "boolean" },
  { "flow", "string" },
  { "device", "string" },
  { "target", "string" },
  { "board", "string" },                 -- the lab file's name for it (--boards)
  { "emulated", "string" },              -- the emulator the runner ran under (--allow-emulated: "qemu-user")
  -- other odps that ran on the same board during this run (their leases: docs/devices.md "A shared board")
  { "shared_board", "list", of = "object" },
  { "shared_board[].host", "string" },
  { "shared_board[].user", "string" },
  { "shared_board[].pid", "integer" },
  { "shared_board[].since", "string" },  -- ISO 8601 UTC, the board's clock
  { "started_at", "string" },            -- ISO 8601 UTC
  { "odp_version", "string" },
  { "commit", "string" },
  { "lava_job_id", "string" },
  { "model", "object" },
  { "model.path", "string" },
  { "model.sha256", "string" },
  { "model.bytes", "integer", unit = "B" },
  { "model.scratch_size", "integer", unit = "B" },
  { "runner", "object" },
  { "runner.path", "string" },
  { "runner.sha256", "string" },
  { "runner.bytes", "integer", unit = "B" },
  { "runner.version", "string" },
  { "params", "map", of = "scalar" },
  { "status", "integer" },
  { "signal", "scalar" },
  { "stop", "object" },
  { "stop.rule", "string" },
  { "stop.met", "boolean" },
  { "stop.processes", "integer" },
  { "stop.samples", "integer" },
  { "stop.seconds", "number", unit = "s" },         -- the point's real wall time (every step)
  { "stop.measured_seconds", "number", unit = "s" }, -- the stopping rule's own time
  { "stop.overrun_seconds", "number", unit = "s" },  -- a hung point: how far over measuring and uploads (odp.run)
  { "stop.target_ci", "number", unit = "%" },
  { "stop.ci_pct", "number", unit = "%" },
  { "sustained", "list", of = "table" },
  { "thermal", "list", of = "table" },
  -- the history keeps the distribution as one series (its median, CI and samples); lab engines each statistic
  { "latency_ms", "object", metric = "latency_ms", unit = "ms",
    history = { value = "p50", ci = "ci95", n = "n", samples = true } },
  stats_fields("latency_ms", "latency"),
  { "latency_ms.total", "number", unit = "ms" },
  { "latency_ms.source", "string" },     -- log | etdump | rtt | wall | stdout (--llm: pieces' arrivals)
  { "latency_ms.modelled", "boolean" },  -- the QEMU twin's modelled cycles
  { "latency_ms.emulated", "boolean" },  -- a virtual machine's timings
  { "latency_ms.ci95", "list", of = "number", unit = "ms" },
  { "latency_ms.cv", "number" },
  { "latency_ms.first_ms", "list", of = "number", unit = "ms" },
  { "latency_ms.warm", "object" },
  stats_fields("latency_ms.warm"),
  { "latency_ms.warm.ci95", "list", of = "number", unit = "ms" },
  { "latency_ms.warm.cv", "number" },
  { "latency_ms.drift", "object" },
  { "latency_ms.drift.pct", "number", unit = "%" },
  { "latency_ms.drift.p", "number" },
  { "load_ms", "number", unit = "ms", metric = "load_ms", label = "model load", format = "duration",
    group = "memory", history = true },
  { "peak_rss_kb", "integer", unit = "kB", metric = "peak_rss_kb", label = "peak RSS", format = "kB",
    group = "memory", history = true },
  -- --llm (docs/llm.md): a text generation by ExecuTorch's LLM runner; latency_ms is then every generated
  -- token's own latency (its forward in the ETDump, or its piece's arrival on stdout: token_times). Medians over
  -- the measured processes, each one generation.
  { "llm", "object" },
  { "llm.processes", "integer" },
  { "llm.max_new_tokens", "integer" },
  { "llm.temperature", "number" },
  { "llm.prompt_tokens", "integer", label = "prompt tokens", format = "integer", group = "llm" },
  { "llm.generated_tokens", "integer", label = "generated", format = "integer", unit = "tokens after the first",
    group = "llm" },
  { "llm.ended", "string", label = "ended at", group = "llm" },               -- max | eos
  { "llm.load_ms", "number", unit = "ms", label = "load (runner)", format = "duration", group = "llm" },
  { "llm.ttft_ms", "number", unit = "ms", metric = "ttft_ms", label = "TTFT (runner)", format = "duration",
    group = "llm", history = true },
  { "llm.ttft_ms_ci95", "list", of = "number", unit = "ms" },
  { "llm.ttft_ms_each", "list", of = "number", unit = "ms" },                -- each process's, in order
  { "llm.ttft_us", "integer", unit = "us", metric = "ttft_us", label = "TTFT (odp)", format = "integer",
    group = "llm" },
  { "llm.prefill_ms", "number", unit = "ms" },
  { "llm.decode_ms", "number", unit = "ms" },
  { "llm.prefill_tokens_per_s", "number", unit = "tokens/s", metric = "prefill_token_per_sec", better = "higher",
    label = "prefill (pp)", format = "%.1f", group = "llm", history = true },
  { "llm.decode_tokens_per_s", "number", unit = "tokens/s", metric = "decode_token_per_sec", better = "higher",
    label = "decode (tg)", format = "%.1f", group = "llm", history = true },
  { "llm.decode_tokens_per_s_ci95", "list", of = "number", unit = "tokens/s" },
  { "llm.prefill_tokens_per_s_each", "list", of = "number", unit = "tokens/s" },
  { "llm.decode_tokens_per_s_each", "list", of = "number", unit = "tokens/s" },
  { "llm.sampling_share", "number", label = "sampling share", format = "%.3f", group = "llm" },
  { "llm.token_times", "string", label = "token times from", group = "llm" },  -- etdump | stdout
  { "llm.stdout_chunks", "integer" },  -- the last process's stdout chunks holding generated text (vs tokens made)
  { "llm.token_ms_by_position", "list", of = "number", unit = "ms" },          -- median over processes
  { "tokenizer", "object" },
  { "tokenizer.path", "string" },
  { "tokenizer.sha256", "string" },
  { "tokenizer.bytes", "integer", unit = "B" },
  -- memory by phase and by owner (docs/memory.md): the last measured runner process's
  { "memory", "object" },
  { "memory.phases", "list", of = "object" },
  { "memory.phases[].name", "string" },                 -- load | method | first | steady | inference | teardown | run, or joined with +
  { "memory.phases[].peak_kb", "integer", unit = "kB" },
  { "memory.phases[].exact", "boolean" },
  { "memory.phases[].source", "string" },               -- hwm | ru_maxrss | sampled
  { "memory.phases[].bound_kb", "integer", unit = "kB" }, -- a phase's peak that is not exact is at most this
  { "memory.phases[].late", "string" },                 -- read: its line was read after the runner had gone on past it
  { "memory.phases[].t_start_ms", "number", unit = "ms" },
  { "memory.phases[].t_end_ms", "number", unit = "ms" },
  { "memory.phases[].ended", "string" },                -- line | exit
  { "memory.phases[].split", "table" },                 -- smaps_rollup at its end: rss_kb, anon_kb, file_kb, shmem_kb
  { "memory.seen", "list", of = "string" },             -- the boundary events, in order
  { "memory.late", "list", of = "string" },             -- boundaries read late: EVENT (ended|together|read)
  { "memory.peak_kb", "integer", unit = "kB" },
  { "memory.exact", "boolean" },
  { "memory.peak_phase", "string" },
  -- each phase's peak as a series (when the phase stands alone)
  { "memory.load_kb", "integer", unit = "kB", metric = "memory_load_kb", history = true },
  { "memory.method_kb", "integer", unit = "kB", metric = "memory_method_kb", history = true },
  { "memory.first_kb", "integer", unit = "kB", metric = "memory_first_kb", history = true },
  { "memory.steady_kb", "integer", unit = "kB", metric = "memory_steady_kb", history = true },
  { "memory.clear_refs", "string" },                    -- ok | denied | failed
  { "memory.rss_counters", "string" },                  -- batched: the kernel's RSS counters lag (before 6.2)
  { "memory.samples", "integer" },
  { "memory.sample_ms", "number", unit = "ms" },
  { "memory.children", "integer" },
  { "memory.boundary_read_us", "number", unit = "us" },
  { "memory.timeline", "string" },                      -- memory.csv in the run directory
  { "memory.owners", "object" },
  { "memory.owners.planned_kb", "integer", unit = "kB" },
  { "memory.owners.weights_kb", "integer", unit = "kB" },
  { "memory.owners.weights_mapped", "boolean" },
  { "memory.owners.weights_source", "string" },         -- segments (the extended header's) | file (inline: the .pte, a bound)
  { "memory.owners.heap_other_kb", "integer", unit = "kB" },
  { "memory.owners.file_kb", "integer", unit = "kB" },
  { "memory.owners.unexplained_kb", "integer", unit = "kB" },
  { "memory.owners.rss_kb", "integer", unit = "kB" },
  { "memory.owners.unknown", "list", of = "string" },
  { "memory.owners.scratch_kb", "integer", unit = "kB" }, -- bare metal: the Ethos-U delegate's Vela scratch
  { "memory.note", "string" },                          -- why a record has no phases (bare metal)
  { "pmu", "object" },
  { "pmu.npu_cycles", "integer", unit = "cycles", metric = "npu_cycles" },
  { "pmu.cpu_cycles_per_inference", "number", unit = "cycles", metric = "cpu_cycles_per_inference" },
  { "pmu.cpu_cycles_total", "integer", unit = "cycles" },
  { "pmu.npu_cycles_per_inference", "number", unit = "cycles" },
  { "pmu.npu_inferences", "integer" },
  { "pmu.npu_delegations", "integer" },
  { "pmu.npu_delegations_per_inference", "number" },
  { "pmu.backend_cycles", "integer", unit = "cycles" },
  { "pmu.backend_cycles_per_inference", "number", unit = "cycles" },
  { "pmu.operators_cycles", "integer", unit = "cycles" },
  { "pmu.operators_cycles_per_inference", "number", unit = "cycles" },
  { "pmu.cpu_wait_for_npu_cycles", "integer", unit = "cycles" },
  { "pmu.cpu_wait_for_npu_cycles_per_inference", "number", unit = "cycles" },
  { "pmu.cpu_ratio_pct", "number", unit = "%" },
  { "pmu.npu_ratio_pct", "number", unit = "%" },
  { "pmu.counters", "list", of = "object" },
  { "pmu.counters[].index", "integer" },
  { "pmu.counters[].event", "string" },
  { "pmu.counters[].count", "integer" },
  { "pmu.counters[].per_inference", "number" },
  { "planned_buffers", "list", of = "integer", unit = "B" },
  { "outputs", "list", of = "object" },
  { "outputs[].sizes", "list", of = "integer" },
  { "outputs[].values", "list", of = "any" }, -- NaN/Inf included (JSON: "NaN", "Infinity" strings)
  { "outputs[].index", "integer" },
  { "outputs[].kind", "string" },
  { "outputs[].numel", "integer" },
  { "outputs[].elided", "any" },           -- the runner did not print every value
  { "outputs[].elided_at", "integer" },    -- values printed before the runner's `...` gap
  { "outputs[].truncated", "boolean" },    -- the print of the tensor was cut off (its shape kept)
  { "outputs[].dtype", "string" },         -- --print_output all: float | int | char | bool
  { "outputs[].flat", "boolean" },         -- --print_output all: values by flat index, sizes unknown
  { "outputs[].raw", "string" },           -- a scalar output as printed
  -- --outputs, --inputs, --reference (docs/outputs.md): the files given and kept, and the agreement
  { "outputs[].data", "object" },
  { "outputs[].data.file", "string" },     -- relative to the run directory
  { "outputs[].data.sha256", "string" },
  { "outputs[].data.bytes", "integer", unit = "B" },
  { "outputs[].data.dtype", "string" },
  { "outputs[].data.sizes", "list", of = "integer" },
  { "outputs[].data.error", "string" },
  { "inputs", "list", of = "object" },
  { "inputs[].file", "string" },
  { "inputs[].sha256", "string" },
  { "inputs[].bytes", "integer", unit = "B" },
  { "inputs[].dtype", "string" },
  { "inputs[].sizes", "list", of = "integer" },
  { "reference", "object" },
  { "reference.path", "string" },
  { "reference.kind", "string" },          -- run | dir
  { "reference.run_id", "string" },
  { "reference.model_sha256", "string" },
  { "reference.gates", "map", of = "number" },
  -- the worst over the outputs compared, kept by the history so drift shows over time
  { "reference.cosine", "number", metric = "output_cosine", better = "higher", history = true },
  { "reference.max_abs_err", "number", metric = "output_max_abs_err", history = true },
  { "reference.outputs", "list", of = "object" },
  { "reference.outputs[].index", "integer" },
  { "reference.outputs[].dtype", "string" },
  { "reference.outputs[].n", "integer" },
  { "reference.outputs[].equal", "integer" },
  { "reference.outputs[].finite", "integer" },
  { "reference.outputs[].nonfinite", "integer" },
  { "reference.outputs[].nan", "map", of = "number" },
  { "reference.outputs[].inf", "map", of = "number" },
  { "reference.outputs[].max_abs_err", "number" },
  { "reference.outputs[].max_abs_at", "integer" },
  { "reference.outputs[].mean_abs_err", "number" },
  { "reference.outputs[].rmse", "number" },
  { "reference.outputs[].cosine", "number" },
  { "reference.outputs[].snr_db", "number", unit = "dB" },
  { "reference.outputs[].identical", "boolean" },
  { "reference.outputs[].histogram", "list", of = "integer" },
  { "reference.outputs[].top1", "boolean" },
  { "reference.outputs[].top5", "number" },
  { "reference.outputs[].topk", "table" },
  { "reference.outputs[].error", "string" },
  { "reference.failed", "object" },
  { "reference.failed.output", "integer" },
  { "reference.failed.metric", "string" },
  { "reference.failed.value", "number" },
  { "reference.failed.limit", "number" },
  -- name -> {file (relative to the run directory), sha256, bytes} (odp.run.artifact; read back, checked, with
  -- result.artifact); run_dir and the plain paths of older records are strings
  { "artifacts", "map", of = "any" },
  -- a runner process that printed more than odp keeps (odp.flows.executorch.runs: KEEP_BYTES of its head and
  -- tail are read): per stream, what it printed, what was read, and the run dir's file with all of it
  { "output_cut", "object" },
  { "output_cut.stdout", "object" },
  { "output_cut.stdout.bytes", "integer", unit = "B" },
  { "output_cut.stdout.kept", "integer", unit = "B" },
  { "output_cut.stdout.file", "string" },
  { "output_cut.stderr", "object" },
  { "output_cut.stderr.bytes", "integer", unit = "B" },
  { "output_cut.stderr.kept", "integer", unit = "B" },
  { "output_cut.stderr.file", "string" },
  -- an ETDump cut short (its runner died writing it): what was read lies whole before the cut
  { "etdump_partial", "object" },
  { "etdump_partial.bytes", "integer", unit = "B" },          -- the file's
  { "etdump_partial.expected_bytes", "integer", unit = "B" }, -- what its size prefix says
  { "etdump_partial.events_lost", "integer" },
  { "etdump_partial.runs_lost", "integer" },
  -- a core the runner dumped (a crash): where it was on the board, its size, kept (--keep-core: the run
  -- dir's copy) or removed; handler: the board's core_pattern when it was not a file odp found
  { "core", "object" },
  { "core.path", "string" },
  { "core.bytes", "integer", unit = "B" },
  { "core.kept", "string" },
  { "core.removed", "boolean" },
  { "core.handler", "string" },
  { "ops_unit", "string" },                -- "ms" or "cycles": the unit of ops[] and ops_summary
  { "ops", "list", of = "object" },
  { "ops[].block", "string" },
  { "ops[].name", "string" },
  { "ops[].delegated", "boolean" },
  { "ops[].framework", "boolean" },        -- ExecuTorch's OPERATOR_CALL overhead rows
  { "ops[].instruction_id", "integer" },
  stats_fields("ops[]"),
  { "ops_summary", "object" },
  { "ops_summary.n", "integer" },
  { "ops_summary.execute_ms", "number" },
  { "ops_summary.delegated_ms", "number" },
  { "ops_summary.kernels_ms", "number" },
  { "ops_summary.other_ms", "number" },
  { "ops_summary.delegated_share", "number" },
  { "ops_summary.unit", "string" },
  { "counters", "object" },
  { "counters.total", "map", of = "number" },
  { "counters.processes", "list", of = "table" },
  { "counters.scaled", "list", of = "string" },
  { "counters.unavailable", "map", of = "string" },
  { "counters.paranoid", "integer" },      -- kernel.perf_event_paranoid, when it kept counters away
  { "counters.user_only", "boolean" },
  -- odp run --sample (docs/cpu-profile.md): the runner's CPU samples joined with its ETDump
  { "cpu_profile", "object" },
  { "cpu_profile.event", "string" },       -- "cycles" | "cpu-clock": the event sampled
  { "cpu_profile.rate_hz", "integer", unit = "Hz" },
  { "cpu_profile.user_only", "boolean" },  -- kernel.perf_event_paranoid kept kernel samples away
  { "cpu_profile.complete", "boolean" },   -- the helper finished the sample stream
  { "cpu_profile.switches", "boolean" },   -- context switches were recorded ([preempted] samples possible)
  { "cpu_profile.clock", "object" },       -- how ETDump's clock was placed on the samples'
  { "cpu_profile.clock.method", "string" },
  { "cpu_profile.clock.offset_ns", "integer", unit = "ns" },
  { "cpu_profile.clock.lines", "integer" },
  { "cpu_profile.samples", "object" },
  { "cpu_profile.samples.total", "integer" },
  { "cpu_profile.samples.in_execute", "integer" },
  { "cpu_profile.samples.attributed", "integer" },
  { "cpu_profile.samples.between_ops", "integer" },
  { "cpu_profile.samples.outside_execute", "integer" },
  { "cpu_profile.samples.lost", "integer" },
  { "cpu_profile.samples.preempted", "integer" },
  { "cpu_profile.attributed", "number" },  -- share of execute's samples inside an op's interval, 0..1
  { "cpu_profile.ops", "list", of = "object" },
  { "cpu_profile.ops[].name", "string" },  -- as the op table names it
  { "cpu_profile.ops[].instruction_id", "integer" },
  { "cpu_profile.ops[].samples", "integer" },
  { "cpu_profile.ops[].share", "number" },       -- of execute's samples, 0..1
  { "cpu_profile.ops[].time_share", "number" },  -- of execute's ETDump time, 0..1
  { "cpu_profile.ops[].top", "list", of = "object" },
  { "cpu_profile.ops[].top[].symbol", "string" },
  { "cpu_profile.ops[].top[].samples", "integer" },
  { "cpu_profile.ops[].top[].share", "number" }, -- of the op's samples, 0..1
  { "cpu_profile.execute_top", "list", of = "object" },
  { "cpu_profile.execute_top[].symbol", "string" },
  { "cpu_profile.execute_top[].samples", "integer" },
  { "cpu_profile.execute_top[].share", "number" },
  -- the sampler's cost (--sample-overhead[=K]): K unsampled runner processes interleaved with K sampled ones
  { "cpu_profile.overhead", "object" },
  { "cpu_profile.overhead.state", "string" },   -- "measured" | "undecided" | "not measured"
  { "cpu_profile.overhead.why", "string" },     -- why undecided or not measured
  { "cpu_profile.overhead.need", "string" },    -- what would decide (or measure) it
  { "cpu_profile.overhead.processes", "integer" }, -- runner processes a side
  { "cpu_profile.overhead.iterations", "object" },
  { "cpu_profile.overhead.iterations.unsampled", "integer" },
  { "cpu_profile.overhead.iterations.sampled", "integer" },
  { "cpu_profile.overhead.unsampled_p50_ms", "number", unit = "ms" },
  { "cpu_profile.overhead.sampled_p50_ms", "number", unit = "ms" },
  { "cpu_profile.overhead.ratio", "number" },   -- sampled / unsampled median
  { "cpu_profile.overhead.pct", "number", unit = "%" }, -- (ratio - 1) x 100: + is slower sampled
  { "cpu_profile.overhead.ci_pct", "list", of = "number" }, -- its 95% interval [lo, hi], in %
  { "cpu_profile.perf_harden", "string" },      -- over adb: what odp did to security.perf_harden (docs/cpu-profile.md)
  { "device_state", "table" },             -- odp.target.device_state reads it (board, CPUs, thermal, OS)
  { "steps", "list", of = "object" },
  { "steps[].name", "string" },
  { "steps[].status", "string" },
  { "steps[].ms", "number", unit = "ms" },
  -- what the run cost on the link to the board (SSH): turnarounds odp waited on (odp_ssh_traffic), the bytes on
  -- the wire and the time to connect, counted from the end of the board's previous run (docs/helper-protocol.md)
  { "transport", "object" },
  { "transport.round_trips", "integer" },
  { "transport.bytes_up", "integer", unit = "B" },
  { "transport.bytes_down", "integer", unit = "B" },
  { "transport.connect_ms", "number", unit = "ms" },
  { "transport.connects", "integer" },
  -- odp's own time for this run, by part (odp.core.timings; `odp run` counts from its main()): the parts up to
  -- the record's write, in order, never overlapping; inside: processes odp waited for within them
  { "timings", "object" },
  { "timings.parts", "list", of = "object" },
  { "timings.parts[].name", "string" },
  { "timings.parts[].ms", "number", unit = "ms" },
  { "timings.total_ms", "number", unit = "ms" },
  { "timings.inside", "map", of = "number", unit = "ms" },
  { "threads", "integer" },
  { "method", "string" },
  { "sweep", "table" },                    -- {point, rep (1..reps), reps (the sweep's --repeat), of (points)}
  { "build", "table" },                    -- Ethos-U: the firmware build
  { "images", "table" },                   -- Ethos-U: the flashed images' file_info
  { "flash", "table" },                    -- Ethos-U: the flash transfer and its check
  { "rtt", "table" },                      -- Ethos-U: what the RTT capture read
  { "twin_state", "string" },              -- the QEMU twin's state
  { "warnings", "list", of = "string" },
  { "error", "object" },
  { "error.code", "string" },
  { "error.message", "string" },
  { "error.exit", "integer" },
  { "history", "object" },                 -- only when the history row could not be written (result.save)
  { "history.written", "boolean" },
  { "history.error", "string" },
}
-- (the stats_fields(...) lists above, spliced in where they stand)
do
  local flat = {}
  for _, f in ipairs(M.FIELDS) do
    if type(f[1]) == "table" then table.move(f, 1, #f, #flat + 1, flat) else flat[#flat + 1] = f end
  end
  M.FIELDS = flat
end

-- ---------------------------------------------------------------------------------------------------------
-- The declaration as a tree (built once, again after M.add)

local ENTRY_KEYS = { [1] = true, [2] = true, of = true, unit = true, metric = true, label = true, format = true,
  history = true, group = true, better = true }
local TYPES = { string = true, integer = true, number = true, boolean = true, object = true, list = true,
  map = true, table = true, any = true, scalar = true }

local root, by_path
local find, sub = string.find, string.sub

local function index()
  root, by_path = { children = {} }, {}
  local fields = M.FIELDS
  -- a field is most often declared right after a sibling: its parent is the previous one's when its path is
  -- that one's parent path and a dot (prefix) followed by a name, found by two plain finds (the index cost 2.8
  -- M instructions, 2.0 M so, of a host run's 32 M)
  local prefix, prefix_parent = nil, root
  for i = 1, #fields do
    local f = fields[i]
    local path, kind = f[1], f[2]
    local parent, name
    if prefix and find(path, prefix, 1, true) == 1 and not find(path, ".", #prefix + 1, true) then
      parent, name = prefix_parent, sub(path, #prefix + 1)
    else
      -- the path's last dot by plain finds: a backtracking "^(.*)%.([^.]+)$" per field cost 0.6 M of the 6.4 M
      -- instructions of loading this module, which every run does
      local dot, at = nil, 0
      repeat at = find(path, ".", at + 1, true) if at then dot = at end until not at
      if dot then
        local parent_path = sub(path, 1, dot - 1)
        name = sub(path, dot + 1)
        local list_item = sub(parent_path, -2) == "[]" and sub(parent_path, 1, -3) or nil
        parent = by_path[list_item or parent_path]
        if not parent then error(("schema: %s is declared before its parent %s"):format(path, parent_path), 0) end
        if list_item then parent = parent.item end
        if not parent or not parent.children then
          error(("schema: %s: its parent is not an object"):format(path), 0)
        end
        prefix, prefix_parent = sub(path, 1, dot), parent
      else
        parent, name, prefix = root, path, nil
      end
    end
    local node = { f = f, path = path, children = kind == "object" and {} or nil }
    if kind == "list" and f.of == "object" then node.item = { children = {}, path = path .. "[]" } end
    parent.children[name] = node
    by_path[path] = node
  end
end

--- Raises unless f is an entry of the shape above: what M.add checks of a script's field. odp's own M.FIELDS are
--- checked by tests/lua/schema_test.lua, not at every start (1.3 M instructions of a host run's 35 M).
---@param f table
function M.check_entry(f)
  if type(f) ~= "table" or type(f[1]) ~= "string" or not TYPES[f[2]] then
    error("schema: an entry is {path, type, ...} with type one of string, integer, number, boolean, object, " ..
      "list, map, table, any, scalar", 3)
  end
  for k in pairs(f) do
    if not ENTRY_KEYS[k] then error(("schema: %s: unknown attribute '%s'"):format(f[1], tostring(k)), 3) end
  end
  if (f[2] == "list" or f[2] == "map") and not TYPES[f.of or ""] then
    error(("schema: %s: a %s needs of = <type>"):format(f[1], f[2]), 3)
  end
end

index()

--- Declares one more field (a user script's or a test's; odp's own are in M.FIELDS above): after the entry
--- whose path is opts.after, else at the end. Every view shows it from then on. Misuse raises.
---@param entry table {path, type, unit=, metric=, label=, format=, history=, group=}
---@param opts {after?: string}?
function M.add(entry, opts)
  M.check_entry(entry)
  if by_path[entry[1]] then error(("schema: %s is declared already"):format(entry[1]), 2) end
  local at = #M.FIELDS + 1
  for i, f in ipairs(M.FIELDS) do if opts and f[1] == opts.after then at = i + 1 end end
  table.insert(M.FIELDS, at, entry)
  local ok, err = pcall(index)
  if not ok then
    table.remove(M.FIELDS, at)
    index()
    error(err, 2)
  end
end

--- Takes a field back out (tests that added one with M.add).
function M.remove(path)
  for i, f in ipairs(M.FIELDS) do
    if f[1] == path then
      table.remove(M.FIELDS, i)
      index()
      return
    end
  end
end

--- The entry of a path ("latency_ms.p50"), or nil.
function M.field(path)
  local node = by_path[path]
  return node and node.f
end

--- The value at a dotted path of a record (no lists on the way), or nil.
function M.get(rec, path)
  local v = rec
  for part in path:gmatch("[^.]+") do
    if type(v) ~= "table" then return nil end
    v = v[part]
  end
  return v
end

-- ---------------------------------------------------------------------------------------------------------
-- The one reader. Records come from files, other odp versions and devices: every value is checked for its
-- declared type; numbers must be finite (JSON has no NaN/Inf; a device's NaN is not a measurement).

--- A finite number, or nil.
function M.finite(v)
  return math.type(v) ~= nil and v == v and v ~= math.huge and v ~= -math.huge and v or nil
end

-- Whether v is of the scalar type kind (or a table, for "table").
local function is_a(kind, v)
  if kind == "any" then return true end
  if kind == "string" or kind == "boolean" or kind == "table" then return type(v) == kind end
  if kind == "number" then return M.finite(v) ~= nil end
  if kind == "integer" then return M.finite(v) ~= nil and math.abs(v) < 2 ^ 53 and v == math.floor(v) end
  if kind == "scalar" then return type(v) == "string" or type(v) == "boolean" or M.finite(v) ~= nil end
  return false
end

local function what(v)
  if math.type(v) and not M.finite(v) then return tostring(v) end
  return type(v) == "table" and (json.is_array(v) and "a list" or "an object") or type(v)
end

local read

-- v checked against the type kind (node: the declaration of an object or list item, when it has one)
-- -> ok, the checked value
local function read_as(kind, node, v, path, notes)
  if kind == "object" then
    if type(v) ~= "table" or (json.is_array(v) and #v > 0) then return false end
    local out = {}
    for k, x in pairs(v) do
      local child = type(k) == "string" and node.children[k]
      if child then
        out[k] = read(child, x, path .. "." .. k, notes)
      elseif not notes.seen[path .. "." .. tostring(k)] then
        notes.seen[path .. "." .. tostring(k)] = true
        notes.unknown[#notes.unknown + 1] = (path .. "." .. tostring(k)):gsub("^%.", "")
      end
    end
    return true, out
  end
  return is_a(kind, v), v
end

local function note_invalid(notes, path, v, kind)
  notes.invalid[#notes.invalid + 1] = ("%s: %s, not %s"):format(path:gsub("^%.", ""), what(v), kind)
end

function read(node, v, path, notes)
  local f = node.f
  if v == nil or v == json.null then return nil end
  local kind = f[2]
  if kind == "list" or kind == "map" then
    if type(v) ~= "table" or (kind == "list" and not json.is_array(v) and next(v) ~= nil) then
      note_invalid(notes, path, v, kind)
      return nil
    end
    local out = kind == "list" and json.array() or {}
    local item_path = kind == "list" and path .. "[]" or path
    if kind == "list" then
      for _, x in ipairs(v) do
        local ok, c = read_as(f.of, node.item, x, item_path, notes)
        if ok then out[#out + 1] = c else note_invalid(notes, item_path, x, f.of) end
      end
    else
      for k, x in pairs(v) do
        local ok, c = false, nil
        if type(k) == "string" then ok, c = read_as(f.of, nil, x, path .. "." .. k, notes) end
        if ok then out[k] = c else note_invalid(notes, path .. "." .. tostring(k), x, f.of) end
      end
    end
    return out
  end
  local ok, c = read_as(kind, node, v, path, notes)
  if not ok then
    note_invalid(notes, path, v, kind)
    return nil
  end
  return c
end

--- Reads a record against the declaration -> a checked copy, notes. The copy holds the declared fields,
--- each of its type (numbers finite) or absent; invalid list items are left out. notes.unknown: the paths
--- of fields this odp does not declare (a record of another odp version: a warning, the rest is read);
--- notes.invalid: "path: what it is, not what it should be" for values left out; notes.version: the
--- record's schema when it is not M.VERSION. A value that is not a table at all -> nil, notes.
---@param rec any
---@return table? rec
---@return {unknown: string[], invalid: string[], version?: string} notes
function M.read(rec)
  local notes = { unknown = {}, invalid = {}, seen = {} }
  if type(rec) ~= "table" then
    notes.invalid[1] = ("the record is %s, not an object"):format(what(rec))
    notes.seen = nil
    return nil, notes
  end
  local _, out = read_as("object", root, rec, "", notes)
  notes.seen = nil
  if type(rec.schema) == "string" and rec.schema ~= M.VERSION then notes.version = rec.schema end
  return out, notes
end

--- One line on what M.read's notes say was not read, or nil when all was. where: the record's name.
function M.describe(notes, where)
  local parts = {}
  if notes.version then parts[#parts + 1] = ("written as %s, read as %s"):format(notes.version, M.VERSION) end
  if #notes.unknown > 0 then
    local u = table.move(notes.unknown, 1, #notes.unknown, 1, {})
    table.sort(u)
    parts[#parts + 1] = "fields this odp does not know (another odp version?), left out: " .. table.concat(u, ", ")
  end
  if #notes.invalid > 0 then
    parts[#parts + 1] = "values of the wrong type, left out: " .. table.concat(notes.invalid, "; ")
  end
  if #parts == 0 then return nil end
  return (where and (where .. ": ") or "") .. table.concat(parts, "; ")
end

-- ---------------------------------------------------------------------------------------------------------
-- What views iterate

--- The numeric values lab engines and the step summary report, in declaration order: {key=, value=,
--- units=} for each field with a `metric` whose value in rec is a finite number.
function M.metrics(rec)
  local out = {}
  for _, f in ipairs(M.FIELDS) do
    if f.metric and (f[2] == "number" or f[2] == "integer") and not f[1]:find("[]", 1, true) then
      local v = M.finite(M.get(rec, f[1]))
      if v then out[#out + 1] = { key = f.metric, value = v, units = f.unit } end
    end
  end
  return out
end

--- The fields the history keeps as series: {metric=, unit=, get = function(rec) -> value, lo, hi, n,
--- with_samples}, in declaration order. rec: as M.read returned it.
function M.kept()
  local out = {}
  for _, f in ipairs(M.FIELDS) do
    local h = f.history
    if h == true then
      out[#out + 1] = { metric = f.metric, unit = f.unit, get = function(rec) return M.finite(M.get(rec, f[1])) end }
    elseif type(h) == "table" then
      out[#out + 1] = { metric = f.metric, unit = f.unit, get = function(rec)
        local o = M.get(rec, f[1])
        if type(o) ~= "table" or not M.finite(o[h.value]) then return nil end
        local ci = h.ci and o[h.ci]
        local lo, hi = type(ci) == "table" and M.finite(ci[1]), type(ci) == "table" and M.finite(ci[2])
        if not (lo and hi) then lo, hi = nil, nil end
        return o[h.value], lo, hi, h.n and math.tointeger(o[h.n]), h.samples == true
      end }
    end
  end
  return out
end

--- Whether a larger value of this metric is the better one (tokens/s, cosine: `better = "higher"`); every other
--- metric (times, sizes, errors) is better smaller.
function M.higher_is_better(metric)
  for _, f in ipairs(M.FIELDS) do
    if f.metric == metric then return f.better == "higher" end
  end
  return false
end

--- The labelled fields (what the terminal report and the HTML page show as "label  value"), in order;
--- group: only those of that HTML group ("measurements": those without one).
function M.labelled(group)
  local out = {}
  for _, f in ipairs(M.FIELDS) do
    if f.label and (not group or (f.group or "measurements") == group) then out[#out + 1] = f end
  end
  return out
end

--- The order names come out in, in every object of a record (json.encode's keyorder, at every level): what
--- a reader looks for first comes first; the rest (a new field too) follow sorted.
M.KEY_ORDER = { "schema", "kind", "ok", "flow", "device", "target", "started_at", "odp_version", "commit",
  "lava_job_id", "model", "runner", "params", "status", "signal", "stop", "sustained", "thermal", "latency_ms",
  "load_ms", "peak_rss_kb", "planned_buffers", "inputs", "outputs", "reference", "artifacts", "ops", "warnings",
  "error", "path", "file", "sha256", "bytes", "n", "total", "mean", "min", "p10", "p50", "p90", "p99", "max", "std", "source", "ci95",
  "cv", "first_ms", "warm", "drift", "pct", "p", "minute", "process", "waited_s", "before_c", "after_c", "rule",
  "met", "processes", "samples", "seconds", "target_ci", "ci_pct", "code", "message", "name", "block" }

return M
