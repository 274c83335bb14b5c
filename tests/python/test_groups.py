"""Joining the job and managing groups: init_process_group in its three
rendezvous modes, rank/size queries, new_group naming and membership,
rank translation, destroying groups and the world, and re-joining.
"""

import hashlib
import os
import subprocess
import sys
import time
import warnings
from datetime import timedelta

import numpy as np
import pytest

import meshcomm
from meshcomm import DistError
from mcutil import expect, init
from ports import free_ports


def _expected_name(backend, ranks):
    ranks = sorted(ranks)
    digest = hashlib.sha1("_".join(map(str, ranks)).encode()).hexdigest()
    return f"{backend}_{len(ranks)}_{digest}"


def _warns(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args)
    assert caught, f"{fn.__name__} did not warn"
    return result


def _groups_worker(rank, n, port, port2):
    assert not meshcomm.is_initialized()
    assert _warns(meshcomm.get_rank) == -1
    assert _warns(meshcomm.get_world_size) == -1
    init(rank, n, port)
    assert meshcomm.is_initialized() and meshcomm.is_available()
    for g in (None, "hccl_world_group", "mccl_world_group", meshcomm.WORLD_COMM_GROUP):
        assert meshcomm.get_rank(g) == rank
        assert meshcomm.get_world_size(g) == n
        assert meshcomm.get_process_group_ranks(g) == list(range(n))
    assert meshcomm.new_group() == meshcomm.WORLD_COMM_GROUP == "hccl_world_group"
    assert meshcomm.get_backend() == "hccl"
    assert meshcomm.get_backend("mccl_world_group") == "mccl"
    assert meshcomm.get_global_rank(None, n + 5) == n + 5  # as MindSpore: no check
    assert meshcomm.get_group_rank(None, rank) == rank
    expect(ValueError, meshcomm.get_group_rank, None, n)

    # A two-member group named from its sorted ranks; members pass them in
    # any order, non-members do not call new_group at all.
    members = [n - 1, 0] if n > 1 else [0]
    expected = _expected_name("hccl", members)
    if rank in members:
        g = meshcomm.new_group(list(members))
        assert g == expected
        me = sorted(members).index(rank)
        assert meshcomm.get_rank(g) == me
        assert meshcomm.get_world_size(g) == len(members)
        assert meshcomm.get_process_group_ranks(g) == sorted(members)
        assert meshcomm.get_global_rank(g, len(members) - 1) == n - 1
        assert meshcomm.get_group_rank(g, n - 1) == len(members) - 1
        assert meshcomm.get_backend(g) == "hccl"
        expect(ValueError, meshcomm.get_global_rank, g, len(members))
        if n > 2:
            expect(ValueError, meshcomm.get_group_rank, g, 1)
        x = np.full(3, rank + 1.0)
        meshcomm.all_reduce(x, group=g)
        assert (x == sum(m + 1.0 for m in members)).all()
        mg = meshcomm.new_group(list(members), backend="mccl")
        assert mg == _expected_name("mccl", members) and meshcomm.get_backend(mg) == "mccl"
        meshcomm.barrier(mg)
        # Creating the same group again returns the existing one.
        assert meshcomm.new_group(sorted(members)) == g
        # Destroying is not collective: first make sure the other member is
        # done with the group (its barrier may still be finishing).
        meshcomm.all_reduce(np.ones(1), group=g)
        meshcomm.destroy_process_group(mg)
        assert _warns(meshcomm.get_rank, mg) == -1
        expect(DistError, meshcomm.destroy_process_group, mg)
    else:
        assert _warns(meshcomm.get_rank, expected) == -1
        expect(DistError, meshcomm.all_reduce, np.ones(2), group=expected)
        expect(DistError, meshcomm.get_process_group_ranks, expected)
    # A process that is not among the ranks cannot create the group.
    others = [r for r in range(n) if r != rank]
    if others:
        assert _warns(meshcomm.new_group, others) == ""
    assert _warns(meshcomm.new_group, [n + 3]) == ""
    meshcomm.barrier()
    meshcomm.destroy_process_group()
    assert not meshcomm.is_initialized()
    meshcomm.destroy_process_group()  # leaving twice is harmless

    # Join again through a store that rank 0 serves.
    store = meshcomm.TCPStore("127.0.0.1", port2, world_size=n, is_master=rank == 0,
                              timeout=timedelta(seconds=300))
    meshcomm.init_process_group(store=store, rank=rank, world_size=n, backend="mccl")
    assert meshcomm.get_backend() == "mccl" and meshcomm.get_world_size() == n
    x = np.array([rank], np.int64)
    meshcomm.all_reduce(x, op=meshcomm.ReduceOp.MAX)
    assert x[0] == n - 1
    expect(DistError, meshcomm.init_process_group, store=store, rank=rank, world_size=n)
    meshcomm.destroy_process_group(meshcomm.WORLD_COMM_GROUP)
    return rank


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_groups(run_workers, nprocs):
    port, port2 = free_ports(2)
    assert run_workers(_groups_worker, nprocs, (port, port2), timeout=90) == list(range(nprocs))


def _env_worker(rank, n, port, port2, port3):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(n), MESHCOMM_SHUTDOWN_WAIT_MS="10000")
    # world_size disagreeing with the environment: refused, and left again.
    expect(ValueError, meshcomm.init_process_group, world_size=n + 1)
    assert not meshcomm.is_initialized()
    os.environ["MASTER_PORT"] = str(port2)
    for var in ("RANK", "WORLD_SIZE"):
        del os.environ[var]
    # The Open MPI launcher's variables work as well.
    os.environ.update(OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE=str(n))
    # With an init_method, MindSpore wants rank and world_size spelled out.
    expect(ValueError, meshcomm.init_process_group, init_method="env://")
    meshcomm.init_process_group()
    got = [(meshcomm.get_rank(), meshcomm.get_world_size())]
    meshcomm.barrier()
    meshcomm.destroy_process_group()
    os.environ["MASTER_PORT"] = str(port3)
    meshcomm.init_process_group(init_method="env://", rank=rank, world_size=n)
    got.append((meshcomm.get_rank(), meshcomm.get_world_size()))
    meshcomm.destroy_process_group()
    return got


def test_env_init(run_workers):
    ports = free_ports(3)
    assert run_workers(_env_worker, 2, tuple(ports), timeout=90) == [[(0, 2)] * 2, [(1, 2)] * 2]


def test_timeout_variable_bounds_joining_without_a_timeout_argument():
    # A rank alone in a world of two, with no timeout argument: joining
    # fails after MESHCOMM_TIMEOUT_MS, naming the rank that never came. Run
    # in a process of its own, so this one never creates a World.
    env = dict(os.environ, RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_ports(1)[0]), MESHCOMM_TIMEOUT_MS="2000")
    code = ("import meshcomm\n"
            "try:\n"
            "    meshcomm.init_process_group()\n"
            "except meshcomm.DistTimeoutError as e:\n"
            "    print('timeout:', e)\n")
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    elapsed = time.monotonic() - start
    assert "timeout:" in out.stdout and "missing: 1" in out.stdout, out.stdout + out.stderr
    assert elapsed < 20, f"joining took {elapsed:.1f} s with MESHCOMM_TIMEOUT_MS=2000"


def test_uninitialized_process():
    # Runs in the test process: nothing here may create a World.
    assert meshcomm.is_available() and not meshcomm.is_initialized()
    assert _warns(meshcomm.get_rank) == -1
    assert _warns(meshcomm.get_world_size, "hccl_world_group") == -1
    assert _warns(meshcomm.new_group, [0]) == ""
    assert meshcomm.new_group() == "hccl_world_group"
    assert meshcomm.get_backend() == "hccl" and meshcomm.get_backend("mccl_5_x") == "mccl"
    assert meshcomm.get_global_rank(None, 3) == 3
    expect(DistError, meshcomm.get_global_rank, "hccl_2_abc", 0)
    expect(DistError, meshcomm.get_process_group_ranks)
    expect(DistError, meshcomm.all_reduce, np.ones(2))
    expect(DistError, meshcomm.barrier)
    meshcomm.destroy_process_group()
