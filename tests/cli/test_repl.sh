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
rm -rf "$tmp"
echo "1..$n"
[ $failed -eq 0 ]
