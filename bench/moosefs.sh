# shellcheck shell=bash
# shellcheck disable=SC2034 # MFS_WHY is read by the script that sources this one
# MooseFS beside strata-fuse: a master and 3 chunkservers (goal 3), each in
# its own network namespace on a private bridge, mounted with mfsmount in
# the root namespace. Sourced by bench/fuse_bench.sh; not run on its own.
# MooseFS refuses chunkservers on loopback addresses, hence the namespaces.
#
#   mfs_up DIR MNT   set up under DIR (data, configs, logs), mount on MNT;
#                    returns 0, or 1 with the reason in MFS_WHY (and the
#                    failing daemon's log tail on stderr)
#   mfs_down         stops the mount, daemons, namespaces and bridge; safe
#                    to call at any point, more than once (use in a trap)
#
# env: MFS_NET (first three octets of the private /24, default 10.99.0),
#      MFS_INSTALL (1: apt-get install the Debian packages when missing and
#      running as root; default 1), MFS_WAIT (seconds each step may take,
#      default 30)
#
# Traffic stays on the bridge: the root namespace holds MFS_NET.1 on it
# and no route leads elsewhere; the namespaces have no default route.

MFS_NET=${MFS_NET:-10.99.0}
MFS_INSTALL=${MFS_INSTALL:-1}
MFS_WAIT=${MFS_WAIT:-30}
MFS_ID=$(($$ % 100000))
MFS_BR=mfsbr$MFS_ID
MFS_NS=()
MFS_PIDS=()
MFS_MNT=
MFS_DIR=
MFS_WHY=

# mfs_install: the Debian 12 packages moosefs-master, -chunkserver, -client
mfs_install() {
	local t missing=0
	for t in mfsmaster mfschunkserver mfsmount mfssetgoal; do
		command -v "$t" >/dev/null || missing=1
	done
	[ $missing = 0 ] && return 0
	if [ "$MFS_INSTALL" != 1 ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
		MFS_WHY="moosefs not installed (apt-get install moosefs-master moosefs-chunkserver moosefs-client, as root)"
		return 1
	fi
	echo "fuse_bench: installing moosefs-master moosefs-chunkserver moosefs-client" >&2
	if ! timeout 600 env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends moosefs-master moosefs-chunkserver moosefs-client \
		>"$MFS_DIR/apt.log" 2>&1; then
		tail -n 5 "$MFS_DIR/apt.log" >&2
		MFS_WHY="apt-get install of moosefs failed"
		return 1
	fi
}

# mfs_wait SECONDS CMD...: polls CMD every 0.2 s until it succeeds (0);
# gives up (1) after SECONDS or as soon as CMD returns 2
mfs_wait() {
	local deadline=$((SECONDS + $1)) rc
	shift
	while :; do
		rc=0
		"$@" >/dev/null 2>&1 || rc=$?
		[ $rc = 0 ] && return 0
		{ [ $rc = 2 ] || [ $SECONDS -ge $deadline ]; } && return 1
		sleep 0.2
	done
}

# mfs_fail WHY LOG: records the reason and prints the log's tail
mfs_fail() {
	MFS_WHY=$1
	echo "fuse_bench: moosefs: $1; last lines of '$2':" >&2
	tail -n 15 "$2" >&2 2>/dev/null || true
	return 1
}

# mfs_ns NAME ADDR: a namespace joined to the bridge by a veth pair
mfs_ns() {
	local ns=$1 addr=$2 i=${#MFS_NS[@]}
	ip netns add "$ns" || return 1
	MFS_NS+=("$ns")
	ip link add "mfs${MFS_ID}h$i" type veth peer name eth0 netns "$ns" || return 1
	ip link set "mfs${MFS_ID}h$i" master "$MFS_BR" up || return 1
	ip -n "$ns" addr add "$addr/24" dev eth0 || return 1
	ip -n "$ns" link set eth0 up || return 1
	ip -n "$ns" link set lo up
}

# mfs_port_up PID NS ADDR PORT: something listens on ADDR:PORT inside NS;
# 2 when process PID (the daemon) has exited
mfs_port_up() {
	kill -0 "$1" 2>/dev/null || return 2
	ip netns exec "$2" ss -Htln "src $3:$4" | grep -q .
}

# mfs_daemon_up WHAT PID NS ADDR PORT LOG: waits for a daemon to listen
mfs_daemon_up() {
	mfs_wait "$MFS_WAIT" mfs_port_up "$2" "$3" "$4" "$5" && return 0
	if kill -0 "$2" 2>/dev/null; then
		mfs_fail "$1 did not listen on '$4:$5' within $MFS_WAIT s" "$6"
	else
		mfs_fail "$1 exited before listening on '$4:$5'" "$6"
	fi
}

# mfs_cs_count NS N: N chunkservers hold a connection to the master
mfs_cs_count() {
	[ "$(ip netns exec "$1" ss -Htn state established '( sport = :9420 )' | wc -l)" -ge "$2" ]
}

# mfs_mounted PID MNT: MNT is a mount point; 2 when PID (mfsmount) exited
mfs_mounted() {
	kill -0 "$1" 2>/dev/null || return 2
	mountpoint -q "$2"
}

# mfs_probe MNT: a fresh file's chunk has 3 valid copies (chunkservers
# register with no space and report their disks a moment later)
mfs_probe() {
	rm -f "$1/.probe"
	echo probe >"$1/.probe" && sync "$1/.probe" &&
		[ "$(mfsfileinfo "$1/.probe" | grep -c 'status:VALID')" -ge 3 ]
}

mfs_up() {
	MFS_DIR=$1 MFS_MNT=$2
	local m=$MFS_NET.10 i ns d log
	mkdir -p "$MFS_DIR" "$MFS_MNT"
	mfs_install || return 1
	if [ "$(id -u)" != 0 ]; then
		MFS_WHY="network namespaces need root"
		return 1
	fi
	if ip -4 route show | grep -q "^$MFS_NET\.0/24"; then
		MFS_WHY="subnet '$MFS_NET.0/24' already in use here (set MFS_NET)"
		return 1
	fi
	ip link add "$MFS_BR" type bridge || { MFS_WHY="cannot create bridge '$MFS_BR'"; return 1; }
	if ! ip addr add "$MFS_NET.1/24" dev "$MFS_BR" || ! ip link set "$MFS_BR" up; then
		MFS_WHY="cannot configure bridge '$MFS_BR'"
		return 1
	fi

	# master
	d=$MFS_DIR/master
	mkdir -p "$d"
	cp /var/lib/mfs/metadata.mfs.empty "$d/metadata.mfs" 2>/dev/null ||
		printf 'MFSM NEW' >"$d/metadata.mfs"
	cat >"$d/mfsexports.cfg" <<-EOF
		$MFS_NET.0/24 / rw,alldirs,admin,maproot=0:0
		$MFS_NET.0/24 . rw
	EOF
	cat >"$d/mfsmaster.cfg" <<-EOF
		WORKING_USER = root
		WORKING_GROUP = root
		DATA_PATH = $d
		EXPORTS_FILENAME = $d/mfsexports.cfg
		TOPOLOGY_FILENAME = $d/mfstopology.cfg
		MATOML_LISTEN_HOST = $m
		MATOCS_LISTEN_HOST = $m
		MATOCL_LISTEN_HOST = $m
		NICE_LEVEL = 0
		REPLICATIONS_DELAY_INIT = 0
	EOF
	: >"$d/mfstopology.cfg"
	mfs_ns "mfs${MFS_ID}m" "$m" || { MFS_WHY="cannot create namespace for the master"; return 1; }
	ip netns exec "mfs${MFS_ID}m" mfsmaster -f -c "$d/mfsmaster.cfg" >"$d/log" 2>&1 &
	MFS_PIDS+=($!)
	mfs_daemon_up master $! "mfs${MFS_ID}m" "$m" 9421 "$d/log" || return 1

	# chunkservers
	for i in 1 2 3; do
		d=$MFS_DIR/cs$i
		ns=mfs${MFS_ID}c$i
		mkdir -p "$d/hdd"
		echo "$d/hdd" >"$d/mfshdd.cfg"
		cat >"$d/mfschunkserver.cfg" <<-EOF
			WORKING_USER = root
			WORKING_GROUP = root
			DATA_PATH = $d
			HDD_CONF_FILENAME = $d/mfshdd.cfg
			HDD_LEAVE_SPACE_DEFAULT = 256MiB
			MASTER_HOST = $m
			BIND_HOST = $MFS_NET.1$i
			CSSERV_LISTEN_HOST = $MFS_NET.1$i
			NICE_LEVEL = 0
		EOF
		mfs_ns "$ns" "$MFS_NET.1$i" || { MFS_WHY="cannot create namespace for chunkserver $i"; return 1; }
		ip netns exec "$ns" mfschunkserver -f -c "$d/mfschunkserver.cfg" >"$d/log" 2>&1 &
		MFS_PIDS+=($!)
	done
	for i in 1 2 3; do
		mfs_daemon_up "chunkserver $i" "${MFS_PIDS[$i]}" "mfs${MFS_ID}c$i" "$MFS_NET.1$i" 9422 \
			"$MFS_DIR/cs$i/log" || return 1
	done
	mfs_wait "$MFS_WAIT" mfs_cs_count "mfs${MFS_ID}m" 3 ||
		{ mfs_fail "3 chunkservers did not register with the master within $MFS_WAIT s" \
			"$MFS_DIR/master/log"; return 1; }

	# client, in the root namespace over the bridge
	log=$MFS_DIR/mount.log
	mfsmount -f "$MFS_MNT" -H "$m" >"$log" 2>&1 &
	MFS_PIDS+=($!)
	mfs_wait "$MFS_WAIT" mfs_mounted $! "$MFS_MNT" ||
		{ mfs_fail "mfsmount of '$m' on '$MFS_MNT' failed or took over $MFS_WAIT s" "$log"; return 1; }
	# goal 3 (3 copies) like strata's R=3; no trash, so unlink frees chunks
	if ! mfssetgoal -r 3 "$MFS_MNT" >"$log.goal" 2>&1 ||
		! mfssettrashtime -r 0 "$MFS_MNT" >>"$log.goal" 2>&1; then
		mfs_fail "cannot set goal 3 on '$MFS_MNT'" "$log.goal"
		return 1
	fi
	if ! mfs_wait "$MFS_WAIT" mfs_probe "$MFS_MNT"; then
		mfsfileinfo "$MFS_MNT/.probe" >>"$log.goal" 2>&1
		mfs_fail "a new chunk did not get 3 copies within $MFS_WAIT s" "$log.goal"
		return 1
	fi
	rm -f "$MFS_MNT/.probe"
	return 0
}

mfs_down() {
	local p ns i
	if [ -n "$MFS_MNT" ] && mountpoint -q "$MFS_MNT" 2>/dev/null; then
		umount "$MFS_MNT" 2>/dev/null || umount -l "$MFS_MNT" 2>/dev/null || true
	fi
	for p in "${MFS_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${MFS_PIDS[@]}"; do
		for i in $(seq 50); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.2
		done
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	MFS_PIDS=()
	for ns in "${MFS_NS[@]}"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	MFS_NS=()
	ip link del "$MFS_BR" 2>/dev/null || true
}
