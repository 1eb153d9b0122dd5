# odp: one binary (build/odp) embedding Lua 5.4 + lpeg; dependencies from Debian packages (vendor/).
#   make            build build/odp
#   make test       install what the tests need, build, run every test (ends with "N passed, N failed")
#   make asan       the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make demo       the main job on the no-hardware default, end to end
#   make install PREFIX=/usr/local    make deps    make clean
PREFIX  ?= /usr/local
BUILD   ?= build
CC      ?= cc
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.1.0)
PKGS    := lua5.4 libssh2 libusb-1.0 libserialport libedit libcrypto
LPEG_A  := $(firstword $(wildcard /usr/lib/*/liblua5.4-lpeg.a /usr/lib/liblua5.4-lpeg.a))

CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -MMD -MP \
           $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
           -DODP_VERSION='"$(VERSION)"' -DODP_DATADIR='"$(PREFIX)/share/odp"'
LDLIBS  += $(LPEG_A) $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -ldl

SRCS    := $(wildcard src/*.c src/*/*.c)
OBJS    := $(SRCS:%.c=$(BUILD)/%.o)
# Everything but main.o: what C unit tests and fuzz targets link against.
LIBOBJS := $(filter-out $(BUILD)/src/main.o,$(OBJS))

# Test programs: tests/c/*.c, each linked with odp's C cores (unit tests end in _test).
TESTPROGS := $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(wildcard tests/c/*.c))

.PHONY: all test asan demo install clean deps bench testprogs
all: $(BUILD)/odp

testprogs: $(BUILD)/odp $(TESTPROGS)

$(BUILD)/tests/%: tests/c/%.c $(BUILD)/libodp.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc $(LDFLAGS) -o $@ $< $(BUILD)/libodp.a $(LDLIBS)

$(BUILD)/odp: $(OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libodp.a: $(LIBOBJS)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

deps:
	vendor/install-deps.sh build

test:
	tests/run.sh

asan:
	$(MAKE) BUILD=build-asan CC=clang \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  LDFLAGS="-fsanitize=address,undefined" all
	ODP_BUILD=build-asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 tests/run.sh

demo: all
	scripts/demo.sh

bench: all
	bench/run.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/odp
	install -m 0755 $(BUILD)/odp $(DESTDIR)$(PREFIX)/bin/odp
	cp -R lua scripts devices $(DESTDIR)$(PREFIX)/share/odp/

clean:
	rm -rf build build-asan

-include $(OBJS:.o=.d)
