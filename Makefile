# odp: one binary (build/odp) embedding Lua 5.4 + lpeg; dependencies from Debian packages (vendor/).
#   make            build build/odp
#   make test       install what the tests need, build, run every test (ends with "N passed, N failed")
#   make asan       the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make demo       the main job on the no-hardware default: the Alif E8 flow on its QEMU twin
#   make demo-host  the host flow: a runner on this machine
#   make install PREFIX=/usr/local    make deps    make clean
PREFIX  ?= /usr/local
BUILD   ?= build
CC      ?= cc
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.1.0)
PKGS    := lua5.4 libssh2 libusb-1.0 libserialport libedit libcrypto
LPEG_A  := $(firstword $(wildcard /usr/lib/*/liblua5.4-lpeg.a /usr/lib/liblua5.4-lpeg.a))

# CFLAGS/LDFLAGS are the user's (optimisation, debug); what odp needs is in ODP_* and always applies.
# SAN: sanitizer flags for both compiling and linking (make asan).
CFLAGS  ?= -O2 -g
SAN     ?=
ODP_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -MMD -MP $(SAN) \
           $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
           -DODP_VERSION='"$(VERSION)"' -DODP_DATADIR='"$(PREFIX)/share/odp"'
ODP_LDLIBS := $(LPEG_A) $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -ldl

SRCS    := $(wildcard src/*.c src/*/*.c)
OBJS    := $(SRCS:%.c=$(BUILD)/%.o)
# Everything but main.o: what C unit tests and fuzz targets link against.
LIBOBJS := $(filter-out $(BUILD)/src/main.o,$(OBJS))

# Test programs: tests/c/*_test.c are unit tests linked with odp's C cores (sanitized under make asan);
# the other tests/c/*.c are peers standing in for devices' programs (built plain: they are not odp).
UNITTESTS := $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(wildcard tests/c/*_test.c))
PEERS     := $(filter-out $(UNITTESTS),$(patsubst tests/c/%.c,$(BUILD)/tests/%,$(wildcard tests/c/*.c)))
TESTPROGS := $(UNITTESTS) $(PEERS)

# odp-rusage: a tiny static helper pushed to boards (tools/odp-rusage.c); never linked into odp.
# aarch64 is built when Debian's gcc-aarch64-linux-gnu is installed.
HELPER_CC     ?= cc
HELPER_CFLAGS := -std=c11 -O2 -Wall -Wextra -Werror -static
AARCH64_CC    ?= aarch64-linux-gnu-gcc
HELPERS       := $(BUILD)/odp-rusage-x86_64 \
                 $(if $(shell command -v $(AARCH64_CC) 2>/dev/null),$(BUILD)/odp-rusage-aarch64)

.PHONY: all test asan demo demo-host install clean deps bench testprogs helpers
all: $(BUILD)/odp helpers

helpers: $(HELPERS)

$(BUILD)/odp-rusage-x86_64: tools/odp-rusage.c
	@mkdir -p $(dir $@)
	$(HELPER_CC) $(HELPER_CFLAGS) -o $@ $<

$(BUILD)/odp-rusage-aarch64: tools/odp-rusage.c
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(HELPER_CFLAGS) -o $@ $<

testprogs: $(BUILD)/odp $(TESTPROGS)

$(UNITTESTS): $(BUILD)/tests/%: tests/c/%.c $(BUILD)/libodp.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ODP_CFLAGS) -Isrc $(LDFLAGS) -o $@ $< $(BUILD)/libodp.a $(ODP_LDLIBS) $(LDLIBS)

# rss_touch is static: the peak-RSS oracle runs as a board's program would (no loader, any x86_64 host)
$(BUILD)/tests/rss_touch: PEER_LDFLAGS := -static
$(PEERS): $(BUILD)/tests/%: tests/c/%.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror $(PEER_LDFLAGS) -o $@ $<

$(BUILD)/odp: $(OBJS)
	$(CC) $(SAN) $(LDFLAGS) -o $@ $^ $(ODP_LDLIBS) $(LDLIBS)

$(BUILD)/libodp.a: $(LIBOBJS)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ODP_CFLAGS) -c -o $@ $<

deps:
	vendor/install-deps.sh build

test:
	tests/run.sh

ASAN_MAKE := BUILD=build-asan CC=clang CFLAGS="-O1 -g -fno-omit-frame-pointer" \
             SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
asan:
	ODP_BUILD=build-asan ODP_MAKEFLAGS='$(ASAN_MAKE)' \
	  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 tests/run.sh

demo:
	scripts/demo_alif.sh

demo-host:
	scripts/demo.sh

bench: all
	bench/run.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/odp
	install -m 0755 $(BUILD)/odp $(DESTDIR)$(PREFIX)/bin/odp
	install -d $(DESTDIR)$(PREFIX)/share/odp/helpers
	install -m 0755 $(HELPERS) $(DESTDIR)$(PREFIX)/share/odp/helpers/
	cp -R lua scripts devices $(DESTDIR)$(PREFIX)/share/odp/

clean:
	rm -rf build build-asan

-include $(OBJS:.o=.d)
