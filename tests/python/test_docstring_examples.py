"""Every example in the docstrings of MindSpore's communication API, run
with the number of processes it states, with numpy arrays in place of
mindspore Tensors, and compared with the output the docstring shows.

Each example is a function of this module printing what the docstring's
``print`` calls print; a job of 2, 4 or 8 processes (initialised from the
environment, as the docstrings do with a bare ``init_process_group()``)
runs them in order and returns the captured output per rank. Where the
docstring prints mindspore Tensor reprs, the values are compared instead.
"""

import os
from datetime import timedelta

import numpy as np

from meshcomm import (P2POp, TCPStore, all_gather, all_gather_into_tensor,
                      all_gather_into_tensor_uneven, all_gather_object, all_reduce, all_to_all,
                      all_to_all_single, all_to_all_v_c, barrier, batch_isend_irecv, broadcast,
                      broadcast_object_list, destroy_process_group, gather, gather_into_tensor,
                      gather_object, get_backend, get_global_rank, get_group_rank,
                      get_process_group_ranks, get_rank, get_world_size, init_process_group,
                      irecv, is_available, is_initialized, isend, new_group, recv, reduce,
                      reduce_scatter, reduce_scatter_tensor, reduce_scatter_tensor_uneven, scatter,
                      scatter_object_list, scatter_tensor, send, set_comm_ops_inplace)
from mcutil import capture
from ports import free_port

f32 = np.float32


def norm(text):
    return " ".join(text.split())


def ones28():
    return np.ones([2, 8]).astype(f32)


# ---- 2-process examples; each prints what its docstring prints -------------

def ex_set_comm_ops_inplace(rank):
    set_comm_ops_inplace(True)


def ex_comm_handle_wait(rank):
    # The example unpacks (output, handle): the non-in-place form.
    set_comm_ops_inplace(False, ["all_reduce"])
    input_tensor = ones28()
    output, handle = all_reduce(input_tensor, async_op=True)
    handle.wait()
    print(output)
    set_comm_ops_inplace(True)


def ex_is_initialized(rank):
    print(is_initialized())


def ex_get_rank(rank):
    print(get_rank())


def ex_new_group(rank):
    group = new_group()
    print("group is: ", group)


def ex_get_backend(rank):
    print("backend is: ", get_backend())


def ex_all_reduce(rank):
    tensor = ones28()
    all_reduce(tensor)
    print(tensor)


def ex_all_gather_into_tensor(rank):
    input_tensor = ones28()
    out_tensor = np.zeros([4, 8]).astype(f32)
    all_gather_into_tensor(out_tensor, input_tensor)
    print(out_tensor)


def ex_all_gather_into_tensor_uneven(rank):
    input_tensor = np.ones([3, 4] if get_rank() == 0 else [2, 4]).astype(f32)
    out_tensor = np.zeros([5, 4]).astype(f32)
    all_gather_into_tensor_uneven(out_tensor, input_tensor, [3, 2])
    print(out_tensor)


def ex_reduce_scatter_tensor(rank):
    input_tensor = np.ones([8, 8]).astype(f32)
    output_tensor = np.ones([4, 8]).astype(f32)
    reduce_scatter_tensor(output_tensor, input_tensor)
    print(output_tensor)


def ex_reduce_scatter_tensor_uneven(rank):
    input_tensor = np.ones([5, 8]).astype(f32)
    output_tensor = np.ones([2, 8] if get_rank() == 0 else [3, 8]).astype(f32)
    reduce_scatter_tensor_uneven(output_tensor, input_tensor, [2, 3])
    print(output_tensor)


def ex_reduce(rank):
    input_tensor = ones28()
    reduce(input_tensor, 1)
    print(input_tensor)


def ex_p2p_op(rank):
    send_tensor = np.array(1.0, f32)
    P2POp("isend", send_tensor, 1)
    P2POp(isend, send_tensor, 1)
    recv_tensor = np.array(0.0, f32)
    P2POp("irecv", recv_tensor, 0)
    P2POp(irecv, recv_tensor, 0)


def ex_batch_isend_irecv(rank):
    this_rank, world_size = get_rank(), get_world_size()
    next_rank = (this_rank + 1) % world_size
    prev_rank = (this_rank + world_size - 1) % world_size
    send_tensor = np.array(this_rank + 1, f32)
    recv_tensor = np.array(0.0, f32)
    output = batch_isend_irecv([P2POp("isend", send_tensor, next_rank),
                                P2POp("irecv", recv_tensor, prev_rank)])
    output[0].wait()  # mindspore syncs when printing a Tensor; numpy needs the wait
    print(recv_tensor)


def ex_scatter_tensor(rank):
    input = np.arange(8).reshape([4, 2]).astype(f32)
    output = np.zeros([2, 2]).astype(f32)
    scatter_tensor(output, input, src=0)
    print(output)


def ex_gather_into_tensor(rank):
    input = np.arange(4).reshape([2, 2]).astype(f32)
    output = np.zeros([4, 2]).astype(f32)
    gather_into_tensor(output, input, dst=0)
    print(output)


def ex_broadcast(rank):
    data = np.arange(8).reshape([2, 4]).astype(f32)
    broadcast(tensor=data, src=0)
    print(data)


def ex_barrier(rank):
    barrier()
    print("barrier finish!")


def ex_send_recv(rank):
    if get_rank() == 0:
        send(ones28(), 1)
    if get_rank() == 1:
        x = np.zeros([2, 8]).astype(f32)
        recv(x, src=0)
        print(x)


def ex_isend_irecv(rank):
    if get_rank() == 0:
        isend(ones28(), 1).wait()
    if get_rank() == 1:
        x = np.zeros([2, 8]).astype(f32)
        irecv(x, src=0).wait()
        print(x)


def ex_all_to_all(rank):
    if get_rank() == 0:
        send_list = [np.array(1.0, f32), np.array([[2, 3], [4, 5.0]], f32)]
        recv_list = [np.array(0, f32), np.array([0, 0.0], f32)]
    else:
        send_list = [np.array([2, 2.0], f32), np.array([4, 5, 6, 7.0], f32)]
        recv_list = [np.array([[0, 0.0], [0, 0]], f32), np.array([0, 0, 0, 0.0], f32)]
    all_to_all(recv_list, send_list)
    print([r.tolist() for r in recv_list])


def ex_all_to_all_single(rank):
    if get_rank() == 0:
        output = np.zeros([3, 3]).astype(f32)
        tensor = np.array([[0, 1, 2.0], [3, 4, 5], [6, 7, 8]], f32)
        all_to_all_single(output, tensor, [2, 1], [2, 1])
    else:
        output = np.zeros([2, 3]).astype(f32)
        tensor = np.array([[9, 10.0, 11], [12, 13, 14]], f32)
        all_to_all_single(output, tensor, [1, 1], [1, 1])
    print(output)


def ex_all_gather(rank):
    out_tensors = [np.zeros([2, 8]).astype(f32), np.zeros([2, 8]).astype(f32)]
    all_gather(out_tensors, ones28())
    print([t.tolist() for t in out_tensors])


def ex_reduce_scatter(rank):
    input_tensors = [np.ones([4, 8]).astype(f32), np.ones([4, 8]).astype(f32)]
    output_tensor = np.zeros([4, 8]).astype(f32)
    reduce_scatter(output_tensor, input_tensors)
    print(output_tensor)


def ex_scatter(rank):
    inputs = [np.ones([2, 2]).astype(f32), np.ones([2, 2]).astype(f32)]
    output = np.zeros([2, 2]).astype(f32)
    scatter(output, inputs, src=0)
    print(output)


def ex_gather(rank):
    input = np.arange(4).reshape([2, 2]).astype(f32)
    outputs = [np.zeros([2, 2]).astype(f32), np.zeros([2, 2]).astype(f32)]
    gather(input, outputs, dst=0)
    print([t.tolist() for t in outputs])


def ex_scatter_object_list(rank):
    out = [None]
    scatter_object_list(out, ["test", {1: 2}])
    print(out)


def ex_gather_object(rank):
    obj = ["test", {1: 2}]
    object_gather_list = [None, None]
    gather_object(obj[get_rank()], object_gather_list)
    if get_rank() == 0:
        print(object_gather_list)


def ex_broadcast_object_list(rank):
    obj = ["test", 12, {1: 2}]
    if get_rank() == 1:
        obj = [None, None, None]
    broadcast_object_list(obj)
    print(obj)


def ex_all_gather_object(rank):
    obj = ["test", {1: 2}]
    object_gather_list = [None, None]
    all_gather_object(object_gather_list, obj[get_rank()])
    print(object_gather_list)


def ex_all_to_all_v_c(rank):
    output = np.zeros([3]).astype(f32)
    tensor = np.array([0, 1, 2.0], f32) * get_rank()
    all_to_all_v_c(output, tensor, [0, 3, 3, 0])
    print(output.tolist())


TWO = "[[2. 2. 2. 2. 2. 2. 2. 2.] [2. 2. 2. 2. 2. 2. 2. 2.]]"
ONE = "[[1. 1. 1. 1. 1. 1. 1. 1.] [1. 1. 1. 1. 1. 1. 1. 1.]]"
EIGHT_ONES = [[1.0] * 8] * 2

# example -> expected output of rank 0 and rank 1 (both ranks when one string).
EXPECTED_2 = {
    "set_comm_ops_inplace": "",
    "comm_handle_wait": TWO,
    "is_initialized": "True",
    "get_rank": ("0", "1"),
    "new_group": "group is: hccl_world_group",
    "get_backend": "backend is: hccl",
    "all_reduce": TWO,
    "all_gather_into_tensor": " ".join(["[[1. 1. 1. 1. 1. 1. 1. 1.]"] + [
        "[1. 1. 1. 1. 1. 1. 1. 1.]"] * 2 + ["[1. 1. 1. 1. 1. 1. 1. 1.]]"]),
    "all_gather_into_tensor_uneven": "[[1. 1. 1. 1.] [1. 1. 1. 1.] [1. 1. 1. 1.] [1. 1. 1. 1.] "
                                     "[1. 1. 1. 1.]]",
    "reduce_scatter_tensor": "[[2. 2. 2. 2. 2. 2. 2. 2.] [2. 2. 2. 2. 2. 2. 2. 2.] "
                             "[2. 2. 2. 2. 2. 2. 2. 2.] [2. 2. 2. 2. 2. 2. 2. 2.]]",
    "reduce_scatter_tensor_uneven": (TWO, TWO[:-1] + " [2. 2. 2. 2. 2. 2. 2. 2.]]"),
    "reduce": (ONE, TWO),
    "p2p_op": "",
    "batch_isend_irecv": ("2.0", "1.0"),
    "scatter_tensor": ("[[0. 1.] [2. 3.]]", "[[4. 5.] [6. 7.]]"),
    "gather_into_tensor": ("[[0. 1.] [2. 3.] [0. 1.] [2. 3.]]",
                           "[[0. 0.] [0. 0.] [0. 0.] [0. 0.]]"),
    "broadcast": "[[0. 1. 2. 3.] [4. 5. 6. 7.]]",
    "barrier": "barrier finish!",
    "send_recv": ("", ONE),
    "isend_irecv": ("", ONE),
    "all_to_all": (str([1.0, [2.0, 2.0]]), str([[[2.0, 3.0], [4.0, 5.0]], [4.0, 5.0, 6.0, 7.0]])),
    "all_to_all_single": ("[[ 0. 1. 2.] [ 3. 4. 5.] [ 9. 10. 11.]]", "[[ 6. 7. 8.] [12. 13. 14.]]"),
    "all_gather": str([EIGHT_ONES, EIGHT_ONES]),
    "reduce_scatter": "[[2. 2. 2. 2. 2. 2. 2. 2.] [2. 2. 2. 2. 2. 2. 2. 2.] "
                      "[2. 2. 2. 2. 2. 2. 2. 2.] [2. 2. 2. 2. 2. 2. 2. 2.]]",
    "scatter": "[[1. 1.] [1. 1.]]",
    "gather": (str([[[0.0, 1.0], [2.0, 3.0]]] * 2), str([[[0.0, 0.0], [0.0, 0.0]]] * 2)),
    "scatter_object_list": ("['test']", "[{1: 2}]"),
    "gather_object": ("['test', {1: 2}]", ""),
    "broadcast_object_list": "['test', 12, {1: 2}]",
    "all_gather_object": "['test', {1: 2}]",
    "all_to_all_v_c": (str([0.0, 1.0, 2.0]), str([0.0, 0.0, 0.0])),
}


# ---- 4- and 8-process examples ---------------------------------------------

def ex_get_process_group_ranks(rank):
    print(get_process_group_ranks())


def ex_get_world_size(rank):
    print("group_size is: ", get_world_size())


def ex_get_global_rank(rank):
    rank_ids = [0, 4]
    if get_rank() in rank_ids:
        group = new_group(rank_ids)
        print("world_rank_id is: ", get_global_rank(group, 1))


def ex_get_group_rank(rank):
    rank_ids = [0, 4]
    if get_rank() in rank_ids:
        group = new_group(rank_ids)
        print("group_rank_id is: ", get_group_rank(group, 4))


def _job(rank, n, port, names):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), MESHCOMM_SHUTDOWN_WAIT_MS="10000")
    init_process_group()
    printed = {}
    for name in names:
        _, printed[name] = capture(globals()["ex_" + name], rank)
    destroy_process_group()
    return printed


def _expected(table, name, rank):
    want = table[name]
    return want[rank] if isinstance(want, tuple) else want


def _check(outcomes, table):
    for rank, printed in enumerate(outcomes):
        for name in table:
            want = _expected(table, name, rank)
            assert norm(printed[name]) == norm(want), (name, rank, printed[name])


def test_two_process_examples(run_workers):
    outcomes = run_workers(_job, 2, (free_port(), list(EXPECTED_2)), timeout=120)
    _check(outcomes, EXPECTED_2)


def test_four_process_examples(run_workers):
    table = {"get_process_group_ranks": "[0, 1, 2, 3]"}
    _check(run_workers(_job, 4, (free_port(), list(table)), timeout=120), table)


def test_eight_process_examples(run_workers):
    members = {0: True, 4: True}
    table = {
        "get_world_size": "group_size is: 8",
        "get_global_rank": tuple("world_rank_id is: 4" if r in members else "" for r in range(8)),
        "get_group_rank": tuple("group_rank_id is: 1" if r in members else "" for r in range(8)),
    }
    _check(run_workers(_job, 8, (free_port(), list(table)), timeout=150), table)


def test_single_process_examples():
    # is_available, and the TCPStore methods (one process serving itself).
    assert is_available() is True
    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=10))
    assert store.add("first_key", 1) == 1
    store.set("first_key", "first_value")
    assert store.get("first_key") == b"first_value"
    assert store.delete_key("first_key") is True
