# Strata: the commands a newcomer can guess. Each target installs what it
# needs first (scripts/deps.sh, a no-op when everything is present).
#
#   make build   release-ish build in build/
#   make test    ASan+UBSan build in build-asan/, unit + sim + integration tests
#   make sim     the deterministic simulation's 10,000 seeds (tests/sim/)
#   make demo    the main job on the embedded default (one machine, loopback)
#   make bench   benchmarks, each beside its baseline (see bench/RESULTS.md)
#   make fuzz    libFuzzer targets, briefly (FUZZ_SECONDS each)
#   make soak    the long randomized fault tests (data path and control plane), and
#                SIM_SOAK_SEEDS seeds of the simulation
#   make install build/ and install it under PREFIX (default /usr/local), staged
#                under DESTDIR when set: stratad, strata, strata-fuse, libstrata
#                with its headers and strata.pc, the systemd unit
#   make deb     Debian packages (dpkg-buildpackage -us -uc -b, tests skipped:
#                make test runs them) of a copy of the tree, into DEB_OUT
#                (default build-deb/): strata, libstrata0, libstrata-dev,
#                python3-strata
#   make clean

PY ?= /usr/bin/python3
FUZZ_SECONDS ?= 20
BUILD ?= build
ASAN_BUILD ?= build-asan
SIM_SOAK_SEEDS ?= 200000
PREFIX ?= /usr/local
DEB_OUT ?= build-deb
DESTDIR ?=

.PHONY: all deps build test unit sim integration demo bench fuzz soak install deb clean

all: build

deps:
	@./scripts/deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) --buildtype=debugoptimized >/dev/null

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) --buildtype=debug -Db_sanitize=address,undefined \
		-Db_lundef=false >/dev/null

asan-build: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)

unit: asan-build
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		meson test -C $(ASAN_BUILD) --suite unit --print-errorlogs

sim: asan-build
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		meson test -C $(ASAN_BUILD) --suite sim --print-errorlogs

integration: asan-build
	STRATA_BUILD=$(abspath $(ASAN_BUILD)) $(PY) -m pytest -q -p no:cacheprovider \
		tests/integration

# Unit tests first; then the integration tests, with the simulation's
# 10,000 seeds running beside them at the lowest CPU priority (pure CPU,
# it fills the time the integration tests spend waiting on daemons, which
# keeps make test well inside 20 minutes on 2 cores). The simulation's
# output is in $(ASAN_BUILD)/sim.out, shown whole when it fails; its
# one-line result comes after pytest's summary. Either failing fails.
test: asan-build
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		meson test -C $(ASAN_BUILD) --suite unit --print-errorlogs
	@rm -f $(ASAN_BUILD)/sim.rc; \
	( UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 nice -n 19 \
		meson test -C $(ASAN_BUILD) --suite sim --print-errorlogs --no-rebuild \
		--logbase sim --timeout-multiplier 6 >$(ASAN_BUILD)/sim.out 2>&1; \
		echo $$? >$(ASAN_BUILD)/sim.rc ) & \
	STRATA_BUILD=$(abspath $(ASAN_BUILD)) $(PY) -m pytest -q -p no:cacheprovider \
		--durations=20 tests/integration; rc=$$?; \
	wait; \
	if [ "$$(cat $(ASAN_BUILD)/sim.rc 2>/dev/null)" != 0 ]; then \
		cat $(ASAN_BUILD)/sim.out; \
		echo "make test: the simulation failed (above; $(ASAN_BUILD)/meson-logs/sim.txt)"; \
		exit 1; \
	fi; \
	echo "simulation (beside the integration tests): $$(grep -E '^(Ok|Fail|Timeout): ' \
		$(ASAN_BUILD)/sim.out | tr -s ' ' | paste -sd' ' | sed 's/  */ /g; s/ $$//')"; \
	exit $$rc

demo: build
	./scripts/demo.sh $(BUILD)

bench: build
	./scripts/bench.sh $(BUILD)

fuzz: deps
	./scripts/fuzz.sh $(FUZZ_SECONDS)

soak: asan-build
	STRATA_BUILD=$(abspath $(ASAN_BUILD)) STRATA_SOAK=1 $(PY) -m pytest -q \
		-p no:cacheprovider tests/integration -k soak
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		./scripts/sim_soak.sh $(ASAN_BUILD) 0 $(SIM_SOAK_SEEDS)

# meson's own install (each target's install: in meson.build); the prefix
# is set on build/ first, so the unit's paths name it.
install: deps $(BUILD)/build.ninja
	meson configure $(BUILD) -Dprefix=$(abspath $(PREFIX)) >/dev/null
	ninja -C $(BUILD)
	meson install -C $(BUILD) --no-rebuild $(if $(DESTDIR),--destdir "$(abspath $(DESTDIR))")

# dpkg-buildpackage writes its packages beside the tree it builds: it runs
# on a copy in DEB_OUT/src (the files git tracks or would, so no build
# directory goes in), and the .deb files land in DEB_OUT.
deb: deps
	rm -rf $(DEB_OUT)/src && mkdir -p $(DEB_OUT)/src
	rm -f $(DEB_OUT)/*.deb $(DEB_OUT)/*.buildinfo $(DEB_OUT)/*.changes
	git ls-files -z --cached --others --exclude-standard | \
		tar --null -T - --ignore-failed-read -cf - | tar -C $(DEB_OUT)/src -xf -
	cd $(DEB_OUT)/src && DEB_BUILD_OPTIONS="nocheck $(DEB_BUILD_OPTIONS)" \
		dpkg-buildpackage -us -uc -b
	rm -rf $(DEB_OUT)/src
	@ls $(DEB_OUT)/*.deb

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz $(DEB_OUT)
