# stalenet build. Plain GNU make; every module is discovered by wildcard, so adding
# foo.h + foo.c to a module directory needs no change here.
#
#   make            build/stalenet, build/stalenet-node, build/stalenet-linkd
#   make check      every test (unit, netns as root, e2e, kernel backend in a VM, short fuzz,
#                   the short reliability campaign)
#   make bench      benchmarks (figures printed, nothing asserted on time) and a 2-minute soak
#   make campaign   the reliability campaign: 100 kill -9, node/linkd kills, full disk, 10-min soak
#   make demo       quick start: build, run scenarios/quickstart.yaml, plot it
#   make deps       install missing Debian packages (root), else print the command
#   make asan       tests under AddressSanitizer + UBSan
#   make check-warnings  every C file compiled at -O0..-O2, -Og, -Os and the asan flags (warnings only)
#   make fuzz       longer fuzz runs (FUZZ_SECONDS each)
#   make install    PREFIX=/usr/local DESTDIR=

PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
CC      ?= cc
FUZZ_SECONDS ?= 60
CAMPAIGN_KILLS ?= 100
CAMPAIGN_SOAK_SECONDS ?= 600
BENCH_SOAK_SECONDS ?= 120

DEB_PKGS := build-essential pkg-config libnl-route-3-dev libzmq3-dev libopenblas-dev libyaml-dev \
	libcriterion-dev zlib1g-dev libnetfilter-queue-dev libmnl-dev iptables iproute2 \
	dataset-fashion-mnist gnuplot-nox clang libclang-rt-14-dev libjansson-dev \
	openssh-server openssh-client libsqlite3-dev libzstd-dev libsodium-dev slurm-wlm munge python3
PKGS := libnl-route-3.0 libzmq openblas yaml-0.1 zlib libnetfilter_queue libmnl jansson sqlite3 libzstd libsodium

VERSION := 0.1.0
GIT_COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
	-Wno-missing-field-initializers
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
OPT     ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) -MMD -MP -I. $(PKG_CFLAGS)
# The release and commit are compiled into lib/version.o alone (lib/version.h), so a new
# commit rebuilds that one object, not the tree.
VERSION_DEFS := -DSTALENET_VERSION='"$(VERSION)"' -DSTALENET_COMMIT='"$(GIT_COMMIT)"'
LDLIBS  += $(PKG_LIBS) -lm -lpthread

MAINS    := orchestrator/main.c node/main.c netem/linkd_main.c
MOD_SRCS := $(filter-out $(MAINS),$(wildcard lib/*.c orchestrator/*.c node/*.c netem/*.c collectors/*.c sim/*.c))
MOD_OBJS := $(MOD_SRCS:%.c=$(BUILD)/%.o)
LIBA     := $(BUILD)/libstalenet.a

PROGS := $(BUILD)/stalenet $(BUILD)/stalenet-node $(BUILD)/stalenet-linkd

UNIT_TESTS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/test_*.c))
NETNS_TESTS := $(patsubst tests/netns/%.c,$(BUILD)/tests/netns/%,$(wildcard tests/netns/test_*.c))
E2E_TESTS   := $(patsubst tests/e2e/%.c,$(BUILD)/tests/e2e/%,$(wildcard tests/e2e/test_*.c))
MULTIHOST_TESTS := $(patsubst tests/multihost/%.c,$(BUILD)/tests/multihost/%,$(wildcard tests/multihost/test_*.c))
BENCHES     := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(wildcard tests/bench/bench_*.c))
FUZZERS     := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
TEST_SUPPORT := $(wildcard tests/support/*.c)

.PHONY: all deps check check-unit check-netns check-e2e check-multihost check-kernel check-fuzz check-headers \
	asan bench bench-multihost demo fuzz install clean campaign campaign-short
.DEFAULT_GOAL := all

all: deps-ok $(PROGS)

# --- dependencies ----------------------------------------------------------------------
# deps-ok is a stamp: the apt check runs once per build tree, not on every make call.
deps: 
	@$(MAKE) --no-print-directory -B deps-ok
deps-ok: $(BUILD)/.deps-ok
$(BUILD)/.deps-ok:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "deps: installing$$missing"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	  else \
	    echo "deps: missing Debian packages:$$missing"; \
	    echo "deps: run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi; mkdir -p $(BUILD) && touch $@
.PHONY: deps-ok

# --- build -----------------------------------------------------------------------------
# Stamps: a file holding what an object was compiled with, rewritten only when that changes,
# so a change of compiler or flags (OPT, CFLAGS, a package's cflags) rebuilds every object and
# a make with nothing changed rebuilds none. The commit has its own stamp, for lib/version.o.
FLAGS_STAMP  := $(BUILD)/.flags
COMMIT_STAMP := $(BUILD)/.commit
define write_stamp
	@mkdir -p $(dir $@)
	@printf '%s\n' '$(subst ','\'',$(1))' > $@.tmp; \
	if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
endef
$(FLAGS_STAMP): FORCE
	$(call write_stamp,$(CC) $(CFLAGS))
$(COMMIT_STAMP): FORCE
	$(call write_stamp,$(VERSION_DEFS))
.PHONY: FORCE
FORCE:

$(BUILD)/%.o: %.c $(FLAGS_STAMP) | deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(if $(filter $(BUILD)/lib/version.o,$@),$(VERSION_DEFS)) -c $< -o $@
$(BUILD)/lib/version.o: $(COMMIT_STAMP)

$(LIBA): $(MOD_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/stalenet: $(BUILD)/orchestrator/main.o $(LIBA)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/stalenet-node: $(BUILD)/node/main.o $(LIBA)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/stalenet-linkd: $(BUILD)/netem/linkd_main.o $(LIBA)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

TEST_SUPPORT_OBJS := $(TEST_SUPPORT:%.c=$(BUILD)/%.o)
CRIT_LIBS = $(shell pkg-config --libs criterion 2>/dev/null)
$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_SUPPORT_OBJS) $(LIBA)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(CRIT_LIBS)
$(BUILD)/bench/%: $(BUILD)/tests/bench/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# --- tests -----------------------------------------------------------------------------
# Every test binary runs even when an earlier one failed; the target fails at the end.
# Suites that measure time (links, engines, whole runs) run their tests one at a time (-j1):
# on two cores, parallel tests would measure each other.
# Each binary's wall time, and at the end the binaries that failed (the last lines of a long log).
define run_suite
	@failed=""; for t in $(1); do echo "== $$t"; s=$$(date +%s); \
	  $$t $(CRITERION_FLAGS) $(2) || failed="$$failed $$t"; \
	  echo "== $$t: $$(( $$(date +%s) - s )) s"; done; \
	  if [ -n "$$failed" ]; then echo "FAILED:$$failed"; exit 1; fi
endef

check: all $(UNIT_TESTS) $(NETNS_TESTS) $(E2E_TESTS) $(MULTIHOST_TESTS)
	@failed=""; \
	for s in check-unit check-netns check-e2e check-multihost check-kernel campaign-short \
	         check-fuzz check-headers; do \
	  t0=$$(date +%s); $(MAKE) --no-print-directory $$s || failed="$$failed $$s"; \
	  echo "== $$s: $$(( $$(date +%s) - t0 )) s"; done; \
	if [ -z "$$failed" ]; then echo "check: all suites passed"; else echo "check: FAILED:$$failed"; exit 1; fi

check-unit: all $(UNIT_TESTS)
	$(call run_suite,$(UNIT_TESTS))
check-netns: all $(NETNS_TESTS)
	$(call run_suite,$(NETNS_TESTS),-j1)
check-e2e: all $(E2E_TESTS)
	$(call run_suite,$(E2E_TESTS),-j1)
# Runs across hosts, on "hosts" made on this machine (tests/support/hostsim: namespaces with
# their own sshd). Root and openssh-server; skipped otherwise unless STALENET_TESTS_MUST_RUN=1.
check-multihost: all $(MULTIHOST_TESTS)
	$(call run_suite,$(MULTIHOST_TESTS),-j1)

# Kernel-backend tests: directly when this kernel has sch_netem, else inside the netem VM.
check-kernel: all
	@bash vagrant/check-kernel.sh $(BUILD)
KERNEL_TESTS := $(patsubst tests/kernel/%.c,$(BUILD)/tests/kernel/%,$(wildcard tests/kernel/test_*.c))
# Tests run the programs beside them (an agent's greeting carries the commit, which the test
# binary has too): building a test brings the programs up to date with it.
$(UNIT_TESTS) $(NETNS_TESTS) $(E2E_TESTS) $(MULTIHOST_TESTS) $(KERNEL_TESTS): | $(PROGS)
check-kernel: $(KERNEL_TESTS)

# The reliability campaign (tests/campaign, docs/reliability.md): kill -9 of the orchestrator
# at random instants then `stalenet cleanup`, kill -9 of a node and of stalenet-linkd, a full
# output file system, a soak. Root; skipped without it unless STALENET_TESTS_MUST_RUN=1.
# CAMPAIGN_SEED=N replays the kill instants of an earlier campaign.
campaign: all
	@CAMPAIGN_FULLFS_KB="$${CAMPAIGN_FULLFS_KB:-8 24 96}" bash tests/campaign/campaign.sh --build $(BUILD) \
	  --kills $(CAMPAIGN_KILLS) --soak $(CAMPAIGN_SOAK_SECONDS)
# The part of it that runs in `make check` (< 3 min): 10 kills, node and linkd kills, full disk.
campaign-short: all
	@bash tests/campaign/campaign.sh --build $(BUILD) --kills 10 --soak 0

# A short fuzz run of every target (libFuzzer through clang).
check-fuzz:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$${FUZZ_SHORT:-10}

# The modules are compiled once with the fuzzing instrumentation (fuzzer-no-link) into one
# archive; each target links only the objects it needs from it.
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -O1 -g -I. $(PKG_CFLAGS) -fno-sanitize-recover=undefined $(VERSION_DEFS)
FUZZ_OBJS := $(MOD_SRCS:%.c=$(BUILD)/fuzz/obj/%.o)
FUZZ_LIBA := $(BUILD)/fuzz/libstalenet-fuzz.a
$(BUILD)/fuzz/obj/%.o: %.c | deps-ok
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@
$(FUZZ_LIBA): $(FUZZ_OBJS)
	@rm -f $@ && ar rcs $@ $^
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIBA) | deps-ok
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_LIBA) $(LDLIBS)
fuzz: $(FUZZERS)
	@fail=0; for f in $(FUZZERS); do n=$$(basename $$f); c=$(BUILD)/fuzz/corpus-$$n; mkdir -p $$c; \
	  seeds=tests/fuzz/seeds/$${n#fuzz_}; \
	  echo "== $$f ($(FUZZ_SECONDS) s)"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=5 -rss_limit_mb=2048 $$c $$( [ -d $$seeds ] && echo $$seeds ) \
	     2>$(BUILD)/fuzz/$$n.log || { fail=1; tail -40 $(BUILD)/fuzz/$$n.log; }; \
	  grep -E '^Done|#[0-9]+.*DONE' $(BUILD)/fuzz/$$n.log | tail -1; done; exit $$fail

# Each header must compile on its own.
HEADERS := $(wildcard lib/*.h orchestrator/*.h node/*.h netem/*.h collectors/*.h sim/*.h tests/support/*.h)
check-headers: | deps-ok
	@fail=0; for h in $(HEADERS); do \
	  echo "#include \"$$h\"" | $(CC) -std=c11 -D_GNU_SOURCE $(WARN) -I. $(PKG_CFLAGS) -x c -fsyntax-only - \
	    || { echo "header $$h does not compile alone"; fail=1; }; done; \
	[ $$fail = 0 ] && echo "check-headers: $(words $(HEADERS)) headers compile alone"; exit $$fail

# Every C file (programs, modules, tests, benchmarks) compiled, not linked, at the other
# optimisation levels: gcc's flow-based warnings (format-truncation, maybe-uninitialized,
# array-bounds, restrict) change with the level, and `make asan` builds at -O1. Not part of
# `check` (it compiles the tree once per level). A level's words are joined by ':'. Not yet
# -O3: it still finds network.tcp's boolean in the scenario reader "maybe uninitialized".
WARN_OPTS ?= -O0 -O1 -Og -Os -O2 -O1:-fsanitize=address,undefined:-fno-omit-frame-pointer
WARN_SRCS = $(MOD_SRCS) $(MAINS) $(TEST_SUPPORT) \
	$(wildcard tests/unit/*.c tests/netns/*.c tests/e2e/*.c tests/multihost/*.c tests/kernel/*.c tests/bench/*.c)
.PHONY: check-warnings
check-warnings: | deps-ok
	@fail=0; for o in $(WARN_OPTS); do o=$$(echo "$$o" | tr : ' '); echo "== $$o"; \
	  for f in $(WARN_SRCS); do \
	    $(CC) -std=c11 -D_GNU_SOURCE $$o $(WARN) -I. $(PKG_CFLAGS) $(VERSION_DEFS) \
	      -c $$f -o /dev/null || { echo "$$f at $$o"; fail=1; }; \
	  done; done; \
	[ $$fail = 0 ] && echo "check-warnings: $(words $(WARN_SRCS)) files at $(words $(WARN_OPTS)) levels, no warning"; exit $$fail

# UBSan findings abort the test (a finding is a failure, not a log line); LSan ignores the one
# block Criterion's own runner leaks (tests/lsan.supp).
asan:
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
	  LDFLAGS="-fsanitize=address,undefined" check-unit

bench: all $(BENCHES)
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done
	@for s in $(wildcard tests/bench/*.sh); do echo "== $$s"; bash $$s $(BUILD) || exit 1; done
	@echo "== soak ($(BENCH_SOAK_SECONDS) s)"; bash tests/campaign/campaign.sh --build $(BUILD) --kills 0 --nodes 0 \
	  --fullfs 0 --soak $(BENCH_SOAK_SECONDS)

# Runs across hosts on test hosts made here: setup/teardown vs hosts, VXLAN vs local path,
# clock error, one host vs three, the largest run (docs/multihost.md). Root and openssh-server.
bench-multihost: all
	bash tests/bench/bench_multihost.sh $(BUILD)

# Not `demo: all`: the script re-runs itself under sudo first, and builds (and installs the
# packages) as root, so a fresh machine needs nothing typed before `make demo`.
demo:
	@bash scripts/demo.sh $(BUILD)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/stalenet/scenarios
	install -m 0755 $(PROGS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 scenarios/*.yaml $(DESTDIR)$(PREFIX)/share/stalenet/scenarios/

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
