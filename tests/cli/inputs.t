Every name a user gives is checked against what consumes it: an unknown one is exit 2, one line, with what was
meant; nothing runs (issue 28). /bin/true never runs: the names are refused first.

A swept parameter the flow does not have: the host flow's option is threads; a runner flag goes after --
  $ $ODP run scripts/sweep.lua --flow scripts/host.lua --runner /bin/true --model tests/fixtures/pte/add_arduino.pte -p cpu_threads=1,4 --out $TMP/s.jsonl --no-history
  odp: -p cpu_threads is not an option of scripts/host.lua; did you mean threads? (a runner flag goes after --: -- --cpu_threads=V)
  [2]
  $ $ODP run scripts/sweep.lua --flow scripts/host.lua --runner /bin/true --model tests/fixtures/pte/add_arduino.pte -p bogus_typo=1,4 --out $TMP/s.jsonl --no-history
  odp: -p bogus_typo is not an option of scripts/host.lua; `odp run scripts/host.lua --help` lists them (a runner flag goes after --: -- --bogus_typo=V)
  [2]
  $ test -e $TMP/s.jsonl || echo nothing written
  nothing written

A misspelt option on the command line
  $ $ODP run scripts/host.lua --runner /bin/true --model tests/fixtures/pte/add_arduino.pte --num-executoins 3
  odp: unknown option --num-executoins (did you mean --num-executions? see --help)
  [2]

board:profile{} and run.point: a misspelt key is refused, not measured with the default
  $ printf 'local b = require("odp.run.board").open("devices/host.lua", {})\nreturn b:profile{runner = "/bin/true", model = "tests/fixtures/pte/add_arduino.pte", n = 2, num_executoins = 50}\n' > $TMP/p.lua
  $ $ODP run $TMP/p.lua
  odp: key num_executoins is not an option of the executorch flow; did you mean num_executions?
  [2]
  $ printf 'local b = require("odp.run.board").open("devices/host.lua", {})\nreturn b:profile{runner = "/bin/true", model = "tests/fixtures/pte/add_arduino.pte", tiemout = 1}\n' > $TMP/p.lua
  $ $ODP run $TMP/p.lua
  odp: key tiemout is not an option of the executorch flow; did you mean timeout?
  [2]

A device file's and a lab file's misspelt key
  $ printf 'return { name = "x", transport = "ssh", flow = "executorch", remote_dri = "/srv" }\n' > $TMP/dev.lua
  $ printf 'return { boards = { { name = "a", device = "%s", host = "h", remote_dri = "/srv" } } }\n' $TMP/dev.lua > $TMP/lab.lua
  $ $ODP run scripts/rpi5.lua --boards $TMP/lab.lua --runner /bin/true --model tests/fixtures/pte/add_arduino.pte
  odp: lab file .*: device file .*/dev%.lua: unknown key remote_dri; did you mean remote_dir%? (re)
  [2]
  $ printf 'return { boards = { { name = "a", device = "devices/rpi5.lua", host = "h", remote_dri = "/srv" } } }\n' > $TMP/lab.lua
  $ $ODP run scripts/rpi5.lua --boards $TMP/lab.lua --runner /bin/true --model tests/fixtures/pte/add_arduino.pte
  odp: lab file .*/lab%.lua: boards%[1%] %(a%): key remote_dri is not an option of ssh boards %(did you mean remote_dir%?%) (re)
  [2]

The REPL over a lab takes its boards' transport options from the lab file: one on the command line is refused,
not dropped
  $ $ODP repl --boards $TMP/lab.lua --remote-dir /srv/x
  odp repl: --boards takes no other argument, got '--remote-dir' (transport options go in the lab file: docs/many-boards.md)
  [2]
