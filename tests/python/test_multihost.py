"""Multi-host runs for real: three network namespaces, each a "host" with
its own address on a shared bridge, each running meshrun with two ranks.
Every collective crosses the namespaces over TCP. A second run shapes one
host's link with tc's token bucket filter (rate limit plus queueing delay),
so nothing may depend on loopback timing.

The test needs root and network namespaces; it skips, saying why, where the
kernel or the user cannot create them. It removes everything it creates,
also when it fails.
"""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from mcutil import SHM_OFF
from netns import why_no_namespaces
from processes import collect

ROOT = Path(__file__).resolve().parents[2]
MESHRUN = ROOT / "tools" / "meshrun"
JOB = Path(__file__).resolve().parent / "jobs" / "every_op.py"
HOSTS = 3
SUBNET = "10.231.77"


def _run(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=30)


def _can_make_namespaces():
    why = why_no_namespaces()
    if why:
        return why
    probe = f"mcprobe{uuid.uuid4().hex[:6]}"
    try:
        r = _run("ip", "netns", "add", probe, check=False)
        if r.returncode != 0:
            return f"the kernel refused a network namespace: {r.stderr.strip()}"
    finally:
        _run("ip", "netns", "del", probe, check=False)
    return None


class Hosts:
    """Namespaces joined by a bridge that lives in a namespace of its own,
    so nothing is added to the machine's own network."""

    def __init__(self, count):
        tag = uuid.uuid4().hex[:5]
        self.bridge_ns = f"mcbr{tag}"
        self.names = [f"mch{tag}{i}" for i in range(count)]
        self.addresses = [f"{SUBNET}.{i + 1}" for i in range(count)]
        self.created = []

    def __enter__(self):
        try:
            self._build()
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def _build(self):
        _run("ip", "netns", "add", self.bridge_ns)
        self.created.append(self.bridge_ns)
        ns = ["ip", "netns", "exec", self.bridge_ns]
        _run(*ns, "ip", "link", "add", "br0", "type", "bridge")
        _run(*ns, "ip", "link", "set", "br0", "up")
        for i, (name, addr) in enumerate(zip(self.names, self.addresses)):
            _run("ip", "netns", "add", name)
            self.created.append(name)
            # The veth pair is born in the host namespace, then one end
            # moves into the bridge's namespace.
            _run("ip", "netns", "exec", name, "ip", "link", "add", "eth0", "type", "veth",
                 "peer", "name", f"port{i}")
            _run("ip", "netns", "exec", name, "ip", "link", "set", f"port{i}", "netns",
                 self.bridge_ns)
            _run(*ns, "ip", "link", "set", f"port{i}", "master", "br0")
            _run(*ns, "ip", "link", "set", f"port{i}", "up")
            host = ["ip", "netns", "exec", name]
            _run(*host, "ip", "addr", "add", f"{addr}/24", "dev", "eth0")
            _run(*host, "ip", "link", "set", "eth0", "up")
            _run(*host, "ip", "link", "set", "lo", "up")

    def shape(self, index, rate="200mbit", latency="20ms"):
        """Rate-limits host `index`'s link; packets queue up to `latency`."""
        _run("ip", "netns", "exec", self.names[index], "tc", "qdisc", "add", "dev", "eth0",
             "root", "tbf", "rate", rate, "burst", "64kb", "latency", latency)

    def __exit__(self, *exc):
        for name in reversed(self.created):
            _run("ip", "netns", "del", name, check=False)
        self.created.clear()


def _launch(hosts, port, count):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "build" / "python")
    env["MESHCOMM_TIMEOUT_MS"] = "60000"
    # The group set-up reports each group's placement at this level.
    env["MESHCOMM_LOG_LEVEL"] = "info"
    procs = []
    for i, name in enumerate(hosts.names):
        # The namespaces share this machine's hostname and boot id; the
        # host id makes each one a host of its own, so the two ranks of a
        # namespace share memory and the namespaces talk TCP: the
        # hierarchical algorithms.
        env = dict(env, MESHCOMM_HOST_ID=name)
        cmd = ["ip", "netns", "exec", name, sys.executable, str(MESHRUN),
               "--nnodes", str(len(hosts.names)), "--node-rank", str(i),
               "--nproc-per-node", "2", "--master-addr", hosts.addresses[0],
               "--master-port", str(port), str(JOB), str(count)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    return collect(procs, timeout=180)


@pytest.fixture(scope="module")
def namespaces_ok():
    why = _can_make_namespaces()
    if why:
        pytest.skip(why)


@pytest.mark.parametrize("shaped", [False, True], ids=["plain", "tbf-shaped"])
def test_every_op_across_three_hosts(namespaces_ok, shaped):
    with Hosts(HOSTS) as hosts:
        if shaped:
            hosts.shape(2)
        codes, outputs = _launch(hosts, 29400 + (7 if shaped else 3), 300_000)
    joined = "\n".join(outputs)
    assert codes == [0] * HOSTS, joined
    assert f"every_op: all {2 * HOSTS} ranks passed" in joined, joined
    route = ("messages between every rank" if SHM_OFF else
             "each host's domain within hosts and messages between them (this host: shm domain "
             "of 2 ranks)")
    placement = f"of {2 * HOSTS} on {HOSTS} host(s), route: {route}"
    assert joined.count(placement) >= 2 * HOSTS, joined
    # The hosts are namespaces of this machine: every rank counts all of
    # them against its cores, not only those of its host.
    assert joined.count(f"shares its machine with {2 * HOSTS} ranks") == 2 * HOSTS, joined
    if "MESHCOMM_SPIN_US" not in os.environ:
        spin = 50 if 2 * (2 * HOSTS) <= (os.cpu_count() or 1) else 0
        assert joined.count(f"waits spin {spin} us") == 2 * HOSTS, joined
