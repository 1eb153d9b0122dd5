Human tables show times in the unit their magnitude reads best in (ns, µs, ms, s), four significant digits,
the unit in each column's header; JSON and CSV keep milliseconds (docs/SCRIPTING.md).

The operator table: one unit for the whole table, so columns compare at a glance (a p10 in ns beside a p90 in
µs read as a thousandfold spread; flatc's decode of the fixture: add 210/216 ns, its p90 15625 ns)
  $ $ODP inspect tests/fixtures/etdump/add_n10.etdump
  ETDump tests/fixtures/etdump/add_n10.etdump: version 0, 11 runs; blocks: Default (1 run), Execute (10 runs)
  
  operators
    block    name                   n  p10 µs  p50 µs  p90 µs  avg µs  min µs  max µs  delegate
    Default  Method::init           1   37.68   37.68   37.68   37.68   37.68   37.68
    Default  Program::load_method   1   41.70   41.70   41.70   41.70   41.70   41.70
    Execute  native_call_add.out   10  0.2100  0.2160   15.62   15.39  0.2100   151.6
    Execute  Method::execute       10  0.5210  0.5455   32.99   19.61  0.5210   174.0
    time split: delegated 0 ms (0%) · kernels 375.5 ns · other 160.5 ns · execute 545.5 ns (medians of 10)
    (1 OPERATOR_CALL row hidden: kernel + framework overhead; --all shows them)

A run's latency statistics share one unit, the one its p10, p50 and p90 read best in (the HTML page's too); NaN outputs print as NaN, never the platform's -nan
(a replay of the real runner's transcript, tests/fixtures/transcripts/22_add_n10_split, with NaN outputs)
  $ cp tests/fixtures/transcripts/22_add_n10_split.stderr $TMP/nan.stderr; cp tests/fixtures/transcripts/22_add_n10_split.rc $TMP/nan.rc; printf 'OutputX 0: tensor(sizes=[3], [nan, -nan, 2.])\n' >$TMP/nan.stdout
  $ ODP_FAKE_REPLAY=$TMP/nan $ODP run scripts/host.lua --runner $ODP_BUILD_DIR/tests/fake_runner --model tests/fixtures/pte/add_arduino.pte --runs-dir $TMP/runs -q | awk '/^  latency/ { n = 3 } n && n-- { print } /^  outputs/ { print }'
    latency (from log)
       n  mean ns  min ns  p50 ns  p90 ns  p99 ns  max ns  std ns
      10    91797   752.0   877.0  118274  795981  871282  274086
    outputs          [0] sizes [3]: NaN, NaN, 2.0

JSON keeps milliseconds; NaN model outputs are the strings "NaN" (JSON has no NaN; odp.results.result reads them back as numbers)
  $ ODP_FAKE_REPLAY=$TMP/nan $ODP run scripts/host.lua --runner $ODP_BUILD_DIR/tests/fake_runner --model tests/fixtures/pte/add_arduino.pte --runs-dir $TMP/runs -q --format json | grep -E '^    "(p50|min)"|"values"'
      "min":0.000752,
      "p50":0.000877,
        "values":["NaN","NaN",2.0]
