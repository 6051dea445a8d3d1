#!/usr/bin/env bash
# Installs exactly the Debian 12 packages Strata needs to build and test.
# Idempotent: quiet and quick when everything is already present.
set -euo pipefail

PKGS=(
  build-essential pkg-config meson ninja-build   # toolchain and build system
  clang                                          # libFuzzer targets (make fuzz)
  liburing-dev                                   # disk I/O through io_uring
  libinih-dev                                    # INI config files
  libjansson-dev                                 # JSON for CLI/status output
  libmicrohttpd-dev                              # /metrics endpoint
  libisal-dev                                    # CRC32C (and later erasure codes)
  libsqlite3-dev                                 # embedded metadata store
  libpq-dev                                      # the metadata store on PostgreSQL (libpq)
  postgresql                                     # its tests start a throwaway server (tests/pg_tmp.sh)
  libssl-dev openssl                             # HMAC-SHA256, TLS; scripts/tls-cert.sh
  libcmocka-dev                                  # unit tests
  python3-pytest                                 # integration tests (/usr/bin/python3)
  iproute2 procps                                # network namespaces, process tools in tests
  libfuse3-dev fuse3                             # strata-fuse (libfuse3 low-level API)
  fio                                            # FUSE tests and benchmark (--verify=crc32c)
  iperf3                                         # bench io --mgmt: the raw network baseline
  rsync                                          # FUSE tests: rsync -aH keeps times and links
  python3-numpy python3-torch                    # python/strata: arrays, tensors, datasets
  python3-fsspec python3-pandas                  # strata.fsspec, its pandas round trip
  python3-pip python3-setuptools                 # pip install ./python (offline, tested)
  debhelper dh-python dpkg-dev                   # make deb: dpkg-buildpackage, dh with meson and
                                                 # the Python binding (debian/)
  redis-server                                   # bench mem: the peer it is compared with
  libhiredis-dev                                 # bench mem: Redis measured through its own C
                                                 # client (linked into the strata CLI only)
  slurm-wlm                                      # tests/integration/test_slurm.py: slurmctld, slurmd,
                                                 # burst_buffer/lua (auth/none there: one host, no munged)
  libslurm-dev                                   # slurm/spank.h: src/slurm/spank_strata.so
  chromium python3-websocket                     # tests/integration/test_portal.py drives the
  fonts-dejavu-core                              # portal in headless Chromium (DevTools protocol)
  patroni etcd-server                            # tests/integration/test_patroni.py: the namespace's
                                                 # PostgreSQL under Patroni, three etcd members
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "deps.sh: missing packages: ${missing[*]}; run as root or install them" >&2
  exit 1
fi
echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Another apt (unattended upgrades, a second 'make') may hold the dpkg
# lock: wait for it, up to 10 minutes, instead of failing at once.
lock=(-o DPkg::Lock::Timeout=600)
apt-get "${lock[@]}" update -qq >/dev/null
apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
