"""Failures on the meshcomm backend as torch callers see them: a rank
killed mid-training, ranks that disagree about a tensor, bad input, Work
objects dropped or waited on with a timeout, and what destroying the
process group leaves behind."""

import gc
import os
import re
import signal
import time

import pytest

from conftest import init, run_ranks


def killed_mid_training(rank, size, port):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    init(rank, size, port)
    store = dist.distributed_c10d._get_default_store()
    model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Linear(256, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # A receive from the rank that dies, pending while it dies.
    orphan = dist.irecv(torch.zeros(4), src=size - 1) if rank == 0 else None
    for step in range(200):
        if rank == size - 1 and step == 5:
            store.set("killed_at", repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)
        opt.zero_grad()
        try:
            model(torch.randn(16, 64)).sum().backward()
        except RuntimeError as e:
            failed_at = time.time()
            killed_at = float(store.get("killed_at"))
            result = {"message": str(e), "delay": failed_at - killed_at,
                      "type": type(e).__name__}
            break
        opt.step()
    else:
        raise AssertionError("training went on without the killed rank")
    if orphan is not None:
        with pytest.raises(RuntimeError, match=f"rank {size - 1}"):
            orphan.wait()
        result["orphan"] = (orphan.is_completed(), orphan.is_success(),
                            type(orphan.exception()).__name__)
    t0 = time.monotonic()
    dist.destroy_process_group()
    result["destroy_s"] = time.monotonic() - t0
    return result


def test_killed_rank_fails_every_survivor_naming_it():
    size = 3
    out = run_ranks(killed_mid_training, size, expect_errors=True)
    assert out.exitcodes[size - 1] == -signal.SIGKILL
    assert not out.errors, out.errors
    for rank in range(size - 1):
        r = out.values[rank]
        assert f"rank {size - 1}" in r["message"], r
        assert r["delay"] < 2.0, r
        assert r["destroy_s"] < 5.0, r
    assert out.values[0]["orphan"] == (True, False, "DistPeerLostError")


def mismatched(rank, size, port, op):
    import torch
    import torch.distributed as dist
    init(rank, size, port)
    n = 4 + 4 * rank  # elements per rank's block: every rank a different size
    calls = {
        "all_reduce": lambda: dist.all_reduce(torch.ones(n)),
        "broadcast": lambda: dist.broadcast(torch.ones(n), src=0),
        "all_gather_into_tensor":
            lambda: dist.all_gather_into_tensor(torch.zeros(n * size), torch.ones(n)),
        "reduce_scatter_tensor":
            lambda: dist.reduce_scatter_tensor(torch.zeros(n), torch.ones(n * size)),
        "all_to_all_single":
            lambda: dist.all_to_all_single(torch.zeros(n * size), torch.ones(n * size)),
    }
    messages = []
    t0 = time.monotonic()
    try:
        calls[op]()
    except RuntimeError as e:
        messages.append(str(e))
    elapsed = time.monotonic() - t0
    dist.destroy_process_group()
    return messages, elapsed


@pytest.mark.parametrize("op", ["all_reduce", "broadcast", "all_gather_into_tensor",
                                "reduce_scatter_tensor", "all_to_all_single"])
def test_mismatched_sizes_fail_on_every_rank(op):
    out = run_ranks(mismatched, 3, op)
    for rank in range(3):
        messages, elapsed = out.values[rank]
        assert len(messages) == 1, (rank, messages)
        assert f"{op} #0" in messages[0], messages
        assert "not running the same operation" in messages[0], messages
        assert elapsed < 10, elapsed


def bad_input(rank, size, port):
    import torch
    import torch.distributed as dist
    from meshcomm.torch import InvalidArgumentError
    init(rank, size, port)
    caught = {}

    def expect(name, exc, fn):
        try:
            fn()
        except exc as e:
            caught[name] = (type(e).__name__, isinstance(e, RuntimeError), str(e))
        else:
            caught[name] = None

    expect("avg on int", ValueError,
           lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.AVG))
    expect("bxor on float", ValueError,
           lambda: dist.all_reduce(torch.ones(3), op=dist.ReduceOp.BXOR))
    expect("all_gather list length", RuntimeError,
           lambda: dist.all_gather([torch.zeros(2)], torch.ones(2)))
    expect("all_gather_into_tensor size", RuntimeError,
           lambda: dist.all_gather_into_tensor(torch.zeros(3 * size), torch.ones(2)))
    expect("split sizes", RuntimeError,
           lambda: dist.all_to_all_single(torch.zeros(4), torch.ones(4),
                                          output_split_sizes=[1] * (size + 1)))
    expect("float8", RuntimeError,
           lambda: dist.all_reduce(torch.zeros(2, dtype=torch.float8_e4m3fn)))
    # A tensor with torch's lazy negative bit cannot receive results,
    # contiguous or not, whatever the op.
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
        expect(f"all_reduce {op} into a negative view", RuntimeError,
               lambda op=op: dist.all_reduce(torch._neg_view(torch.ones(3)), op=op))
        expect(f"all_reduce {op} into a strided negative view", RuntimeError,
               lambda op=op: dist.all_reduce(torch.ones(3, dtype=torch.complex64).conj().imag,
                                             op=op))
    # None of that reached the wire: the group still works.
    x = torch.ones(2)
    dist.all_reduce(x)
    ok = torch.equal(x, torch.full((2,), float(size)))
    assert issubclass(InvalidArgumentError, ValueError)
    dist.destroy_process_group()
    return caught, ok


def test_bad_input_raises_before_communicating():
    out = run_ranks(bad_input, 2)
    for rank in range(2):
        caught, ok = out.values[rank]
        assert ok
        for name, got in caught.items():
            assert got is not None, f"{name}: nothing raised"
            assert got[1], f"{name}: {got} is not a RuntimeError"


def work_objects(rank, size, port):
    import datetime
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _register_work
    init(rank, size, port)
    store = dist.distributed_c10d._get_default_store()
    results = {}
    if rank == 0:
        # Dropped without wait(), tensor too: the memory stays valid until
        # the send completes.
        dist.isend(torch.arange(1000, dtype=torch.float32), 1)
        gc.collect()
        store.set("sent", b"1")
        # Sent late, so rank 1's waits below time out first.
        store.wait(["timed out"])
        dist.send(torch.full((3,), 7.0), 1)
        dist.send(torch.full((3,), 8.0), 1)
        dist.send(torch.full((3,), 9.0), 1)
    else:
        got = torch.zeros(1000)
        dist.recv(got, 0)
        results["dropped isend"] = torch.equal(got, torch.arange(1000, dtype=torch.float32))
        store.wait(["sent"])
        buf = torch.zeros(3)
        w = dist.irecv(buf, 0)
        t0 = time.monotonic()
        try:
            w.wait(datetime.timedelta(milliseconds=300))
            results["timeout"] = "returned"
        except RuntimeError as e:
            results["timeout"] = ("raised", round(time.monotonic() - t0, 1), str(e))
        results["pending"] = (w.is_completed(), w.is_success())
        # torch's C++ side holds the Work (as functional collectives do);
        # the Python object is dropped: waiting from C++ must still work.
        buf2 = torch.zeros(3)
        w2 = dist.irecv(buf2, 0)
        _register_work(buf2, w2)
        buf3 = torch.zeros(3)
        fut = dist.irecv(buf3, 0).get_future()
        del w2
        gc.collect()
        store.set("timed out", b"1")
        w.wait()
        torch.ops._c10d_functional.wait_tensor(buf2)
        results["after"] = (w.is_completed(), w.is_success(), w.exception(), buf.tolist(),
                            buf2.tolist(), fut.wait()[0].tolist())
    dist.barrier()
    # A small asynchronous collective is queued too; once waited on,
    # everything answers at once.
    t = torch.ones(2)
    w = dist.all_reduce(t, async_op=True)
    results["done"] = (w.wait(), w.is_completed(), w.is_success(), w.exception(),
                       w.get_future().wait()[0].tolist())
    # A large asynchronous all_reduce is queued (as DDP's buckets are):
    # its future completes on its own, its wait() returns the result.
    big = [torch.full((1 << 19,), float(rank + i)) for i in range(3)]
    works = [dist.all_reduce(b, async_op=True) for b in big]
    futs = [w.get_future() for w in works[:2]]
    results["async"] = ([f.wait()[0][:2].tolist() for f in futs], works[2].wait(),
                        big[2][-2:].tolist(), all(w.is_completed() for w in works))
    dist.destroy_process_group()
    return results


def test_work_objects():
    out = run_ranks(work_objects, 2)
    r = out.values[1]
    assert r["dropped isend"]
    assert r["timeout"][0] == "raised" and 0.2 <= r["timeout"][1] < 5, r["timeout"]
    assert r["pending"] == (False, False)
    assert r["after"] == (True, True, None, [7.0] * 3, [8.0] * 3, [9.0] * 3), r["after"]
    for rank in range(2):
        assert out.values[rank]["done"] == (True, True, True, None, [2.0, 2.0])
        assert out.values[rank]["async"] == ([[1.0, 1.0], [3.0, 3.0]], True, [5.0, 5.0],
                                             True), out.values[rank]["async"]


def _resources():
    with open("/proc/self/maps") as f:
        shm = sum("/dev/shm/meshcomm" in line for line in f)
    return (len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd")), shm)


def destroy_releases(rank, size, port, tmp):
    import torch
    import torch.distributed as dist
    import meshcomm.torch  # noqa: F401
    seen = []
    for round_ in range(3):
        # A FileStore per round (and torch.distributed's store= path).
        store = dist.FileStore(os.path.join(tmp, f"store{round_}"), size)
        dist.init_process_group("meshcomm", store=store, rank=rank, world_size=size)
        sub = dist.new_group([0, 1])
        x = torch.ones(1 << 16)
        dist.all_reduce(x)
        if rank in (0, 1):
            dist.all_reduce(x, group=sub)
        dist.destroy_process_group()
        gc.collect()
        time.sleep(0.2)
        seen.append(_resources())
    return seen


def test_destroy_releases_everything(tmp_path):
    out = run_ranks(destroy_releases, 3, str(tmp_path))
    for rank, seen in out.values.items():
        # The first round may leave what torch keeps for the process
        # (thread pools); later rounds add nothing.
        assert seen[1] == seen[2], (rank, seen)
        assert seen[2][2] == 0, (rank, seen)


def dumps_with_a_sub_group(rank, size, port, dump_dir):
    from datetime import timedelta
    import torch
    import torch.distributed as dist
    import meshcomm
    os.environ["MESHCOMM_DUMP_DIR"] = dump_dir
    init(rank, size, port)
    sub = dist.new_group([1, 2], backend="meshcomm", timeout=timedelta(seconds=2))
    x = torch.ones(4)
    dist.all_reduce(x)
    if rank in (1, 2):
        dist.all_reduce(x, group=sub)
    if rank == 1:
        # Rank 2 never comes: the timeout writes this rank's dump.
        try:
            dist.all_reduce(x, group=sub)
        except RuntimeError:
            path = os.path.join(dump_dir, f"rank_{rank}.jsonl")
        else:
            raise AssertionError("an all_reduce without rank 2 returned")
    else:
        path = meshcomm.dump_flight_recorder()
    dist.barrier()
    dist.destroy_process_group()
    return path


def test_flight_recorder_names_torch_ranks_and_groups(tmp_path):
    """Each torch group is a meshcomm World of its own: the dumps still name
    the process by its torch rank, one file each, and a sub-group's records
    by the torch ranks of its members, apart from the default group's."""
    import json
    from meshcomm import diagnose
    out = run_ranks(dumps_with_a_sub_group, 3, str(tmp_path))
    assert sorted(os.path.basename(p) for p in out.values.values()) == \
        ["rank_0.jsonl", "rank_1.jsonl", "rank_2.jsonl"]
    for rank in range(3):
        lines = (tmp_path / f"rank_{rank}.jsonl").read_text().splitlines()
        header = json.loads(lines[0])
        assert (header["rank"], header["world_size"]) == (rank, 3), header
        # Each torch group's World holds its point-to-point lane too: a
        # group over the same ranks, named by meshcomm's rule, same label.
        groups, lanes = {}, {}
        for g in header["groups"]:
            label = g["name"].partition("@")[2]
            (groups if g["name"].partition("@")[0] == "world" else lanes)[label] = \
                (g["name"], g["world_ranks"])
        assert {label: ranks for label, (_, ranks) in lanes.items()} == \
            {label: ranks for label, (_, ranks) in groups.items()}, header
        groups = dict(groups.values())
        assert groups.pop("world") == [0, 1, 2], header
        if rank:
            [(name, ranks)] = groups.items()
            assert name.startswith("world@torch:") and ranks == [1, 2], header
    result = diagnose.diagnose(str(tmp_path))
    assert result.status == 1, result.text
    assert re.search(r"group world@torch:\S+ \(2 ranks\)", result.text), result.text
    assert "rank 1 failed in all_reduce #1" in result.text, result.text
    assert "rank 2 last finished all_reduce #0 and never entered #1" in result.text, result.text


def sub_group_mismatch(rank, size, port, dump_dir):
    import torch
    import torch.distributed as dist
    os.environ["MESHCOMM_DUMP_DIR"] = dump_dir
    init(rank, size, port)
    sub = dist.new_group([1, 2], backend="meshcomm")
    message = None
    if rank in (1, 2):
        try:
            dist.all_reduce(torch.ones(4 * rank), group=sub)
        except RuntimeError as e:
            message = str(e)
    dist.destroy_process_group()
    return message


def test_sub_group_errors_name_the_global_ranks(tmp_path):
    """meshcomm numbers a sub-group's ranks from 0; the message says which
    torch ranks those are."""
    out = run_ranks(sub_group_mismatch, 3, str(tmp_path))
    assert out.values[0] is None
    for rank in (1, 2):
        message = out.values[rank]
        assert message and "not running the same operation" in message, message
        assert "whose ranks 0-1 are global ranks 1, 2)" in message, message
