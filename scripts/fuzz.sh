#!/usr/bin/env bash
# Builds each libFuzzer target in tests/fuzz/ and runs it briefly.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# SECONDS (default 20) is the time each target runs. TARGET names pick some
# targets (default: every tests/fuzz/fuzz_*.c). Each target is built with
# clang -fsanitize=fuzzer,address,undefined in a meson build in
# build-fuzz/ (FUZZ_BUILD overrides). It runs on a temporary
# copy of its seed corpus tests/fuzz/corpus/<target>/, so the checked-in
# seeds never grow. A crash, sanitizer report or leak fails the run; the
# input that did it is kept as build-fuzz/crashes/<target>-crash-<sha1>,
# and the message says how to replay it.
set -euo pipefail

secs=${1:-20}
shift || true
if ! [[ $secs =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
	echo "fuzz.sh: SECONDS must be a positive integer, not '$secs'" >&2
	exit 2
fi

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
CC=${CC:-clang}
out=${FUZZ_BUILD:-build-fuzz}

if ! command -v "$CC" >/dev/null; then
	echo "fuzz.sh: '$CC' not found; install clang (scripts/deps.sh does)" >&2
	exit 2
fi

# One meson build with clang, every object instrumented for coverage
# (-fsanitize=fuzzer-no-link) and ASan/UBSan; each target links what it
# calls from libstrata_internal.a (tests/fuzz/meson.build).
if [ ! -f "$out/build.ninja" ]; then
	CC="$CC" meson setup "$out" -Dfuzz=true -Db_sanitize=address,undefined \
		-Db_lundef=false -Dbuildtype=debugoptimized \
		-Dc_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=all -fno-omit-frame-pointer" \
		>/dev/null
fi

if [ $# -gt 0 ]; then
	targets=("$@")
else
	targets=()
	for f in tests/fuzz/fuzz_*.c; do
		targets+=("$(basename "$f" .c)")
	done
fi

mkdir -p "$out/crashes"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

failed=()
for t in "${targets[@]}"; do
	if [ ! -f "tests/fuzz/$t.c" ]; then
		echo "fuzz.sh: no target tests/fuzz/$t.c" >&2
		exit 2
	fi
	echo "== $t: build"
	ninja -C "$out" "tests/fuzz/$t" >/dev/null

	corpus="$work/$t"
	mkdir -p "$corpus"
	if [ -d "tests/fuzz/corpus/$t" ]; then
		cp -r "tests/fuzz/corpus/$t/." "$corpus/"
	fi
	echo "== $t: run ${secs}s on $(find "$corpus" -type f | wc -l) seed(s)"
	# -timeout: an input slower than 10 s is a hang, reported as a failure.
	set +e
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
	UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
		"$out/tests/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$out/crashes/$t-" \
		"$corpus" >"$work/$t.log" 2>&1
	rc=$?
	set -e
	grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' \
		"$work/$t.log" || true
	if [ $rc -ne 0 ]; then
		tail -n 60 "$work/$t.log"
		echo "== $t: FAILED (exit $rc); inputs kept in $out/crashes/:" >&2
		for f in "$out/crashes/$t-"*; do
			if [ -e "$f" ]; then echo "   $f" >&2; fi
		done
		echo "   replay: $out/tests/fuzz/$t $out/crashes/<file>" >&2
		failed+=("$t")
	else
		echo "== $t: ok"
	fi
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz.sh: FAILED: ${failed[*]}" >&2
	exit 1
fi
echo "fuzz.sh: all ${#targets[@]} target(s) ran ${secs}s without a crash"
