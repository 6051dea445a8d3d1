#!/usr/bin/env bash
# Runs every benchmark against the build in $1 (default: build); each
# prints its figures beside a baseline measured in the same run. Copy the
# output into bench/RESULTS.md with this command line.
set -euo pipefail
BUILD=${1:-build}
STRATA="$BUILD/src/cli/strata"
SECONDS_PER_TEST=${BENCH_SECONDS:-3}
echo "== $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), $(nproc) cores"
echo "== strata bench rpc --seconds $SECONDS_PER_TEST"
"$STRATA" bench rpc --seconds "$SECONDS_PER_TEST"
echo "== strata bench chunk --seconds $SECONDS_PER_TEST"
"$STRATA" bench chunk --seconds "$SECONDS_PER_TEST"
# 64 MiB files: 4 files x 3 replicas stay in the page cache even where the
# kernel pages out memory idle for seconds (DAMON; see bench/RESULTS.md).
echo "== strata bench io --seconds $SECONDS_PER_TEST --file-mib 64"
"$STRATA" bench io --seconds "$SECONDS_PER_TEST" --file-mib 64
echo "== strata bench meta --seconds $SECONDS_PER_TEST"
"$STRATA" bench meta --seconds "$SECONDS_PER_TEST"
echo "== strata bench train --workload all"
"$STRATA" bench train --workload all
echo "== strata bench ckpt"
"$STRATA" bench ckpt
echo "== strata bench mem"
"$STRATA" bench mem
echo "== strata bench compose"
"$STRATA" bench compose
if [ -x bench/fuse_bench.sh ]; then
	echo "== bench/fuse_bench.sh $BUILD"
	bench/fuse_bench.sh "$BUILD"
fi
