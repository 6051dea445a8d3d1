#!/usr/bin/env bash
# The deterministic simulation over a large seed range, split across the
# machine's cores: scripts/sim_soak.sh BUILD_DIR FIRST COUNT.
# Each part prints its own summary line; the exit status is 1 when any
# seed found a violation. Replay one with: BUILD_DIR/tests/sim/sim_chain
# --seed N --verbose
set -euo pipefail

build=${1:?usage: sim_soak.sh BUILD_DIR FIRST COUNT}
first=${2:?usage: sim_soak.sh BUILD_DIR FIRST COUNT}
count=${3:?usage: sim_soak.sh BUILD_DIR FIRST COUNT}
bin="$build/tests/sim/sim_chain"
jobs=$(nproc)
per=$(( (count + jobs - 1) / jobs ))
pids=()
status=0

[ -x "$bin" ] || { echo "sim_soak: '$bin' is not built" >&2; exit 2; }
for ((j = 0; j < jobs; j++)); do
	start=$(( first + j * per ))
	n=$(( per < first + count - start ? per : first + count - start ))
	[ "$n" -gt 0 ] || break
	"$bin" --seeds "$start:$n" --show 0 > "$build/sim-soak-$j.log" 2>&1 &
	pids+=($!)
done
for j in "${!pids[@]}"; do
	wait "${pids[$j]}" || status=1
	tail -n 1 "$build/sim-soak-$j.log"
done
[ "$status" -eq 0 ] || echo "sim_soak: violations found; per-seed lines in $build/sim-soak-*.log"
exit "$status"
