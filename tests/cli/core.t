odp without a command prints its usage and exits 2
  $ $ODP
  usage: odp <command> [options]
  
  Commands:
  ...
  [2]

version
  $ $ODP version
  odp .+ (re)
  $ $ODP version -v | grep -c '^lua      Lua 5.4'
  1

An unknown command is a usage error
  $ $ODP frobnicate
  odp: unknown command 'frobnicate'
  ...
  [2]

A script error names the script's line, with a traceback, exit 2
  $ printf 'local t = nil\nlocal function f() return t.x end\nreturn f()\n' > $TMP/bad.lua; $ODP run $TMP/bad.lua
  odp: error: .*/bad.lua:2: attempt to index a nil value %(upvalue 't'%) (re)
  stack traceback:
  ...
  [2]

A syntax error too
  $ printf 'x = = 1\n' > $TMP/syn.lua; $ODP run $TMP/syn.lua
  odp: .*/syn.lua:1: unexpected symbol near '=' (re)
  [2]

A missing script
  $ $ODP run $TMP/missing.lua
  odp: cannot read script '.*/missing.lua' %(looked in the current directory, .*%) (re)
  [2]

A plain script gets its arguments
  $ printf 'print(select("#", ...), arg[0] ~= nil, ...)\n' > $TMP/args.lua; $ODP run $TMP/args.lua a "b c"
  2	true	a	b c

The REPL prints expression values and continues incomplete statements
  $ printf 'x = 1 +\n 41\nx * 2\n' | HOME=$TMP $ODP repl
  84
  
