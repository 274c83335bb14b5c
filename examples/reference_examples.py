"""The examples of MindSpore's communication API docstrings, as one script
for two processes, with numpy arrays in place of MindSpore tensors. Each
prints what its docstring shows.

    meshrun --nproc-per-node 2 examples/reference_examples.py [name ...]

With no names every example runs in turn.
"""

import sys

import numpy as np

import meshcomm as dist


def all_reduce():
    tensor = np.ones([2, 8]).astype(np.float32)
    dist.all_reduce(tensor)
    print(tensor)  # [[2. 2. ...]]


def all_gather_into_tensor():
    input_tensor = np.ones([3, 3]).astype(np.float32)
    out = np.zeros([6, 3]).astype(np.float32)
    dist.all_gather_into_tensor(out, input_tensor)
    print(out)  # six rows of ones


def reduce_scatter_tensor():
    input_tensor = np.ones([8, 8]).astype(np.float32)
    output = np.ones([4, 8]).astype(np.float32)
    dist.reduce_scatter_tensor(output, input_tensor)
    print(output)  # four rows of twos


def broadcast():
    data = np.ones([2, 4]).astype(np.int32)
    dist.broadcast(data, src=0)
    print(data)  # [[1 1 1 1] [1 1 1 1]]


def send_recv():
    if dist.get_rank() == 0:
        dist.send(np.ones([2, 8]).astype(np.float32), dst=1)
    else:
        out = np.zeros([2, 8]).astype(np.float32)
        dist.recv(out, src=0)
        print(out)  # [[1. 1. ...]]


def batch_isend_irecv():
    rank, n = dist.get_rank(), dist.get_world_size()
    send_tensor = np.full([2], rank + 1, dtype=np.float32)
    recv_tensor = np.zeros([2], dtype=np.float32)
    ops = [dist.P2POp(dist.isend, send_tensor, (rank + 1) % n),
           dist.P2POp(dist.irecv, recv_tensor, (rank - 1 + n) % n)]
    for handle in dist.batch_isend_irecv(ops):
        handle.wait()
    print(recv_tensor)  # rank 0: [2. 2.], rank 1: [1. 1.]


def all_to_all():
    rank = dist.get_rank()
    if rank == 0:
        send_list = [np.array([0, 1, 2]).astype(np.float32), np.array([[3, 4], [5, 6]]).astype(np.float32)]
        recv_list = [np.zeros(3, np.float32), np.zeros(3, np.float32)]
    else:
        send_list = [np.array([7, 8, 9]).astype(np.float32), np.array([[10, 11], [12, 13]]).astype(np.float32)]
        recv_list = [np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32)]
    dist.all_to_all(recv_list, send_list)
    print(recv_list)  # rank 0: [0 1 2], [7 8 9]; rank 1: [[3 4] [5 6]], [[10 11] [12 13]]


def gather_object():
    rank = dist.get_rank()
    obj = ["test", {1: 2}]
    gathered = [None, None] if rank == 0 else None
    dist.gather_object(obj, gathered, dst=0)
    if rank == 0:
        print(gathered)  # [['test', {1: 2}], ['test', {1: 2}]]


def new_group():
    print("group is:", dist.new_group())  # the world group's name


EXAMPLES = [all_reduce, all_gather_into_tensor, reduce_scatter_tensor, broadcast, send_recv,
            batch_isend_irecv, all_to_all, gather_object, new_group]


def main(names):
    dist.init_process_group()
    if dist.get_world_size() != 2:
        print("these examples are written for 2 processes", file=sys.stderr)
        return 2
    chosen = [e for e in EXAMPLES if not names or e.__name__ in names]
    for example in chosen:
        if dist.get_rank() == 0:
            print(f"--- {example.__name__}", flush=True)
        dist.barrier()
        example()
        sys.stdout.flush()
        dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
