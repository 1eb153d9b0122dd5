Every error a user meets names the file, host or option once, correctly, on one line, with the exit code
(0 ok, 1 measurement failed, 2 usage, 3 device or infrastructure); no "ECODE:" in the middle of a sentence.

A truncated model: the file once, the reason; a bad file is bad input, exit 2 (usage), as the exit-code table says
  $ $ODP inspect tests/fixtures/pte/truncated_600B.pte
  odp: tests/fixtures/pte/truncated_600B.pte: truncated .pte: the extended header expects 1156 bytes, the file has 600
  [2]

A file that is none of the known kinds
  $ $ODP inspect README.md
  odp: README.md is not an ETDump (ED00), a .pte (ET12) or an ELF file
  [2]

A missing file, and a missing option, on the command line
  $ $ODP inspect $TMP/nosuch.etdump
  odp: cannot read '.*/nosuch.etdump' (re)
  [2]
  $ $ODP run scripts/host.lua --model tests/fixtures/pte/add_arduino.pte
  odp: --runner is required (see --help)
  [2]
  $ $ODP run scripts/host.lua --runner /bin/true --model $TMP/nosuch.pte
  odp: %-%-model: cannot read '.*/nosuch%.pte' (re)
  [2]
  $ $ODP run scripts/host.lua --runner README.md --model tests/fixtures/pte/add_arduino.pte --runs-dir $TMP/runs
  odp: runner README.md is not executable (chmod +x README.md)
  [2]

A model that is no .pte: one check, on this machine, exit 2 on every target (port 1: never dialled)
  $ printf 'not a model at all' > $TMP/bad.pte
  $ $ODP run scripts/host.lua --runner /bin/true --model $TMP/bad.pte --runs-dir $TMP/runs
  odp: model .*/bad%.pte: .* (re)
  [2]
  $ $ODP run scripts/rpi5.lua --host pi@127.0.0.1 --port 1 --runner /bin/true --model $TMP/bad.pte --known-hosts $TMP/kh --runs-dir $TMP/runs
  odp: model .*/bad%.pte: .* (re)
  [2]

The sweep's --flow: the option, then Lua's own message naming the file (once)
  $ $ODP run scripts/sweep.lua --flow $TMP/nosuch.lua -p a=1 --out $TMP/s.jsonl
  odp: %-%-flow: cannot open .*/nosuch%.lua: No such file or directory (re)
  [2]

A board that is not there: the host and port once (no code in front)
  $ $ODP run scripts/rpi5.lua --host pi@127.0.0.1 --port 1 --runner /bin/true --model tests/fixtures/pte/add_arduino.pte --known-hosts $TMP/kh --runs-dir $TMP/runs
  odp: cannot connect to 127.0.0.1 port 1: Connection refused
  [3]

Files odp writes: the path once, no traceback, exit 3
  $ $ODP run scripts/host.lua --runner /bin/true --model tests/fixtures/pte/add_arduino.pte --runs-dir /proc/nosuch/runs -q
  odp: cannot create /proc/nosuch: No such file or directory
  [3]
  $ $ODP run scripts/sweep.lua --flow tests/flows/toy.lua -p size=1 --out $TMP/nosuch/s.jsonl -q
  odp: cannot write .*/nosuch/s%.jsonl: No such file or directory (re)
  [3]
  $ $ODP run tests/flows/toy.lua --size 1 --out /proc/nosuch/r.json -q
  odp: cannot write /proc/nosuch/r.json: No such file or directory
  [3]

Every file odp writes after measuring is checked before (a single run too): nothing runs, no run directory
  $ $ODP run scripts/host.lua --runner /bin/true --model tests/fixtures/pte/add_arduino.pte --runs-dir $TMP/runs-out --out $TMP/nosuch/r.json -q
  odp: cannot write .*/nosuch/r%.json: No such file or directory (re)
  [3]
  $ $ODP run scripts/host.lua --runner /bin/true --model tests/fixtures/pte/add_arduino.pte --runs-dir $TMP/runs-out --etdump $TMP -q
  odp: cannot write .*: it is a directory (re)
  [3]
  $ $ODP run scripts/host.lua --runner /bin/true --model tests/fixtures/pte/add_arduino.pte --runs-dir $TMP/runs-out --report junit $TMP/nosuch/j.xml -q
  odp: cannot write .*/nosuch/j%.xml: No such file or directory (re)
  [3]
  $ test -e $TMP/runs-out || echo "no run directory"
  no run directory
