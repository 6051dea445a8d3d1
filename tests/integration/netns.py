"""Network namespaces for the fault tests: a private switched network whose
links can be cut, so a partition is real (packets stop) rather than a
killed process.

Layout of a Fabric (every name and address is created here, and traffic is
only ever sent to addresses created here):

    root namespace  --veth-->  hub namespace (a bridge)  <--veth--  node namespaces
    10.213.N.1/24                                                  10.213.N.(10+k)/24

- The root side of the hub's veth carries 10.213.N.1: processes in the root
  namespace (the mgmt daemon, the test drivers) use it, and the node
  namespaces reach it through the bridge. No forwarding or NAT is needed.
- A node namespace holds one daemon; its link (eth0 inside it) is what a
  partition takes down: Fabric.link_down(k) / link_up(k).
- N is picked so that 10.213.N.0/24 is not already routed in the root
  namespace.

Names: netns 'strata-f<PID>-<TAG>-hub' and '...-n<k>' (PID: the test
process; TAG: a per-fabric counter), the root-side veth 'sf<PID>r<TAG>'.
Fabric.destroy() removes them all (deleting a namespace removes its veths);
sweep_stale() removes those left by a test process that no longer exists.

Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2: available() tells
whether 'ip netns add' works here, with the reason when it does not.
"""

import ipaddress
import os
import re
import shutil
import subprocess

PREFIX = "strata-f"
_counter = [0]


def _ip(*args, check=True, timeout=10):
    r = subprocess.run(["ip", *[str(a) for a in args]], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("ip %s: %s" % (" ".join(str(a) for a in args), r.stderr.strip()))
    return r


def available():
    """-> (True, "") when network namespaces can be made here, else (False,
    why)."""
    if shutil.which("ip") is None:
        return False, "iproute2 ('ip') is not installed"
    if os.geteuid() != 0:
        return False, "network namespaces need root (running as uid %d)" % os.geteuid()
    name = "%s%d-probe" % (PREFIX, os.getpid())
    try:
        r = _ip("netns", "add", name, check=False)
        if r.returncode != 0:
            return False, "'ip netns add' is not permitted: %s" % r.stderr.strip()
        r = _ip("-n", name, "link", "add", "p0", "type", "veth", "peer", "name", "p1",
                check=False)
        if r.returncode != 0:
            return False, "cannot create a veth pair: %s" % r.stderr.strip()
        r = _ip("-n", name, "link", "add", "b0", "type", "bridge", check=False)
        if r.returncode != 0:
            return False, "cannot create a bridge: %s" % r.stderr.strip()
        return True, ""
    except (OSError, subprocess.SubprocessError) as e:
        return False, "cannot run ip: %s" % e
    finally:
        _ip("netns", "del", name, check=False)


def _pid_alive(pid):
    return os.path.exists("/proc/%d" % pid)


def sweep_stale():
    """Deletes namespaces (and so their veths) of fabrics whose test process
    is gone. Returns the names deleted."""
    gone = []
    r = _ip("netns", "list", check=False)
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.match(re.escape(PREFIX) + r"(\d+)-", name)
        if m and not _pid_alive(int(m.group(1))):
            _ip("netns", "del", name, check=False)
            gone.append(name)
    r = _ip("-o", "link", "show", check=False)
    for line in r.stdout.splitlines():
        m = re.match(r"\d+: (sf(\d+)r\d+)[@:]", line)
        if m and not _pid_alive(int(m.group(2))):
            _ip("link", "del", m.group(1), check=False)
            gone.append(m.group(1))
    return gone


def _used_networks():
    nets = []
    r = _ip("-4", "-o", "addr", "show", check=False)
    for line in r.stdout.splitlines():
        m = re.search(r"inet (\S+)", line)
        if m:
            nets.append(ipaddress.ip_interface(m.group(1)).network)
    r = _ip("-4", "route", "show", "table", "all", check=False)
    for line in r.stdout.splitlines():
        tok = line.split()
        if not tok:
            continue
        dst = tok[1] if tok[0] in ("local", "broadcast", "unicast") and len(tok) > 1 else tok[0]
        try:
            nets.append(ipaddress.ip_network(dst, strict=False))
        except ValueError:
            pass
    return nets


class Fabric:
    """A switched private network; see the module comment."""

    def __init__(self):
        _counter[0] += 1
        self.tag = "%d-%d" % (os.getpid(), _counter[0])
        self.hub = "%s%s-hub" % (PREFIX, self.tag)
        self.root_veth = "sf%dr%d" % (os.getpid(), _counter[0])
        self.net = None
        self.nodes = {}         # k -> namespace name
        self.created = False

    # -- addresses --

    @property
    def root_ip(self):
        return str(self.net.network_address + 1)

    @property
    def service_ip(self):
        """A second address of the root namespace (see block_to)."""
        return str(self.net.network_address + 2)

    def node_ip(self, k):
        return str(self.net.network_address + 10 + k)

    def ns(self, k):
        return self.nodes[k]

    def exec_prefix(self, k):
        """argv prefix that runs a command inside node k's namespace (ip
        execs it: the pid is the command's own)."""
        return ["ip", "netns", "exec", self.nodes[k]]

    def nsenter_prefix(self, k):
        """argv prefix that runs a command in node k's network namespace
        only (nsenter execs it): unlike exec_prefix, the mounts stay the
        root namespace's (ip netns exec remounts /sys, which hides
        /sys/fs/cgroup from daemons such as slurmd)."""
        return ["nsenter", "--net=/run/netns/%s" % self.nodes[k], "--"]

    # -- life cycle --

    def create(self):
        used = _used_networks()
        for n in range(1 + os.getpid() % 200, 256):
            cand = ipaddress.ip_network("10.213.%d.0/24" % n)
            if not any(cand.overlaps(u) for u in used if u.prefixlen > 0):
                self.net = cand
                break
        if self.net is None:
            raise RuntimeError("no free 10.213.N.0/24 network in the root namespace")
        self.created = True
        _ip("netns", "add", self.hub)
        _ip("-n", self.hub, "link", "set", "lo", "up")
        _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.hub, "link", "set", "br0", "up")
        _ip("link", "add", self.root_veth, "type", "veth", "peer", "name", "up0", "netns", self.hub)
        _ip("-n", self.hub, "link", "set", "up0", "master", "br0", "up")
        _ip("addr", "add", "%s/24" % self.root_ip, "dev", self.root_veth)
        _ip("addr", "add", "%s/24" % self.service_ip, "dev", self.root_veth)
        _ip("link", "set", self.root_veth, "up")
        return self

    def add_node(self, k):
        """Creates node k's namespace, linked to the bridge, address
        node_ip(k). Returns the namespace name."""
        name = "%s%s-n%d" % (PREFIX, self.tag, k)
        _ip("netns", "add", name)
        self.nodes[k] = name
        _ip("-n", name, "link", "set", "lo", "up")
        _ip("-n", self.hub, "link", "add", "a%d" % k, "type", "veth", "peer", "name", "eth0",
            "netns", name)
        _ip("-n", self.hub, "link", "set", "a%d" % k, "master", "br0", "up")
        _ip("-n", name, "addr", "add", "%s/24" % self.node_ip(k), "dev", "eth0")
        _ip("-n", name, "link", "set", "eth0", "up")
        return name

    def link_down(self, k):
        """Cuts node k off: its eth0 goes down (the bridge port loses
        carrier too). Nothing it sends or is sent arrives."""
        _ip("-n", self.nodes[k], "link", "set", "eth0", "down")

    def link_up(self, k):
        _ip("-n", self.nodes[k], "link", "set", "eth0", "up")

    def block_to(self, k, ip):
        """Node k's packets to ip go nowhere (a blackhole route in its
        namespace): cut off from the service at ip, reachable by every
        other address. The root namespace's second address (service_ip)
        exists for this: a service there can be cut off from a node while
        the test drivers, at root_ip, still reach it."""
        _ip("-n", self.nodes[k], "route", "add", "blackhole", "%s/32" % ip)

    def unblock(self, k, ip):
        _ip("-n", self.nodes[k], "route", "del", "blackhole", "%s/32" % ip, check=False)

    def link_is_up(self, k):
        r = _ip("-n", self.nodes[k], "-o", "link", "show", "eth0")
        return ",UP" in r.stdout or "<UP" in r.stdout

    def destroy(self):
        """Removes every namespace and veth of this fabric (idempotent).
        Processes still inside keep their namespace alive until they exit:
        stop them first."""
        errors = []
        for name in list(self.nodes.values()) + [self.hub]:
            r = _ip("netns", "del", name, check=False)
            if r.returncode != 0 and "No such file" not in r.stderr:
                errors.append(r.stderr.strip())
        self.nodes.clear()
        r = _ip("link", "show", self.root_veth, check=False)
        if r.returncode == 0:
            _ip("link", "del", self.root_veth, check=False)
        self.created = False
        return errors
