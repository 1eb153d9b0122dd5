#!/bin/sh
# The REPL as a person uses it: in a terminal (tmux), with Tab completion, multi-line input and history.
set -u
ODP=${ODP:-build/odp}
tmp=$(mktemp -d)
sock="$tmp/tmux.sock"
# however this script ends, the terminal and the REPL in it go with it
trap 'tmux -S "$sock" kill-server 2>/dev/null; rm -rf "$tmp"' EXIT
n=0 failed=0
check() { # name, pattern expected on the screen
  n=$((n + 1))
  if tmux -S "$sock" capture-pane -p -t odp | grep -q -- "$2"; then echo "ok $n - $1"
  else
    failed=$((failed + 1)); echo "not ok $n - $1"
    tmux -S "$sock" capture-pane -p -t odp | sed 's/^/#   /'
  fi
}
wait_for() { # pattern, up to 5 s
  i=0
  while [ $i -lt 50 ] && ! tmux -S "$sock" capture-pane -p -t odp | grep -q -- "$1"; do sleep 0.1; i=$((i + 1)); done
}
HOME=$tmp tmux -S "$sock" -f /dev/null new-session -d -s odp -x 120 -y 30 "HOME=$tmp $ODP repl"
wait_for "odp> "
tmux -S "$sock" send-keys -t odp "odp.sy" Tab
wait_for "odp> odp.sys"
check "Tab completes a module name" "odp> odp.sys"
tmux -S "$sock" send-keys -t odp ".realp" Tab
wait_for "odp.sys.realpath"
check "Tab completes a module member" "odp> odp.sys.realpath"
tmux -S "$sock" send-keys -t odp C-u "odp.pro" Tab Tab
wait_for "probe"
check "a second Tab lists the candidates" "proc.*probe\\|probe.*proc"
tmux -S "$sock" send-keys -t odp C-u "local r = odp.proc.run{'sh', '-c',"  Enter
wait_for ">> "
check "an incomplete statement continues" "^>>"
tmux -S "$sock" send-keys -t odp "'exit 7'}; return r.status" Enter
wait_for "^7"
check "the value of the statement is printed" "^7$"
tmux -S "$sock" send-keys -t odp C-d
i=0; while [ $i -lt 50 ] && [ ! -s "$tmp/.local/state/odp/repl_history" ]; do sleep 0.1; i=$((i + 1)); done
n=$((n + 1))
if grep -q "exit.*7" "$tmp/.local/state/odp/repl_history" 2>/dev/null; then echo "ok $n - history is saved"
else failed=$((failed + 1)); echo "not ok $n - history is saved"; fi
tmux -S "$sock" kill-server 2>/dev/null

# Keys typed while a statement runs (docs/SCRIPTING.md, The REPL): discarded and said, never the start of the next
# line; a Ctrl-D among them leaves after the statement; Ctrl-C still interrupts; a paste still runs line by line.
# Each slow statement prints a mark once it runs: the REPL has looked for pasted input by then.
HOME=$tmp tmux -S "$sock" -f /dev/null new-session -d -s odp -x 120 -y 30 \
  "HOME=$tmp $ODP repl; echo REPL-EXITED \$?; sleep 60"
wait_for "odp> "
tmux -S "$sock" send-keys -t odp 'io.write("RUN", "NING-1\n") io.stdout:flush() odp.sys.sleep(3)' Enter
wait_for "^RUNNING-1"
tmux -S "$sock" send-keys -t odp "1+" Enter "41"
wait_for "not run"
check "keys typed while a statement runs are said, not run" '(typed while it ran, not run: "1+\\n41")'
tmux -S "$sock" send-keys -t odp "6*7" Enter
wait_for "^42$"
check "a half-line typed while a statement runs does not begin the next line" "^42$"
tmux -S "$sock" send-keys -t odp 'io.write("RUN", "NING-2\n") io.stdout:flush() return odp.sys.sleep(30)' Enter
wait_for "^RUNNING-2"
tmux -S "$sock" send-keys -t odp "abc"
tmux -S "$sock" send-keys -t odp C-c
wait_for "^(interrupted)"
check "Ctrl-C still interrupts a running statement" "ECANCELED"
tmux -S "$sock" send-keys -t odp "2+3" Enter
wait_for "^5$"
check "after Ctrl-C the prompt takes a fresh line" "^5$"
printf 'x = 6\nio.write("RUN", "NING-3\\n") io.stdout:flush() odp.sys.sleep(1)\nx * 111\n' >"$tmp/paste"
tmux -S "$sock" load-buffer "$tmp/paste"
tmux -S "$sock" paste-buffer -t odp
wait_for "^666$"
check "a paste of several lines, one of them slow, runs every line" "^666$"
tmux -S "$sock" send-keys -t odp 'io.write("RUN", "NING-4\n") io.stdout:flush() odp.sys.sleep(2) return "slept"' Enter
wait_for "^RUNNING-4"
tmux -S "$sock" send-keys -t odp C-d
sleep 1
n=$((n + 1))
if tmux -S "$sock" capture-pane -p -t odp | grep -q "REPL-EXITED"; then
  failed=$((failed + 1)); echo "not ok $n - a Ctrl-D typed while a statement runs waits for it"
else echo "ok $n - a Ctrl-D typed while a statement runs waits for it"; fi
wait_for "REPL-EXITED"
check "the statement ends, then the REPL leaves" '^"slept"$'
check "... and says why" "^(Ctrl-D while it ran: leaving)$"
check "... with status 0" "^REPL-EXITED 0$"
tmux -S "$sock" kill-server 2>/dev/null

# input that is not a terminal is read in full: lines after a slow one are run
out=$(printf 'odp.sys.sleep(0.5)\n40+2\n' | HOME=$tmp $ODP repl 2>&1)
n=$((n + 1))
if printf '%s\n' "$out" | grep -q "^42$" && ! printf '%s\n' "$out" | grep -q "not run"; then
  echo "ok $n - piped input is not type-ahead"
else failed=$((failed + 1)); echo "not ok $n - piped input is not type-ahead"; printf '%s\n' "$out" | sed 's/^/#   /'; fi
rm -rf "$tmp"
echo "1..$n"
[ $failed -eq 0 ]
