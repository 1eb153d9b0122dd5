odp(1) is generated from the declarations --help is generated from, so it cannot drift from them;
`make install PREFIX=` puts it in PREFIX/share/man/man1, and man(1) renders it.
  $ make -s BUILD=$ODP_BUILD_DIR install PREFIX=$TMP/p >/dev/null && ls $TMP/p/share/man/man1
  odp.1
  $ LC_ALL=C MANWIDTH=200 man -l $TMP/p/share/man/man1/odp.1 >$TMP/man.txt 2>$TMP/man.err; cat $TMP/man.err; grep -E '^[A-Z][A-Z ]+$' $TMP/man.txt
  NAME
  SYNOPSIS
  DESCRIPTION
  COMMANDS
  SCRIPTS
  COMMON OPTIONS
  EXIT STATUS
  ENVIRONMENT
  FILES
  SEE ALSO

Every command odp --help lists, every shipped script, the exit codes and environment variables are there
  $ for c in $($ODP --help | awk '/^Commands:/ { f = 1; next } /^$/ { f = 0 } f { print $1 }'); do grep -q "^   odp $c" $TMP/man.txt && echo "$c" || echo "$c MISSING"; done | sort | paste -sd' '
  compare devices history inspect plot repl report run version
  $ grep -E '^   odp run scripts/' $TMP/man.txt
     odp run scripts/alif_e8.lua
     odp run scripts/graviton4.lua
     odp run scripts/host.lua
     odp run scripts/rpi5.lua
     odp run scripts/sweep.lua
     odp run scripts/x300pro.lua
  $ grep -E '^       (0|1|2|3|130) +[a-z]' $TMP/man.txt | sed 's/^ *//' | cut -c1-30
  0      measured (or the comman
  1      the flow ran and the me
  2      usage: a bad option, va
  3      device or infrastructur
  130    interrupted (Ctrl-C); t
  $ grep -c -E '^       (ODP_PATH|ODP_SSH_PASSPHRASE|ANDROID_SERIAL)$' $TMP/man.txt
  3

No drift: every option each script's and command's --help lists is in the man page
  $ for s in scripts/*.lua; do $ODP run $s --help; done >$TMP/help.txt; for c in inspect plot; do $ODP $c --help; done >>$TMP/help.txt; grep -oE -- '--[a-z][a-z0-9-]+' $TMP/help.txt | sort -u >$TMP/h; grep -oE -- '--[a-z][a-z0-9-]+' $TMP/man.txt | sort -u >$TMP/m; comm -23 $TMP/h $TMP/m; wc -l <$TMP/h | awk '$1 > 40 { print "many options checked" }'
  many options checked
