# TAP for shell suites, sourced: . "$top/tests/lib/tap.sh"
# tests/run.sh reads a suite's stdout as one TAP stream: test lines "ok N - name" / "not ok N - name" numbered
# 1..N in order, and one plan line "1..N". A shell suite therefore counts through these helpers, runs each of
# its Lua parts (odp run x.lua, which prints its own 1..k) through tap_run, and ends with tap_done.
#   tap_ok NAME                    a passing test
#   tap_not_ok NAME [DIAG...]      a failing test, each DIAG printed as a "#   " line
#   tap_check NAME CMD...          passes when CMD exits 0
#   tap_run CMD...                 a child TAP stream: its tests become this suite's next ones, its plan and exit
#                                  status are checked (use `env VAR=x cmd` for per-command variables)
#   tap_done                       prints the plan; returns 1 when anything failed
# A check of the test rig itself (an emulator's or twin's own behaviour, not odp's) ends its NAME with
# " # rig": tests/run.sh counts those apart from the tests of odp.
tap_n=0
tap_failed=0

tap_ok() { tap_n=$((tap_n + 1)); printf 'ok %d - %s\n' "$tap_n" "$1"; }

tap_not_ok() {
  tap_n=$((tap_n + 1)); tap_failed=$((tap_failed + 1))
  printf 'not ok %d - %s\n' "$tap_n" "$1"; shift
  for _tap_l in "$@"; do printf '#   %s\n' "$_tap_l"; done
}

tap_check() {
  _tap_name=$1; shift
  if "$@"; then tap_ok "$_tap_name"; else tap_not_ok "$_tap_name" "command: $*"; fi
}

tap_run() {
  _tap_out=$(mktemp)
  "$@" >"$_tap_out"
  _tap_rc=$?
  _tap_ran=0 _tap_plan= _tap_child_failed=0
  while IFS= read -r _tap_l; do
    case $_tap_l in
      "not ok"*) _tap_st="not ok" _tap_rest=${_tap_l#not ok} ;;
      "ok"|"ok "*) _tap_st=ok _tap_rest=${_tap_l#ok} ;;
      1..*) _tap_plan=${_tap_l#1..}; continue ;;
      *) printf '%s\n' "$_tap_l"; continue ;;
    esac
    _tap_rest=${_tap_rest# }
    _tap_rest=${_tap_rest#"${_tap_rest%%[!0-9]*}"}
    _tap_ran=$((_tap_ran + 1)) tap_n=$((tap_n + 1))
    if [ "$_tap_st" = "not ok" ]; then tap_failed=$((tap_failed + 1)) _tap_child_failed=1; fi
    printf '%s %d%s\n' "$_tap_st" "$tap_n" "$_tap_rest"
  done <"$_tap_out"
  rm -f "$_tap_out"
  if [ "$_tap_plan" != "$_tap_ran" ]; then
    tap_not_ok "$* planned ${_tap_plan:-nothing} tests and ran $_tap_ran"
  elif [ "$_tap_rc" -ne 0 ] && [ "$_tap_child_failed" -eq 0 ]; then
    tap_not_ok "$* exited with status $_tap_rc"
  fi
}

tap_done() { echo "1..$tap_n"; [ "$tap_failed" -eq 0 ]; }
