#!/bin/bash
# The randomized fault test (tests/integration/test_faults.py::test_soak_random)
# run RUNS times with fresh seeds, each run's daemon logs, writer log and
# pytest output kept under OUTDIR/runN (pytest's own temp dirs are pruned).
#
#   scripts/soak.sh [BUILD_DIR] [RUNS] [OUTDIR]
#       BUILD_DIR  build tree with stratad, strata, fault_driver (default build-asan)
#       RUNS       how many runs (default 1)
#       OUTDIR     default /tmp/strata-soak
#   Environment: STRATA_SOAK=1 (10 min a run; default here), STRATA_SOAK_SECONDS,
#   STRATA_SOAK_SEED (same seed every run), STRATA_SOAK_PACE (0.5: faults twice
#   as often), STOP_ON_FAIL=1 (stop at the first failing run).
# Prints one line per run (seed, result); exits 1 if any run failed.
set -u
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build-asan}" && pwd) || exit 2
RUNS=${2:-1}
OUT=${3:-/tmp/strata-soak}
PY=${PY:-/usr/bin/python3}
export STRATA_SOAK=${STRATA_SOAK:-1}
mkdir -p "$OUT"
bad=0
for i in $(seq 1 "$RUNS"); do
	rm -rf "$OUT/run$i"
	STRATA_BUILD=$BUILD "$PY" -m pytest -q -p no:cacheprovider --basetemp="$OUT/run$i" \
		tests/integration/test_faults.py -k soak -s >"$OUT/run$i.out" 2>&1
	rc=$?
	seed=$(grep -m1 -o 'seed [0-9]*' "$OUT/run$i.out" | cut -d' ' -f2)
	if [ $rc -eq 0 ]; then
		echo "run $i: seed ${seed:-?}: ok"
	else
		bad=1
		echo "run $i: seed ${seed:-?}: FAILED (rc $rc): $OUT/run$i.out, logs in $OUT/run$i"
		[ "${STOP_ON_FAIL:-0}" = 1 ] && break
	fi
done
exit $bad
