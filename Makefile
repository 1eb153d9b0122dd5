# odp: one binary (build/odp) embedding Lua 5.4 + lpeg; dependencies from Debian packages (vendor/).
#   make            build build/odp
#   make test       install what the tests need, build, run every test (ends with "N passed, N failed")
#   make asan       the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make demo       the main job on the no-hardware default: the Alif E8 flow on its QEMU twin
#   make demo-host  the host flow: a runner on this machine
#   make demo-pi    the Raspberry Pi 5 flow on its arm64 twin (QEMU), over SSH
#   make install PREFIX=/usr/local    make deps    make clean    make apidoc (docs/api.md, LuaLS stubs)
PREFIX  ?= /usr/local
BUILD   ?= build
CC      ?= cc
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.1.0)
PKGS    := lua5.4 libssh2 libusb-1.0 libserialport libedit libcrypto sqlite3 libpq
# Lazy modules: a binding src/l_<m>.c with its core src/<m>/*.c (and the cores in LAZY_USES_<m>), linked with
# the libraries in LAZY_PKGS_<m> into <lib>/odp/<m>.so, loaded by `require "odp.<m>"` on first use. odp itself
# links none of those libraries, so a run that needs none of them starts as fast as lua5.4 (bench/README.md).
LAZY          := ssh adb usb serial readline sqlite pg
LAZY_PKGS_ssh := libssh2 libcrypto
LAZY_PKGS_adb := libusb-1.0 libcrypto
LAZY_USES_adb := usb
LAZY_PKGS_usb := libusb-1.0
LAZY_PKGS_serial := libserialport
LAZY_PKGS_readline := libedit
LAZY_PKGS_sqlite := sqlite3
LAZY_PKGS_pg := libpq
LPEG_A  := $(firstword $(wildcard /usr/lib/*/liblua5.4-lpeg.a /usr/lib/liblua5.4-lpeg.a))

# CFLAGS/LDFLAGS are the user's (optimisation, debug); what odp needs is in ODP_* and always applies.
# SAN: sanitizer flags for both compiling and linking (make asan).
CFLAGS  ?= -O2 -g
SAN     ?=
ODP_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -MMD -MP -fPIC $(SAN) \
           $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
           -DODP_VERSION='"$(VERSION)"' -DODP_DATADIR='"$(PREFIX)/share/odp"' -DODP_LIBDIR='"$(PREFIX)/lib"'
# Everything (C unit tests link libodp.a with all of it); odp itself links only Lua, lpeg and libc.
ODP_LDLIBS := $(LPEG_A) $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -ldl
# Lua itself is linked whole and static, as Debian's lua5.4 does: no relocations for it at start, and the
# lazy modules find every Lua API function in the executable (-rdynamic).
LUA_A   := $(firstword $(wildcard /usr/lib/*/liblua5.4.a /usr/lib/liblua5.4.a))
CORE_LDLIBS := $(LPEG_A) -Wl,--whole-archive $(LUA_A) -Wl,--no-whole-archive -lm -ldl

SRCS    := $(wildcard src/*.c src/*/*.c)
OBJS    := $(SRCS:%.c=$(BUILD)/%.o)
# Everything but main.o: what C unit tests and fuzz targets link against.
LIBOBJS := $(filter-out $(BUILD)/src/main.o,$(OBJS))
lazy_core = $(patsubst %.c,$(BUILD)/%.o,$(wildcard src/$(1)/*.c))
lazy_objs = $(patsubst %.c,$(BUILD)/%.o,$(wildcard src/l_$(1).c)) $(call lazy_core,$(1))
LAZY_OBJS := $(foreach m,$(LAZY),$(call lazy_objs,$(m)))
CORE_OBJS := $(filter-out $(LAZY_OBJS),$(OBJS))
LAZY_SOS  := $(LAZY:%=$(BUILD)/lib/odp/%.so)

# Test programs: tests/c/*_test.c are unit tests linked with odp's C cores (sanitized under make asan);
# the other tests/c/*.c are peers standing in for devices' programs (built plain: they are not odp).
UNITTESTS := $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(wildcard tests/c/*_test.c))
PEERS     := $(filter-out $(UNITTESTS),$(patsubst tests/c/%.c,$(BUILD)/tests/%,$(wildcard tests/c/*.c)))
TESTPROGS := $(UNITTESTS) $(PEERS)

# odp-rusage: a tiny static helper pushed to boards (tools/odp-rusage.c: main; the one-shot mode tools/exec.c and
# the resident helper tools/serve.c over the spawn core tools/spawn.c); never linked into odp.
# aarch64 is built with Debian's gcc-aarch64-linux-gnu (vendor/packages.txt [build]: `make deps`); a build
# without it says so, since Pi and Graviton runs then fall back to one exec per command.
HELPER_CC     ?= cc
HELPER_CFLAGS := -std=c11 -O2 -Wall -Wextra -Werror -static
AARCH64_CC    ?= aarch64-linux-gnu-gcc
AARCH64_FOUND := $(shell command -v $(AARCH64_CC) 2>/dev/null)
HELPERS       := $(BUILD)/odp-rusage-x86_64 $(if $(AARCH64_FOUND),$(BUILD)/odp-rusage-aarch64)

.PHONY: all test asan demo demo-host demo-pi install clean deps bench testprogs helpers apidoc FORCE
all: $(BUILD)/odp $(LAZY_SOS) helpers $(BUILD)/odp.1 $(BUILD)/luac/.stamp

helpers: $(HELPERS)
ifeq ($(AARCH64_FOUND),)
	@echo "odp: note: no $(AARCH64_CC) (Debian's gcc-aarch64-linux-gnu: make deps), so no aarch64 odp-rusage helper: runs on aarch64 boards (Pi 5, Graviton) fall back to one exec per command" >&2
endif

# the frame codec, the LZ4 decoder of uploads and the device-state gatherer are odp's own (src/helper/), compiled into both
HELPER_SRCS   := tools/odp-rusage.c tools/exec.c tools/serve.c tools/spawn.c tools/memwatch.c tools/sample.c src/util/sha256.c src/helper/frame.c src/helper/lz4.c src/helper/state.c src/util/buf.c
$(BUILD)/odp-rusage-x86_64: $(HELPER_SRCS) $(wildcard tools/*.h src/helper/*.h) src/util/sha256.h src/sample/stream.h
	@mkdir -p $(dir $@)
	$(HELPER_CC) $(HELPER_CFLAGS) -o $@ $(HELPER_SRCS)

$(BUILD)/odp-rusage-aarch64: $(HELPER_SRCS) $(wildcard tools/*.h src/helper/*.h) src/util/sha256.h src/sample/stream.h
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(HELPER_CFLAGS) -o $@ $(HELPER_SRCS)

# The man page, generated by odp itself from the declarations --help shows (lua/odp/cli/man.lua).
$(BUILD)/odp.1: $(BUILD)/odp $(LAZY_SOS) tools/man.lua $(shell find lua scripts -name "*.lua")
	$(BUILD)/odp run tools/man.lua > $@.tmp && mv $@.tmp $@

# odp's Lua precompiled (src/main.c, search_bytecode; tools/luac.lua): each chunk keyed by its source's path,
# size and bytes, so an edited source is parsed again until make runs, never loaded stale. The paths are the
# ones odp's package.path yields: the real path of lua/ (odp's root is a real path) and Debian's Lua dir.
LUAC_SRCS := $(shell find lua -name "*.lua")
LUAC_SYSTEM := $(wildcard /usr/share/lua/5.4/dkjson.lua)
$(BUILD)/luac/.stamp: $(BUILD)/odp tools/luac.lua $(LUAC_SRCS) $(LUAC_SYSTEM)
	$(BUILD)/odp run tools/luac.lua $(foreach f,$(LUAC_SRCS),$(realpath lua)/$(f:lua/%=%) $(BUILD)/luac/$(f:lua/%=%)c) \
	  $(foreach f,$(LUAC_SYSTEM),$(f) $(BUILD)/luac/system/$(notdir $(f))c)
	@touch $@

# The peak-RSS and memory-by-phase oracles for the arm64 board twins (tests/board_twin): static, as the aarch64 runner is.
AARCH64_PEERS := $(if $(shell command -v $(AARCH64_CC) 2>/dev/null),$(BUILD)/tests/rss_touch-aarch64 $(BUILD)/tests/mem_phases-aarch64)
testprogs: $(BUILD)/odp $(TESTPROGS) $(AARCH64_PEERS)

$(BUILD)/tests/%-aarch64: tests/c/%.c
	@mkdir -p $(dir $@)
	$(AARCH64_CC) -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -static -o $@ $<

$(UNITTESTS): $(BUILD)/tests/%: tests/c/%.c $(BUILD)/libodp.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ODP_CFLAGS) -Isrc $(LDFLAGS) -o $@ $< $(BUILD)/libodp.a $(ODP_LDLIBS) $(LDLIBS)

# rss_touch is static: the peak-RSS oracle runs as a board's program would (no loader, any x86_64 host)
$(BUILD)/tests/rss_touch $(BUILD)/tests/mem_phases: PEER_LDFLAGS := -static
$(PEERS): $(BUILD)/tests/%: tests/c/%.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror $(PEER_LDFLAGS) -o $@ $<

# -rdynamic: the lazy modules use odp's core (waiting point, errors, binding helpers) from the executable.
$(BUILD)/odp: $(CORE_OBJS) Makefile
	$(CC) $(SAN) $(LDFLAGS) -rdynamic -o $@ $(CORE_OBJS) $(CORE_LDLIBS) $(LDLIBS)

.SECONDEXPANSION:
$(LAZY_SOS): $(BUILD)/lib/odp/%.so: $$(call lazy_objs,%) $$(foreach u,$$(LAZY_USES_%),$$(call lazy_core,$$(u))) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(SAN) $(LDFLAGS) -shared -o $@ $(filter %.o,$^) $(shell pkg-config --libs $(LAZY_PKGS_$*) 2>/dev/null) $(LDLIBS)

$(BUILD)/libodp.a: $(LIBOBJS)
	rm -f $@ && ar rcs $@ $^

# Objects are rebuilt when the compiler or its flags change (say -fPIC, or CFLAGS given on the command line).
FLAGS_STAMP := $(BUILD)/.cflags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(CFLAGS) $(SAN) -fPIC' | cmp -s - $@ || echo '$(CC) $(CFLAGS) $(SAN) -fPIC' > $@
FORCE:

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ODP_CFLAGS) -c -o $@ $<

deps:
	vendor/install-deps.sh build

# docs/api.md and docs/luals/odp_c.lua from their one declaration, docs/api/c_modules.lua
apidoc: $(BUILD)/odp
	$(BUILD)/odp run tools/apidoc.lua

test:
	tests/run.sh

ASAN_MAKE := BUILD=build-asan CC=clang CFLAGS="-O1 -g -fno-omit-frame-pointer" \
             SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
# disable_coredump=0: ASan's runtime sets a sanitized program's core limit to 0 at its start, so crash_test's
# fake runner (built with ASan here) would dump no core where the test asks the kernel for one
asan:
	ODP_BUILD=build-asan ODP_MAKEFLAGS='$(ASAN_MAKE)' \
	  ASAN_OPTIONS=detect_leaks=1:disable_coredump=0 UBSAN_OPTIONS=print_stacktrace=1 tests/run.sh

demo:
	scripts/demo_alif.sh

demo-host:
	scripts/demo.sh

demo-pi:
	scripts/demo_pi.sh

bench: all
	bench/run.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/odp
	install -m 0755 $(BUILD)/odp $(DESTDIR)$(PREFIX)/bin/odp
	install -d $(DESTDIR)$(PREFIX)/share/odp/helpers
	install -m 0755 $(HELPERS) $(DESTDIR)$(PREFIX)/share/odp/helpers/
	cp -R lua scripts devices $(DESTDIR)$(PREFIX)/share/odp/
	install -d $(DESTDIR)$(PREFIX)/lib/odp
	install -m 0644 $(LAZY_SOS) $(DESTDIR)$(PREFIX)/lib/odp/
	$(BUILD)/odp run tools/luac.lua --as $(abspath $(DESTDIR)$(PREFIX))=$(PREFIX) \
	  $(foreach f,$(LUAC_SRCS),$(abspath $(DESTDIR)$(PREFIX))/share/odp/$(f) $(DESTDIR)$(PREFIX)/lib/odp/luac/$(f:lua/%=%)c) \
	  $(foreach f,$(LUAC_SYSTEM),$(f) $(DESTDIR)$(PREFIX)/lib/odp/luac/system/$(notdir $(f))c)
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0644 $(BUILD)/odp.1 $(DESTDIR)$(PREFIX)/share/man/man1/odp.1

clean:
	rm -rf build build-asan

-include $(OBJS:.o=.d)
