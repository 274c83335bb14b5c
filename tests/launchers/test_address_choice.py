"""Which address a rank advertises to its peers, without
MESHCOMM_SOCKET_IFNAME: the one of the interface whose route reaches
MASTER_ADDR. Proven in network namespaces:

- "master" holds rank 0 and the store, at 10.231.X.1 on its only link;
- "worker" holds rank 1 and two interfaces: first `dead0`, an address on a
  link to a namespace with nothing in it, carrying the default route (so
  the first interface, or the default route, would be the wrong pick), then
  `link0`, the link to "master".

Rank 1 must advertise link0's address (rank 0 could not reach the other) and
the all_reduce between them must cross it. A worker whose only interface is
the dead end, with no route to MASTER_ADDR, must fail at once with an error
that names the interfaces it has.
"""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import meshcomm
from netns import why_no_namespaces

PACKAGE_DIR = Path(meshcomm.__file__).resolve().parents[1]
RUN_TIMEOUT_S = 60.0
JOB = """\
import numpy as np, meshcomm
meshcomm.init_process_group()
x = np.full(1000, meshcomm.get_rank() + 1.0)
meshcomm.all_reduce(x)
assert (x == 3.0).all(), x
print("sum ok")
meshcomm.destroy_process_group()
"""


def _ip(*args, ns=None, check=True):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip", *args]
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=30)


class Namespaces:
    """master, worker and an empty dead end; removed on exit."""

    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.master, self.worker, self.nowhere = (f"mca{n}{tag}" for n in "mwd")
        # Subnets unlikely to collide with parallel runs of this test.
        x = int(tag[:2], 16)
        self.master_addr = f"10.231.{x}.1"
        self.link_addr = f"10.231.{x}.2"
        self.dead_addr = f"10.232.{x}.2"
        self.dead_gateway = f"10.232.{x}.1"
        self.unreachable = f"10.233.{x}.1"
        self.created = []

    def __enter__(self):
        try:
            for ns in (self.master, self.worker, self.nowhere):
                _ip("netns", "add", ns)
                self.created.append(ns)
                _ip("link", "set", "lo", "up", ns=ns)
            # The dead end first, so it is the worker's first interface.
            _ip("link", "add", "dead0", "type", "veth", "peer", "name", "void0", ns=self.worker)
            _ip("link", "set", "void0", "netns", self.nowhere, ns=self.worker)
            _ip("link", "set", "void0", "up", ns=self.nowhere)
            _ip("addr", "add", f"{self.dead_addr}/24", "dev", "dead0", ns=self.worker)
            _ip("link", "set", "dead0", "up", ns=self.worker)
            _ip("route", "add", "default", "via", self.dead_gateway, ns=self.worker)
            _ip("link", "add", "link0", "type", "veth", "peer", "name", "eth0", ns=self.worker)
            _ip("link", "set", "eth0", "netns", self.master, ns=self.worker)
            _ip("addr", "add", f"{self.link_addr}/24", "dev", "link0", ns=self.worker)
            _ip("link", "set", "link0", "up", ns=self.worker)
            _ip("addr", "add", f"{self.master_addr}/24", "dev", "eth0", ns=self.master)
            _ip("link", "set", "eth0", "up", ns=self.master)
        except Exception:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for ns in reversed(self.created):
            _ip("netns", "del", ns, check=False)
        self.created.clear()


def _env(rank, master_addr, port, host_id):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESHCOMM_")}
    env.update(PYTHONPATH=str(PACKAGE_DIR), RANK=str(rank), WORLD_SIZE="2",
               MASTER_ADDR=master_addr, MASTER_PORT=str(port), MESHCOMM_LOG_LEVEL="info",
               MESHCOMM_TIMEOUT_MS="20000", MESHCOMM_HOST_ID=host_id, MESHCOMM_SHM="0")
    return env


@pytest.fixture
def namespaces():
    why = why_no_namespaces()
    if why:
        pytest.skip(why)
    with Namespaces() as n:
        yield n


def test_the_interface_whose_route_reaches_master_addr(namespaces, tmp_path):
    n = namespaces
    job = tmp_path / "job.py"
    job.write_text(JOB)
    port = 29400 + os.getpid() % 500
    procs = []
    for rank, ns in ((0, n.master), (1, n.worker)):
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, str(job)],
            env=_env(rank, n.master_addr, port, ns), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    outputs = []
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=RUN_TIMEOUT_S)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("the job did not finish: " + "\n".join(outputs))
    for rank, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, f"rank {rank}:\n{out}"
        assert "sum ok" in out, out
    assert f"advertising {n.link_addr} (link0)" in outputs[1], outputs[1]


def test_no_route_to_master_addr_names_the_interfaces(namespaces, tmp_path):
    n = namespaces
    _ip("route", "del", "default", ns=n.worker)
    _ip("link", "del", "link0", ns=n.worker)
    job = tmp_path / "job.py"
    job.write_text(JOB)
    r = subprocess.run(["ip", "netns", "exec", n.worker, sys.executable, str(job)],
                       env=_env(1, n.unreachable, 29400, n.worker), capture_output=True,
                       text=True, timeout=RUN_TIMEOUT_S)
    assert r.returncode != 0
    assert f"no network interface of this host has a route to {n.unreachable}" in r.stderr, r.stderr
    assert f"dead0 {n.dead_addr}" in r.stderr and "lo 127.0.0.1" in r.stderr, r.stderr
    assert "MESHCOMM_SOCKET_IFNAME" in r.stderr, r.stderr
