#!/usr/bin/env bash
# The main job, end to end on this machine: 'strata demo' starts a local
# cluster (3 storage daemons, R=3, a mem daemon, a compute daemon with 4
# GPUs), composes a job's slice (2 GPUs + a 2 GiB volume + 256 MiB of
# pooled memory) through the composer's API, copies a generated training
# dataset into the volume with 'strata put' as the job, reads it back
# shuffled through the batch ring, checks every file's CRC32C, prints
# throughput and latency and releases the slice (docs/demo.md);
# then a short training-I/O run (accelerator utilization) and a checkpoint
# save/restore (the async save's training stall).
#
# usage: scripts/demo.sh [BUILD_DIR] [-- DEMO_ARGS...]   (default: ./build)
# The cluster is always stopped and the scratch dir removed, on success,
# failure or Ctrl-C. Exits non-zero when the demo fails.
set -uo pipefail

BUILD=${1:-./build}
shift $(( $# > 0 ? 1 : 0 ))
[ "${1:-}" = "--" ] && shift
STRATA="$BUILD/src/cli/strata"

if [ ! -x "$STRATA" ]; then
	echo "demo: '$STRATA' not found; build first ('make build')" >&2
	exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/strata-demo.XXXXXX") || exit 1
DEMO_PID=

# shellcheck disable=SC2317  # reached through the trap
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	# The demo stops its own cluster; this covers a demo that was killed.
	if [ -n "$DEMO_PID" ] && kill -0 "$DEMO_PID" 2>/dev/null; then
		kill -TERM "$DEMO_PID" 2>/dev/null
		wait "$DEMO_PID" 2>/dev/null
	fi
	if [ -f "$WORK/cluster/cluster.json" ]; then
		echo "demo: stopping the cluster left in $WORK/cluster"
		"$STRATA" local down --dir "$WORK/cluster" || rc=1
	fi
	rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT
trap 'echo "demo: interrupted" >&2; exit 130' INT TERM

echo "demo: build $BUILD, scratch dir $WORK"
echo "demo: running $STRATA demo --dir $WORK $*"
# In the background so a Ctrl-C reaches the trap at once; the demo itself
# also stops at its next step on SIGINT/SIGTERM and cleans up.
"$STRATA" demo --dir "$WORK" "$@" &
DEMO_PID=$!
wait "$DEMO_PID"
rc=$?
DEMO_PID=
if [ "$rc" -ne 0 ]; then
	echo "demo: FAILED (exit $rc)" >&2
	exit "$rc"
fi

# A short training-I/O run (MLPerf-Storage-style, emulated accelerators;
# prints accelerator utilization) and a checkpoint save/restore (prints the
# async save's training stall beside the synchronous save). Each starts
# and stops its own local cluster.
echo "demo: training I/O: $STRATA bench train --workload resnet50 --seconds 1 --max-accel 4"
"$STRATA" bench train --workload resnet50 --seconds 1 --max-accel 4 || {
	echo "demo: FAILED (bench train)" >&2
	exit 1
}
echo "demo: checkpoint: $STRATA bench ckpt --hidden 512 --layers 2 --vocab 4000 --repeat 1"
"$STRATA" bench ckpt --hidden 512 --layers 2 --vocab 4000 --repeat 1 || {
	echo "demo: FAILED (bench ckpt)" >&2
	exit 1
}
echo "demo: passed"
exit 0
