# iot-operator: plain GNU make. Override anything in config.mak (untracked)
# or on the command line: make V=1, make check SANITIZE=1, make DEVELOPER=1.
-include config.mak

prefix ?= /usr/local
bindir ?= $(prefix)/bin
datadir ?= $(prefix)/share/iot-operator

CC ?= cc
CFLAGS ?= -O2 -g
WARNINGS = -std=c11 -Wall -Wextra -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes \
           -Wshadow -Wvla -Wwrite-strings -Wno-unused-parameter -Wpointer-arith \
           -Wundef -Wcast-align
# CI and DEVELOPER=1 turn warnings into errors.
ifneq ($(or $(DEVELOPER),$(filter true,$(CI))),)
WARNINGS += -Werror
endif

# Objects and binaries of a sanitizer build live apart, so that switching
# between the two never mixes objects.
ifdef SANITIZE
O ?= build/san
BIN ?= build/san/bin
CFLAGS += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
else
O ?= build
BIN ?= bin
endif

# Debian's libjq has no pkg-config file.
PKGS ?= libcurl yaml-0.1 openssl libmicrohttpd zlib
DEP_CFLAGS ?= $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
DEP_LIBS ?= $(shell pkg-config --libs $(PKGS) 2>/dev/null) -ljq -lonig -lm -lpthread
ALL_CFLAGS = $(WARNINGS) $(CFLAGS) -D_GNU_SOURCE -Ilib -Icmd $(DEP_CFLAGS)

ifndef V
QUIET_CC   = @echo '   CC  ' $@;
QUIET_LINK = @echo '   LINK' $@;
QUIET_AR   = @echo '   AR  ' $@;
endif

# One file per tool in cmd/; ksim is big enough for a folder of its own.
# cmd/tool.c is the tools' shared layer, not a tool.
SIMPLE_TOOLS := $(sort $(basename $(notdir $(filter-out cmd/tool.c,$(wildcard cmd/*.c)))))
KSIM_SRCS := $(wildcard cmd/ksim/*.c)
TOOLS := $(SIMPLE_TOOLS) $(if $(KSIM_SRCS),ksim)
PROGRAMS := $(addprefix $(BIN)/,$(TOOLS))

LIB_SRCS := $(wildcard lib/*.c)
LIB_OBJS := $(patsubst %.c,$(O)/%.o,$(LIB_SRCS))
LIB := $(O)/lib/libkop.a
TOOL_OBJ := $(O)/cmd/tool.o
TEST_TOOL := $(O)/t/test-tool
TEST_TOOL_SRCS := $(wildcard t/helper/*.c)

## all: build the tools into bin/ (the default)
all: $(PROGRAMS) $(TEST_TOOL)

# make help lists the lines that start with "## TARGET: what it does".
## help: list the targets
help:
	@sed -n 's/^## \([^:]*\): /\1\t/p' $(MAKEFILE_LIST) | awk -F '\t' '{ printf "  %-14s %s\n", $$1, $$2 }'

$(LIB): $(LIB_OBJS)
	$(QUIET_AR)rm -f $@ && $(AR) rcs $@ $^

$(O)/%.o: %.c $(O)/CFLAGS
	@mkdir -p $(dir $@)
	$(QUIET_CC)$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(addprefix $(BIN)/,$(SIMPLE_TOOLS)): $(BIN)/%: $(O)/cmd/%.o $(TOOL_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS)

$(BIN)/ksim: $(patsubst %.c,$(O)/%.o,$(KSIM_SRCS)) $(TOOL_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS)

$(TEST_TOOL): $(patsubst %.c,$(O)/%.o,$(TEST_TOOL_SRCS)) $(LIB)
	@mkdir -p $(dir $@)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS)

# Everything is rebuilt when the flags change (git's GIT-CFLAGS).
$(O)/CFLAGS: FORCE
	@mkdir -p $(O)
	@echo '$(CC) $(ALL_CFLAGS) $(LDFLAGS)' | cmp -s - $@ || echo '$(CC) $(ALL_CFLAGS) $(LDFLAGS)' >$@

-include $(shell find $(O) -name '*.d' 2>/dev/null)

# The Debian packages (idempotent): deps what the build and the demo need,
# deps-test that and what only the tests need (clang, valgrind, ...).
## deps: install the Debian packages the build and the demo need
deps:
	@scripts/deps.sh

## deps-test: install those and what only the tests need (clang, valgrind, ...)
deps-test:
	@scripts/deps.sh --test

PROVE ?= prove
PROVE_OPTS ?= -j2 --timer
# Every test script runs under a watchdog (t/watchdog.sh): one still
# running after TEST_TIMEOUT seconds is killed with everything it started,
# so a hang fails that script, named, instead of keeping prove waiting on a
# pipe nobody closes; ^C still stops the tests and what they started.
TEST_TIMEOUT ?= 900
export TEST_TIMEOUT
PROVE_EXEC = --exec t/watchdog.sh
T ?= $(sort $(wildcard t/t[0-9]*.sh))
# The tests find the tools through KOP_BIN; SANITIZE=1 runs the same tests
# on the sanitizer build.
## check: install what the tests need, build, run every test (SANITIZE=1: the ASan+UBSan build)
check: deps-test
	@$(MAKE) --no-print-directory all
	KOP_BIN=$(abspath $(BIN)) KOP_TEST_TOOL=$(abspath $(TEST_TOOL)) \
	  KOP_SANITIZE=$(if $(SANITIZE),1,) $(PROVE) $(PROVE_OPTS) $(PROVE_EXEC) $(T)

# A quick look at any one test: make test T=t/t1001-kwatch-basic.sh
## test: run the tests named by T (verbose), e.g. make test T=t/t0010-usage.sh
test: all
	KOP_BIN=$(abspath $(BIN)) KOP_TEST_TOOL=$(abspath $(TEST_TOOL)) $(PROVE) -v $(PROVE_EXEC) $(T)

## bench: the benchmarks (bench/run)
bench: deps
	@$(MAKE) --no-print-directory all
	KOP_BIN=$(abspath $(BIN)) bench/run

# The operator under faults (scripts/chaos.sh; CHAOS_N, CHAOS_SECONDS, ... there).
## chaos: the operator under faults (scripts/chaos.sh)
chaos: deps
	@$(MAKE) --no-print-directory all
	KOP_BIN=$(abspath $(BIN)) scripts/chaos.sh

# The operator for a long while: memory stays put (scripts/soak.sh; SOAK_N, SOAK_SECONDS, ... there).
## soak: the operator for a long while; its memory stays put (scripts/soak.sh)
soak: deps
	@$(MAKE) --no-print-directory all
	KOP_BIN=$(abspath $(BIN)) scripts/soak.sh

## demo: the operator and the example on a local simulated cluster (no kubectl needed)
demo: deps
	@$(MAKE) --no-print-directory all
	KOP_BIN=$(abspath $(BIN)) scripts/demo.sh

# Stops the ksim and iot-operator that make demo left running.
## demo-stop: stop what make demo left running
demo-stop:
	@scripts/demo.sh stop

# pipeline/iotservice/specgen.jq is generated from the spec schema
# (spec.jq) and committed; t2106 fails when it is out of date.
## pipeline-gen: regenerate pipeline/iotservice/specgen.jq from spec.jq
pipeline-gen:
	jq -n -r -L pipeline/lib -L pipeline/iotservice -f scripts/iotservice-specgen.jq >pipeline/iotservice/specgen.jq.tmp
	mv pipeline/iotservice/specgen.jq.tmp pipeline/iotservice/specgen.jq

## install: install the tools and pipeline/ under prefix (default /usr/local; DESTDIR too)
install: all
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(datadir)
	install -m 755 $(PROGRAMS) $(DESTDIR)$(bindir)
	cp -R pipeline $(DESTDIR)$(datadir)/

## clean: remove what the build and the tests left
clean:
	rm -rf build bin t/trash.* bench/results.json

FORCE:
.PHONY: all help deps deps-test check test bench chaos soak demo demo-stop install clean pipeline-gen FORCE
.DELETE_ON_ERROR:

# Fuzzing (clang's libFuzzer). Each t/fuzz/fuzz-NAME.c is a target built
# against the library sources with ASan+UBSan; seed corpora come from the
# test fixtures (t/fuzz/seeds.sh). make check runs each for a few seconds
# (t/t0090-fuzz.sh); `make fuzz-run FUZZ=jsonl SECONDS=600` runs one long.
FUZZ_CC ?= clang
FUZZ_FLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Ilib -Icmd $(DEP_CFLAGS)
FUZZ_TARGETS := $(patsubst t/fuzz/%.c,build/fuzz/%,$(wildcard t/fuzz/fuzz-*.c))
# The library is compiled once for every target (build/fuzz/libkop.a).
FUZZ_LIB := build/fuzz/libkop.a
FUZZ_LIB_OBJS := $(patsubst lib/%.c,build/fuzz/lib/%.o,$(LIB_SRCS))
## fuzz: build the libFuzzer targets (clang); make fuzz-run FUZZ=jsonl SECONDS=600 runs one
fuzz: $(FUZZ_TARGETS)
build/fuzz/lib/%.o: lib/%.c $(wildcard lib/*.h)
	@mkdir -p $(dir $@)
	$(QUIET_CC)$(FUZZ_CC) $(subst -fsanitize=fuzzer,-fsanitize=fuzzer-no-link,$(FUZZ_FLAGS)) -c -o $@ $<
$(FUZZ_LIB): $(FUZZ_LIB_OBJS)
	$(QUIET_AR)rm -f $@ && $(AR) rcs $@ $^
build/fuzz/fuzz-%: t/fuzz/fuzz-%.c $(FUZZ_LIB) $(wildcard lib/*.h t/fuzz/*.h)
	@mkdir -p $(dir $@)
	$(QUIET_LINK)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_LIB) $(DEP_LIBS)
fuzz-run: build/fuzz/fuzz-$(FUZZ)
	@mkdir -p build/fuzz/corpus-$(FUZZ)
	t/fuzz/seeds.sh $(FUZZ) build/fuzz/corpus-$(FUZZ)
	build/fuzz/fuzz-$(FUZZ) -max_total_time=$(or $(SECONDS),600) build/fuzz/corpus-$(FUZZ)
.PHONY: fuzz fuzz-run
