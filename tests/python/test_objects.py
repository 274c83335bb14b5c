"""Object collectives: plain data round-trips through every one of them (on
the world and on a sub-group, with global src/dst), and a malicious pickle
is refused by each of them without running anything.
"""

import builtins
import os
import pickle

import pytest

import meshcomm
from mcutil import expect, init

PLAIN = [None, True, 3, -2**70, 2.5, 1 + 2j, "text", b"\x00\xff", bytearray(b"ab"),
         [1, [2, 3]], (4, (5,)), {"k": {1: 2}}, {1, 2}, frozenset({3}), range(2, 9, 3),
         slice(1, None, 2), "x" * 100_000]


class Evil:
    """Unpickling this would create `path` (with the command or builtin named)."""

    def __init__(self, path, how):
        self.path, self.how = path, how

    def __reduce__(self):
        if self.how == "system":
            return (os.system, (f"touch {self.path}",))
        if self.how == "exec":
            return (builtins.exec, (f"open({self.path!r}, 'w').close()",))
        return (open, (self.path, "w"))


def _plain(rank, n, group=None, members=None):
    members = members or list(range(n))
    size = len(members)
    me = members.index(rank)
    objs = [None] * size
    meshcomm.all_gather_object(objs, PLAIN[me % len(PLAIN)], group=group)
    assert objs == [PLAIN[i % len(PLAIN)] for i in range(size)]
    src = members[-1]
    lst = list(PLAIN) if rank == src else [None] * len(PLAIN)
    meshcomm.broadcast_object_list(lst, src=src, group=group)
    assert lst == PLAIN
    dst = members[-1]
    out = [None] * size if rank == dst else None
    meshcomm.gather_object({"from": rank}, out, dst=dst, group=group)
    if rank == dst:
        assert out == [{"from": m} for m in members]
    out = ["untouched"]
    inputs = [("for", m, PLAIN[m % len(PLAIN)]) for m in members] if rank == src else None
    meshcomm.scatter_object_list(out, inputs, src=src, group=group)
    assert out == [("for", rank, PLAIN[rank % len(PLAIN)])]


def _malicious(rank, n, tmp):
    hows = ["system", "exec", "open", "system"]
    paths = [os.path.join(tmp, f"pwned-{i}") for i in range(4)]

    # all_gather_object: everyone unpickles rank 0's object.
    objs = ["keep"] * n
    obj = Evil(paths[0], hows[0]) if rank == 0 else "fine"
    expect(pickle.UnpicklingError, meshcomm.all_gather_object, objs, obj)
    assert objs == ["keep"] * n

    lst = [Evil(paths[1], hows[1]), 1] if rank == 0 else ["keep", "keep"]
    if rank == 0:
        meshcomm.broadcast_object_list(lst, src=0)  # the sender never unpickles
    else:
        expect(pickle.UnpicklingError, meshcomm.broadcast_object_list, lst, src=0)
        assert lst == ["keep", "keep"]

    dst = n - 1
    out = ["keep"] * n if rank == dst else None
    obj = Evil(paths[2], hows[2]) if rank == 0 else rank
    if rank == dst:
        expect(pickle.UnpicklingError, meshcomm.gather_object, obj, out, dst=dst)
        assert out == ["keep"] * n
    else:
        meshcomm.gather_object(obj, out, dst=dst)

    victim = n - 1
    inputs = [Evil(paths[3], hows[3]) if r == victim else r for r in range(n)] if rank == 0 \
        else None
    out = ["keep"]
    if rank == victim:
        expect(pickle.UnpicklingError, meshcomm.scatter_object_list, out, inputs, src=0)
        assert out == ["keep"]
    else:
        meshcomm.scatter_object_list(out, inputs, src=0)
        assert out == [rank]
    # Refusing happens after the communication: the group stays usable.
    meshcomm.barrier()
    assert not any(os.path.exists(p) for p in paths)
    return [os.path.exists(p) for p in paths]


def _objects_worker(rank, n, port, tmp):
    init(rank, n, port)
    _plain(rank, n)
    if n >= 3:
        members = [0, n - 1]
        if rank in members:
            g = meshcomm.new_group(members)
            _plain(rank, n, group=g, members=members)
        meshcomm.barrier()
    if n >= 2:
        assert _malicious(rank, n, tmp) == [False] * 4
    meshcomm.destroy_process_group()
    return "ok"


@pytest.mark.parametrize("nprocs", [1, 3])
def test_objects(run_workers, free_port, tmp_path, nprocs):
    assert run_workers(_objects_worker, nprocs, (free_port, str(tmp_path)), timeout=90) == \
        ["ok"] * nprocs
    assert not list(tmp_path.iterdir())  # nothing was created by any rank


def test_restricted_loads_in_process(tmp_path):
    path = tmp_path / "pwned"
    for how in ("system", "exec", "open"):
        with pytest.raises(pickle.UnpicklingError):
            meshcomm.objects.restricted_loads(pickle.dumps(Evil(str(path), how)))
    assert not path.exists()
    assert meshcomm.objects.restricted_loads(pickle.dumps(PLAIN)) == PLAIN
