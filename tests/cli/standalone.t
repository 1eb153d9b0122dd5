The project stands alone: no file cites the design notes kept beside it (FACTS, PROCEDURE, DESIGN, STYLE)
or the directory "shared" beside the project, which a clone does not have. The facts live in docs/sources.md. Only
tests/run.sh, bench/run.sh and the host and Pi-twin demos (scripts/demo.sh, scripts/demo_pi.sh) may look beside the
project, for the real ExecuTorch runners (optional: all work without them).
  $ grep -rnE '(FACTS|PROCEDURE|DESIGN|STYLE)\.md|\.\./shared' . --exclude-dir=.git --exclude-dir='build*' --exclude-dir=.tmp --exclude-dir=runs | grep -v -e '^\./tests/run\.sh:' -e '^\./scripts/demo\.sh:' -e '^\./scripts/demo_pi\.sh:' -e '^\./bench/run\.sh:'
  [1]

Every "docs/sources.md §N" a file points to exists
  $ for n in $(grep -rhoE 'docs/sources\.md §[0-9]+' . --exclude-dir=.git --exclude-dir='build*' --exclude-dir=.tmp | sed 's/.*§//' | sort -u); do grep -q "^## $n\. " docs/sources.md || echo "missing §$n"; done
