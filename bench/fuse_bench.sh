#!/usr/bin/env bash
# FUSE benchmark: fio through a strata-fuse mount of a fresh 'strata local
# up' cluster (3 storage daemons, R=3), each job beside the same job on a
# local directory of the same disk and on MooseFS (master and 3
# chunkservers, goal 3, in network namespaces: bench/moosefs.sh), in the
# same run; prints a Markdown table with the ratios (FUSE / local, FUSE /
# MooseFS).
#
#   bench/fuse_bench.sh [BUILD_DIR]        (default: build)
#   env: SIZE (file size, default 1G), RUNTIME (random-read seconds, 20),
#        FILES (small files, 2000), WORK (scratch dir, default mktemp),
#        FUSE_FLAGS (extra strata-fuse flags), MOOSEFS (0: leave MooseFS
#        out; else it is installed from Debian when missing and running as
#        root, and its columns say why when it cannot run), MFS_NET,
#        MFS_WAIT (see bench/moosefs.sh)
#
# Jobs: 1 MiB sequential write (psync, end_fsync) and read; 4 KiB and
# 128 KiB random reads (psync, 4 jobs, time based); small files: create
# (4 KiB each), stat, read, unlink rates of one thread.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
[[ $BUILD = /* ]] || BUILD=$REPO/$BUILD
SIZE=${SIZE:-1G}
RUNTIME=${RUNTIME:-20}
FILES=${FILES:-2000}
STRATA=$BUILD/src/cli/strata
FUSE=$BUILD/src/fuse/strata-fuse
export STRATA_STRATAD=$BUILD/src/stratad/stratad

for t in "$STRATA" "$FUSE" "$STRATA_STRATAD"; do
	[ -x "$t" ] || { echo "fuse_bench: '$t' missing: build first (make build)" >&2; exit 1; }
done
command -v fio >/dev/null || { echo "fuse_bench: fio missing (apt-get install fio)" >&2; exit 1; }
[ -e /dev/fuse ] || { echo "fuse_bench: /dev/fuse missing" >&2; exit 1; }

WORK=${WORK:-$(mktemp -d /tmp/strata-fuse-bench.XXXXXX)}
MNT=$WORK/mnt
LOCAL=$WORK/local
MFSMNT=$WORK/mfsmnt
mkdir -p "$MNT" "$LOCAL"
# shellcheck source=bench/moosefs.sh
. "$REPO/bench/moosefs.sh"

cleanup() {
	mfs_down
	fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true
	"$STRATA" local down --dir "$WORK/cluster" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The local directory's reads come from the page cache; the storage
# daemons serve theirs from it too (writes stay O_DIRECT).
"$STRATA" local up --dir "$WORK/cluster" --storage 3 \
	--daemon-flags "--storage.buffered_reads=true --node.log_level=warn" >/dev/null
MGMT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mgmt"])' \
	"$WORK/cluster/cluster.json")
# 'local up' clusters refuse clients without a credential: its admin token
export STRATA_TOKEN_FILE=$WORK/cluster/admin.token
# shellcheck disable=SC2086
if ! "$FUSE" "$MNT" --mgmt "$MGMT" --log "$WORK/fuse.log" ${FUSE_FLAGS:-}; then
	echo "fuse_bench: strata-fuse did not mount; last lines of '$WORK/fuse.log':" >&2
	tail -n 15 "$WORK/fuse.log" >&2
	exit 1
fi

SIDES="local fuse"
if [ "${MOOSEFS:-1}" = 0 ]; then
	MFS_WHY="left out (MOOSEFS=0)"
elif mfs_up "$WORK/moosefs" "$MFSMNT"; then
	SIDES="local fuse mfs"
fi

# fio_bw DIR NAME ARGS... -> bandwidth in MiB/s (read + write)
fio_bw() {
	local dir=$1 name=$2
	shift 2
	fio --name="$name" --directory="$dir" --filename="$name.dat" --ioengine=psync \
		--output-format=json "$@" |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"]
print("%.1f" % (sum(x["read"]["bw_bytes"] + x["write"]["bw_bytes"] for x in j) / 1048576))'
}

# fio_iops DIR NAME ARGS... -> IOPS (reads)
fio_iops() {
	local dir=$1 name=$2
	shift 2
	fio --name="$name" --directory="$dir" --filename="$name.dat" --ioengine=psync \
		--output-format=json --group_reporting "$@" |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"]
print("%.0f" % sum(x["read"]["iops"] for x in j))'
}

small_files() {
	python3 - "$1" "$FILES" <<'EOF'
import os, sys, time
d = os.path.join(sys.argv[1], "small")
n = int(sys.argv[2])
os.mkdir(d)
data = b"s" * 4096
names = [os.path.join(d, "f%05d" % i) for i in range(n)]
out = []
t = time.monotonic()
for p in names:
    with open(p, "wb") as f:
        f.write(data)
out.append(n / (time.monotonic() - t))
t = time.monotonic()
for p in names:
    os.stat(p)
out.append(n / (time.monotonic() - t))
t = time.monotonic()
for p in names:
    with open(p, "rb") as f:
        f.read()
out.append(n / (time.monotonic() - t))
t = time.monotonic()
for p in names:
    os.unlink(p)
out.append(n / (time.monotonic() - t))
os.rmdir(d)
print(" ".join("%.0f" % x for x in out))
EOF
}

declare -A R
for side in $SIDES; do
	case $side in
	local) dir=$LOCAL ;;
	fuse) dir=$MNT ;;
	mfs) dir=$MFSMNT ;;
	esac
	R[$side,sw]=$(fio_bw "$dir" seq --rw=write --bs=1M --size="$SIZE" --end_fsync=1)
	R[$side,sr]=$(fio_bw "$dir" seq --rw=read --bs=1M --size="$SIZE")
	R[$side,r4]=$(fio_iops "$dir" seq --rw=randread --bs=4k --size="$SIZE" --numjobs=4 \
		--time_based --runtime="$RUNTIME")
	R[$side,r128]=$(fio_iops "$dir" seq --rw=randread --bs=128k --size="$SIZE" --numjobs=4 \
		--time_based --runtime="$RUNTIME")
	rm -f "$dir/seq.dat"
	read -r c s r u < <(small_files "$dir")
	R[$side,fc]=$c R[$side,fs]=$s R[$side,fr]=$r R[$side,fu]=$u
done

ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) / float(sys.argv[1])))" "$1" "$2"; }

[[ $SIDES = *mfs* ]] || echo "MooseFS: $MFS_WHY"
echo "| job | local dir | strata-fuse | strata/local | MooseFS | strata/MooseFS |"
echo "|---|---|---|---|---|---|"
row() {
	local m="n/a | n/a"
	[[ $SIDES = *mfs* ]] && m="${R[mfs,$2]} $3 | $(ratio "${R[mfs,$2]}" "${R[fuse,$2]}")"
	echo "| $1 | ${R[local,$2]} $3 | ${R[fuse,$2]} $3 | $(ratio "${R[local,$2]}" "${R[fuse,$2]}") | $m |"
}
row "1 MiB sequential write (size $SIZE, end_fsync)" sw MiB/s
row "1 MiB sequential read" sr MiB/s
row "4 KiB random read (4 jobs, ${RUNTIME} s)" r4 IOPS
row "128 KiB random read (4 jobs, ${RUNTIME} s)" r128 IOPS
row "small files: create 4 KiB ($FILES)" fc files/s
row "small files: stat" fs files/s
row "small files: read" fr files/s
row "small files: unlink" fu files/s
