"""Every argument check, with the exception type MindSpore's API raises for
it, raised before any communication.

The cases run in one job of two processes (each rank runs every case; a
check that let a call through would start a collective the other rank
also starts, so a missing check shows as a wrong result, not a hang); the
parametrized tests then read that job's results.
"""

from datetime import timedelta

import numpy as np
import pytest

import meshcomm as mc
from meshcomm import DistError, P2POp
from mcutil import init
from ports import free_port

X = np.ones(4, np.float32)
RO = np.ones(4, np.float32)
RO.flags.writeable = False
STRIDED = np.ones((4, 4), np.float32)[:, ::2]
G = "hccl_world_group"
NOGROUP = "hccl_2_0123456789abcdef"


def me():
    return mc.get_rank()


def _noninplace(name, call):
    def run():
        mc.set_comm_ops_inplace(False, [name])
        try:
            call()
        finally:
            mc.set_comm_ops_inplace(True)
    return run


def _fake_store():
    return object.__new__(mc.TCPStore)  # passes isinstance; never used


def _two():
    return [np.ones(4, np.float32), np.ones(4, np.float32)]


# (id, call, expected exception); the job has 2 ranks, world size 2.
CASES = [
    ("inplace/is_enable", lambda: mc.set_comm_ops_inplace(1), TypeError),
    ("inplace/func_list_type", lambda: mc.set_comm_ops_inplace(True, "all_reduce"), TypeError),
    ("inplace/func_list_name", lambda: mc.set_comm_ops_inplace(True, ["nope"]), ValueError),
    ("init/init_method_type", lambda: mc.init_process_group(init_method=5), TypeError),
    ("init/timeout_type", lambda: mc.init_process_group(timeout=5), TypeError),
    ("init/world_size_type", lambda: mc.init_process_group(world_size="2"), TypeError),
    ("init/rank_type", lambda: mc.init_process_group(rank=1.5), TypeError),
    ("init/store_type", lambda: mc.init_process_group(store="s"), TypeError),
    ("init/backend", lambda: mc.init_process_group(backend="nccl"), ValueError),
    ("init/both", lambda: mc.init_process_group(init_method="env://", store=_fake_store(),
                                                world_size=2, rank=0), ValueError),
    ("init/world_size_value", lambda: mc.init_process_group(init_method="tcp://h:1", rank=0),
     ValueError),
    ("init/rank_value", lambda: mc.init_process_group(store=_fake_store(), world_size=2),
     ValueError),
    ("init/timeout_value", lambda: mc.init_process_group(timeout=timedelta(seconds=-1)),
     ValueError),
    ("init/twice", lambda: mc.init_process_group(init_method="tcp://127.0.0.1:1", rank=0,
                                                 world_size=1), DistError),
    ("destroy/type", lambda: mc.destroy_process_group(5), TypeError),
    ("destroy/unknown", lambda: mc.destroy_process_group(NOGROUP), DistError),
    ("get_rank/type", lambda: mc.get_rank(5), TypeError),
    ("get_world_size/type", lambda: mc.get_world_size(5), TypeError),
    ("new_group/ranks_type", lambda: mc.new_group((0, 1)), TypeError),
    ("new_group/duplicate", lambda: mc.new_group([0, 0]), TypeError),
    ("new_group/element", lambda: mc.new_group([0, "1"]), TypeError),
    ("new_group/backend", lambda: mc.new_group([0, 1], backend="nccl"), TypeError),
    ("new_group/pg_options", lambda: mc.new_group([0, 1], pg_options={}), TypeError),
    ("new_group/timeout", lambda: mc.new_group([0, 1], timeout="1s"), TypeError),
    ("group_options/config", lambda: mc.new_group([0, 1], pg_options=mc.GroupOptions([])),
     TypeError),
    ("get_backend/type", lambda: mc.get_backend(5), TypeError),
    ("get_global_rank/rank_type", lambda: mc.get_global_rank(G, "1"), TypeError),
    ("get_global_rank/group_type", lambda: mc.get_global_rank(5, 0), TypeError),
    ("get_global_rank/unknown", lambda: mc.get_global_rank(NOGROUP, 0), DistError),
    ("get_group_rank/rank_type", lambda: mc.get_group_rank(None, "0"), TypeError),
    ("get_group_rank/group_type", lambda: mc.get_group_rank(5, 0), TypeError),
    ("get_group_rank/not_member", lambda: mc.get_group_rank(None, 7), ValueError),
    ("get_process_group_ranks/type", lambda: mc.get_process_group_ranks(5), TypeError),
    ("all_reduce/tensor", lambda: mc.all_reduce([1.0, 2.0]), TypeError),
    ("all_reduce/op_type", lambda: mc.all_reduce(X, op=1), TypeError),
    ("all_reduce/op_value", lambda: mc.all_reduce(X, op="avg"), TypeError),
    ("all_reduce/group", lambda: mc.all_reduce(X, group=1), TypeError),
    ("all_reduce/async", lambda: mc.all_reduce(X, async_op=1), TypeError),
    ("all_reduce/strided", lambda: mc.all_reduce(STRIDED), ValueError),
    ("all_reduce/read_only", lambda: mc.all_reduce(RO), ValueError),
    ("all_reduce/dtype", lambda: mc.all_reduce(np.array(["s"])), TypeError),
    ("all_reduce/unknown_group", lambda: mc.all_reduce(X, group=NOGROUP), DistError),
    ("all_reduce/complex_max", lambda: mc.all_reduce(np.ones(2, np.complex64), op="max"),
     ValueError),
    ("all_reduce/noninplace_tensor", _noninplace("all_reduce", lambda: mc.all_reduce(3.0)),
     TypeError),
    ("all_gather_into_tensor/input", lambda: mc.all_gather_into_tensor(np.zeros(8), [1]),
     TypeError),
    ("all_gather_into_tensor/output", lambda: mc.all_gather_into_tensor([0] * 8, X), TypeError),
    ("all_gather_into_tensor/group", lambda: mc.all_gather_into_tensor(np.zeros(8, np.float32),
                                                                       X, group=[]), TypeError),
    ("all_gather_into_tensor/async", lambda: mc.all_gather_into_tensor(np.zeros(8, np.float32),
                                                                       X, async_op="no"),
     TypeError),
    ("all_gather_into_tensor/size", lambda: mc.all_gather_into_tensor(np.zeros(5, np.float32),
                                                                      X), ValueError),
    ("all_gather_into_tensor/noninplace_input",
     _noninplace("all_gather_into_tensor", lambda: mc.all_gather_into_tensor(None, None)),
     TypeError),
    ("all_gather_into_tensor_uneven/noninplace",
     _noninplace("all_gather_into_tensor_uneven",
                 lambda: mc.all_gather_into_tensor_uneven(np.zeros(8), X)), ValueError),
    ("all_gather_into_tensor_uneven/group",
     lambda: mc.all_gather_into_tensor_uneven(np.zeros(8), X, group=1), TypeError),
    ("all_gather_into_tensor_uneven/async",
     lambda: mc.all_gather_into_tensor_uneven(np.zeros(8), X, async_op=None), TypeError),
    ("all_gather_into_tensor_uneven/sizes_type",
     lambda: mc.all_gather_into_tensor_uneven(np.zeros(8, np.float32), X, "44"), TypeError),
    ("all_gather_into_tensor_uneven/sizes_value",
     lambda: mc.all_gather_into_tensor_uneven(np.zeros(8, np.float32), X, [3, 5]), ValueError),
    ("all_gather_into_tensor_uneven/sizes_len",
     lambda: mc.all_gather_into_tensor_uneven(np.zeros(8, np.float32), X, [8]), ValueError),
    ("reduce_scatter_tensor/input", lambda: mc.reduce_scatter_tensor(X, "x"), TypeError),
    ("reduce_scatter_tensor/output", lambda: mc.reduce_scatter_tensor(None, X), TypeError),
    ("reduce_scatter_tensor/op_type", lambda: mc.reduce_scatter_tensor(X[:2].copy(), X, op=0),
     TypeError),
    ("reduce_scatter_tensor/op_value",
     lambda: mc.reduce_scatter_tensor(X[:2].copy(), X, op="mean"), TypeError),
    ("reduce_scatter_tensor/group", lambda: mc.reduce_scatter_tensor(X[:2].copy(), X, group=0),
     TypeError),
    ("reduce_scatter_tensor/async",
     lambda: mc.reduce_scatter_tensor(X[:2].copy(), X, async_op=0), TypeError),
    ("reduce_scatter_tensor/rows",
     lambda: mc.reduce_scatter_tensor(X[:2].copy(), np.ones(5, np.float32)), ValueError),
    ("reduce_scatter_tensor_uneven/noninplace",
     _noninplace("reduce_scatter_tensor_uneven",
                 lambda: mc.reduce_scatter_tensor_uneven(X[:2].copy(), X)), ValueError),
    ("reduce_scatter_tensor_uneven/prod",
     lambda: mc.reduce_scatter_tensor_uneven(X[:2].copy(), X, op="prod"), TypeError),
    ("reduce_scatter_tensor_uneven/op_type",
     lambda: mc.reduce_scatter_tensor_uneven(X[:2].copy(), X, op=None), TypeError),
    ("reduce_scatter_tensor_uneven/group",
     lambda: mc.reduce_scatter_tensor_uneven(X[:2].copy(), X, group=2), TypeError),
    ("reduce_scatter_tensor_uneven/async",
     lambda: mc.reduce_scatter_tensor_uneven(X[:2].copy(), X, async_op=2), TypeError),
    ("reduce_scatter_tensor_uneven/sizes",
     lambda: mc.reduce_scatter_tensor_uneven(X[:2].copy(), X, [2, 3]), ValueError),
    ("reduce/noninplace", _noninplace("reduce", lambda: mc.reduce(X, 0)), ValueError),
    ("reduce/tensor", lambda: mc.reduce("x", 0), TypeError),
    ("reduce/dst", lambda: mc.reduce(X, "0"), TypeError),
    ("reduce/op_type", lambda: mc.reduce(X, 0, op=[]), TypeError),
    ("reduce/op_value", lambda: mc.reduce(X, 0, op="xor"), TypeError),
    ("reduce/group", lambda: mc.reduce(X, 0, group=1.0), TypeError),
    ("reduce/async", lambda: mc.reduce(X, 0, async_op="yes"), TypeError),
    ("reduce/dst_value", lambda: mc.reduce(X, 5), ValueError),
    ("broadcast/noninplace", _noninplace("broadcast", lambda: mc.broadcast(X, 0)), ValueError),
    ("broadcast/tensor", lambda: mc.broadcast(None, 0), TypeError),
    ("broadcast/src", lambda: mc.broadcast(X, None), TypeError),
    ("broadcast/group", lambda: mc.broadcast(X, 0, group=b"g"), TypeError),
    ("broadcast/async", lambda: mc.broadcast(X, 0, async_op=[]), TypeError),
    ("broadcast/src_value", lambda: mc.broadcast(X, -1), ValueError),
    ("barrier/group", lambda: mc.barrier(group=0), TypeError),
    ("barrier/async", lambda: mc.barrier(async_op=0), TypeError),
    ("gather_into_tensor/noninplace",
     _noninplace("gather_into_tensor", lambda: mc.gather_into_tensor(np.zeros(8), X)),
     ValueError),
    ("gather_into_tensor/input", lambda: mc.gather_into_tensor(np.zeros(8), 1), TypeError),
    ("gather_into_tensor/output", lambda: mc.gather_into_tensor(1, X), TypeError),
    ("gather_into_tensor/dst", lambda: mc.gather_into_tensor(np.zeros(8), X, dst=0.0),
     TypeError),
    ("gather_into_tensor/group", lambda: mc.gather_into_tensor(np.zeros(8), X, group=()),
     TypeError),
    ("gather_into_tensor/async", lambda: mc.gather_into_tensor(np.zeros(8), X, async_op=1),
     TypeError),
    ("scatter_tensor/noninplace",
     _noninplace("scatter_tensor", lambda: mc.scatter_tensor(X, np.zeros(8))), ValueError),
    ("scatter_tensor/input", lambda: mc.scatter_tensor(X, [0] * 8), TypeError),
    ("scatter_tensor/output", lambda: mc.scatter_tensor({}, X), TypeError),
    ("scatter_tensor/src", lambda: mc.scatter_tensor(X, X, src="0"), TypeError),
    ("scatter_tensor/group", lambda: mc.scatter_tensor(X, X, group=1), TypeError),
    ("scatter_tensor/async", lambda: mc.scatter_tensor(X, X, async_op=1), TypeError),
    ("all_gather/noninplace", _noninplace("all_gather", lambda: mc.all_gather(_two(), X)),
     ValueError),
    ("all_gather/list", lambda: mc.all_gather(X, X), TypeError),
    ("all_gather/element", lambda: mc.all_gather([X, 1], X), TypeError),
    ("all_gather/mixed", lambda: mc.all_gather([X, np.ones(4)], X), TypeError),
    ("all_gather/tensor", lambda: mc.all_gather(_two(), [1]), TypeError),
    ("all_gather/group", lambda: mc.all_gather(_two(), X, group=1), TypeError),
    ("all_gather/async", lambda: mc.all_gather(_two(), X, async_op=1), TypeError),
    ("all_gather/length", lambda: mc.all_gather([np.ones(4, np.float32)], X), TypeError),
    ("all_gather/shape", lambda: mc.all_gather(_two(), np.ones(3, np.float32)), TypeError),
    ("all_gather/dtype", lambda: mc.all_gather(_two(), np.ones(4)), TypeError),
    ("reduce_scatter/noninplace",
     _noninplace("reduce_scatter", lambda: mc.reduce_scatter(X.copy(), _two())), ValueError),
    ("reduce_scatter/list", lambda: mc.reduce_scatter(X.copy(), X), TypeError),
    ("reduce_scatter/mixed", lambda: mc.reduce_scatter(X.copy(), [X, np.ones(4)]), TypeError),
    ("reduce_scatter/output", lambda: mc.reduce_scatter(1, _two()), TypeError),
    ("reduce_scatter/group", lambda: mc.reduce_scatter(X.copy(), _two(), group=1), TypeError),
    ("reduce_scatter/async", lambda: mc.reduce_scatter(X.copy(), _two(), async_op=1),
     TypeError),
    ("reduce_scatter/op_type", lambda: mc.reduce_scatter(X.copy(), _two(), op=1), TypeError),
    ("reduce_scatter/op_value", lambda: mc.reduce_scatter(X.copy(), _two(), op="s"), TypeError),
    ("reduce_scatter/length", lambda: mc.reduce_scatter(X.copy(), [X]), TypeError),
    ("reduce_scatter/shape", lambda: mc.reduce_scatter(np.ones(2, np.float32), _two()),
     TypeError),
    ("reduce_scatter/dtype", lambda: mc.reduce_scatter(np.ones(4), _two()), TypeError),
    ("scatter/noninplace", _noninplace("scatter", lambda: mc.scatter(X.copy(), _two())),
     ValueError),
    ("scatter/list", lambda: mc.scatter(X.copy(), None), TypeError),
    ("scatter/mixed_shapes", lambda: mc.scatter(X.copy(), [X, np.ones(3, np.float32)]),
     TypeError),
    ("scatter/tensor", lambda: mc.scatter("t", _two()), TypeError),
    ("scatter/src", lambda: mc.scatter(X.copy(), _two(), src="0"), TypeError),
    ("scatter/group", lambda: mc.scatter(X.copy(), _two(), group=1), TypeError),
    ("scatter/async", lambda: mc.scatter(X.copy(), _two(), async_op=1), TypeError),
    ("scatter/length_at_src", lambda: mc.scatter(X.copy(), [X], src=me()), TypeError),
    ("scatter/shape_at_src", lambda: mc.scatter(np.ones(2, np.float32), _two(), src=me()),
     TypeError),
    ("gather/noninplace", _noninplace("gather", lambda: mc.gather(X, _two())), ValueError),
    ("gather/tensor", lambda: mc.gather(1, _two()), TypeError),
    ("gather/list", lambda: mc.gather(X, None), TypeError),
    ("gather/dst", lambda: mc.gather(X, _two(), dst="0"), TypeError),
    ("gather/group", lambda: mc.gather(X, _two(), group=1), TypeError),
    ("gather/async", lambda: mc.gather(X, _two(), async_op=1), TypeError),
    ("gather/length_at_dst", lambda: mc.gather(X, [X.copy()], dst=me()), TypeError),
    ("gather/dtype_at_dst", lambda: mc.gather(np.ones(4), _two(), dst=me()), TypeError),
    ("all_to_all/group", lambda: mc.all_to_all(_two(), _two(), group=1), TypeError),
    ("all_to_all/async", lambda: mc.all_to_all(_two(), _two(), async_op=1), TypeError),
    ("all_to_all/input_list", lambda: mc.all_to_all(_two(), X), TypeError),
    ("all_to_all/input_element", lambda: mc.all_to_all(_two(), [X, 2]), TypeError),
    ("all_to_all/input_mixed", lambda: mc.all_to_all(_two(), [X, np.ones(4)]), TypeError),
    ("all_to_all/output_list", lambda: mc.all_to_all(X, _two()), TypeError),
    ("all_to_all/output_element", lambda: mc.all_to_all([X, (2,)], _two()), TypeError),
    ("all_to_all/length", lambda: mc.all_to_all([X.copy()], [X]), ValueError),
    ("all_to_all/noninplace_shape",
     _noninplace("all_to_all", lambda: mc.all_to_all([(4,), "4"], _two())), TypeError),
    ("all_to_all_single/input", lambda: mc.all_to_all_single(X.copy(), 1), TypeError),
    ("all_to_all_single/output", lambda: mc.all_to_all_single((4,), X), TypeError),
    ("all_to_all_single/group", lambda: mc.all_to_all_single(X.copy(), X, group=1), TypeError),
    ("all_to_all_single/async", lambda: mc.all_to_all_single(X.copy(), X, async_op=1),
     TypeError),
    ("all_to_all_single/rows", lambda: mc.all_to_all_single(X.copy(), np.ones(3, np.float32)),
     ValueError),
    ("all_to_all_single/out_rows", lambda: mc.all_to_all_single(np.ones(3, np.float32), X),
     ValueError),
    ("all_to_all_single/sizes_type", lambda: mc.all_to_all_single(X.copy(), X, None, "22"),
     TypeError),
    ("all_to_all_single/sizes_sum", lambda: mc.all_to_all_single(X.copy(), X, None, [1, 1]),
     ValueError),
    ("all_to_all_v_c/input", lambda: mc.all_to_all_v_c(X.copy(), 1, [0, 0, 0, 0]), TypeError),
    ("all_to_all_v_c/output", lambda: mc.all_to_all_v_c(1, X, [0, 0, 0, 0]), TypeError),
    ("all_to_all_v_c/group", lambda: mc.all_to_all_v_c(X.copy(), X, [0] * 4, group=1),
     TypeError),
    ("all_to_all_v_c/async", lambda: mc.all_to_all_v_c(X.copy(), X, [0] * 4, async_op=1),
     TypeError),
    ("all_to_all_v_c/matrix_type", lambda: mc.all_to_all_v_c(X.copy(), X, (0, 0, 0, 0)),
     TypeError),
    ("all_to_all_v_c/matrix_element", lambda: mc.all_to_all_v_c(X.copy(), X, [0, 0, 0, 0.5]),
     TypeError),
    ("all_to_all_v_c/matrix_size", lambda: mc.all_to_all_v_c(X.copy(), X, [0, 0, 0]),
     TypeError),
    ("all_to_all_v_c/negative", lambda: mc.all_to_all_v_c(X.copy(), X, [0, 0, 0, -1]),
     ValueError),
    ("all_to_all_v_c/too_many", lambda: mc.all_to_all_v_c(X.copy(), X, [3, 3, 3, 3]),
     ValueError),
    ("send/tensor", lambda: mc.send([1], 1 - me()), TypeError),
    ("send/dst", lambda: mc.send(X, "1"), TypeError),
    ("send/group", lambda: mc.send(X, 1 - me(), group=1), TypeError),
    ("send/tag", lambda: mc.send(X, 1 - me(), tag="1"), TypeError),
    ("send/self", lambda: mc.send(X, me()), ValueError),
    ("send/not_member", lambda: mc.send(X, 9), ValueError),
    ("isend/self", lambda: mc.isend(X, me()), ValueError),
    ("isend/tensor", lambda: mc.isend(None, 1 - me()), TypeError),
    ("recv/tensor", lambda: mc.recv(3, 1 - me()), TypeError),
    ("recv/src", lambda: mc.recv(X.copy(), 1.0), TypeError),
    ("recv/group", lambda: mc.recv(X.copy(), 1 - me(), group=1), TypeError),
    ("recv/self", lambda: mc.recv(X.copy(), me()), ValueError),
    ("recv/read_only", lambda: mc.recv(RO, 1 - me()), ValueError),
    ("irecv/src", lambda: mc.irecv(X.copy(), "0"), TypeError),
    ("irecv/not_member", lambda: mc.irecv(X.copy(), 4), ValueError),
    ("P2POp/op_name", lambda: P2POp("send", X, 1), TypeError),
    ("P2POp/op_function", lambda: P2POp(mc.send, X, 1), TypeError),
    ("P2POp/tensor", lambda: P2POp("isend", [1], 1), TypeError),
    ("P2POp/peer", lambda: P2POp("isend", X, "1"), TypeError),
    ("P2POp/tag", lambda: P2POp("isend", X, 1, tag=1), NotImplementedError),
    ("batch/noninplace", _noninplace("batch_isend_irecv",
                                     lambda: mc.batch_isend_irecv([P2POp("isend", X, 1)])),
     ValueError),
    ("batch/empty", lambda: mc.batch_isend_irecv([]), TypeError),
    ("batch/element", lambda: mc.batch_isend_irecv([P2POp("isend", X, 1), "op"]), TypeError),
    ("batch/groups", lambda: mc.batch_isend_irecv([P2POp("isend", X, 1),
                                                   P2POp("irecv", X, 1, group=G)]), TypeError),
    ("batch/self", lambda: mc.batch_isend_irecv([P2POp("isend", X, me())]), ValueError),
    ("batch/read_only_recv", lambda: mc.batch_isend_irecv([P2POp("irecv", RO, 1 - me())]),
     ValueError),
    ("all_gather_object/noninplace",
     _noninplace("all_gather_object", lambda: mc.all_gather_object([None] * 2, 1)), ValueError),
    ("all_gather_object/group", lambda: mc.all_gather_object([None] * 2, 1, group=1), TypeError),
    ("all_gather_object/list", lambda: mc.all_gather_object([None], 1), TypeError),
    ("broadcast_object_list/noninplace",
     _noninplace("broadcast_object_list", lambda: mc.broadcast_object_list([1])), ValueError),
    ("broadcast_object_list/group", lambda: mc.broadcast_object_list([1], group=1), TypeError),
    ("broadcast_object_list/src", lambda: mc.broadcast_object_list([1], src="0"), TypeError),
    ("broadcast_object_list/list", lambda: mc.broadcast_object_list([]), TypeError),
    ("gather_object/noninplace",
     _noninplace("gather_object", lambda: mc.gather_object(1, [None] * 2)), ValueError),
    ("gather_object/group", lambda: mc.gather_object(1, [None] * 2, group=1), TypeError),
    ("gather_object/dst", lambda: mc.gather_object(1, [None] * 2, dst="0"), TypeError),
    ("gather_object/list_at_dst", lambda: mc.gather_object(1, [None], dst=me()), TypeError),
    ("scatter_object_list/noninplace",
     _noninplace("scatter_object_list", lambda: mc.scatter_object_list([None], [1, 2])),
     ValueError),
    ("scatter_object_list/group", lambda: mc.scatter_object_list([None], [1, 2], group=1),
     TypeError),
    ("scatter_object_list/output", lambda: mc.scatter_object_list([], [1, 2]), TypeError),
    ("scatter_object_list/src", lambda: mc.scatter_object_list([None], [1, 2], src=None),
     TypeError),
    ("scatter_object_list/input_at_src", lambda: mc.scatter_object_list([None], [1], src=me()),
     TypeError),
    ("handle/timeout", lambda: mc.CommHandle().wait(5), TypeError),
    ("bfloat16/wrap", lambda: mc.bfloat16(np.ones(2, np.float32)), TypeError),
]


def _checks_worker(rank, n, port):
    init(rank, n, port)
    results = {}
    for case_id, call, _ in CASES:
        try:
            call()
        except BaseException as e:  # recorded, compared by the parent
            results[case_id] = (type(e).__name__, str(e))
        else:
            results[case_id] = (None, "")
    # Nothing above communicated: the world is in step and usable.
    x = np.ones(2)
    mc.all_reduce(x)
    assert (x == n).all()
    mc.destroy_process_group()
    return results


@pytest.fixture(scope="module")
def outcomes():
    from conftest import run_processes
    return run_processes(_checks_worker, 2, (free_port(),), timeout=120)


@pytest.mark.parametrize("case_id,expected", [(c[0], c[2]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_check(outcomes, case_id, expected):
    for rank, results in enumerate(outcomes):
        got, message = results[case_id]
        assert got == expected.__name__, f"rank {rank}: {case_id} raised {got}: {message}"
        assert message, f"rank {rank}: {case_id} raised without a message"


def test_case_ids_are_unique():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))
