"""meshcomm's all_reduce as a torch operator, and as the fastest call from Python.

``dist.all_reduce`` spends most of a small call in torch.distributed's own
Python wrapper, and any torch operator called from Python spends about a
microsecond in torch's dispatch. A tensor-parallel model that all_reduces
small activations twice per layer can call meshcomm directly instead::

    import meshcomm.torch
    dist.init_process_group("meshcomm")
    group = meshcomm.torch.group_handle()           # once (the default group)
    meshcomm.torch.all_reduce_(x, group)             # in place, sum
    meshcomm.torch.all_reduce_(x, group, "max")      # sum, avg, max, min, prod

In eager mode ``all_reduce_`` calls meshcomm's kernel with no dispatch in
between; under torch.compile it is the operator
``torch.ops.meshcomm.all_reduce_``, which torch traces like any other (and
which can be called directly, as DeepSpeed's CPU all_reduce is; it returns
nothing).
``torch.ops.meshcomm.all_reduce(x, group, op)`` returns a new tensor.

These need the backend's native part (built against the torch that runs it:
cmake/torch_native.cmake); without it group_handle raises.
"""

import torch
import torch.distributed as dist

from .process_group import ProcessGroupMeshcomm, _native

__all__ = ["group_handle", "all_reduce_"]

_OP_NAMES = {
    dist.ReduceOp.SUM: "sum",
    dist.ReduceOp.AVG: "avg",
    dist.ReduceOp.MAX: "max",
    dist.ReduceOp.MIN: "min",
    dist.ReduceOp.PRODUCT: "prod",
}


def group_handle(group=None):
    """The handle torch.ops.meshcomm's operators take for ``group`` (a torch
    group on the meshcomm backend; None: the default group). It names the
    group until the group is destroyed."""
    if group is None:
        if not dist.is_initialized():
            raise RuntimeError("meshcomm: no default group: call "
                               "dist.init_process_group('meshcomm') first")
        group = dist.distributed_c10d._get_default_group()
    backend = group
    if not isinstance(backend, ProcessGroupMeshcomm):
        try:
            backend = group._get_backend(torch.device("cpu"))
        except (AttributeError, RuntimeError):
            backend = None
    if not isinstance(backend, ProcessGroupMeshcomm):
        raise ValueError(f"meshcomm: {group!r} is not a group of the meshcomm backend; "
                         f"torch.ops.meshcomm runs on groups made with backend='meshcomm'")
    handle = backend._op_handle
    if handle is None:
        backend._group()  # raises when the group was destroyed
        raise RuntimeError("meshcomm: torch.ops.meshcomm needs the backend's native part, "
                           "which is not loaded (not built against this torch, or "
                           "MESHCOMM_TORCH_NATIVE=0); build meshcomm with "
                           "-DMESHCOMM_TORCH_PYTHON=<python with this torch>")
    return handle


def _op_name(op):
    if isinstance(op, str):
        return op
    try:
        return _OP_NAMES[op]
    except (KeyError, TypeError):
        raise ValueError(f"meshcomm: torch.ops.meshcomm.all_reduce takes SUM, AVG, MAX, MIN or "
                         f"PRODUCT; got {op!r}") from None


_is_compiling = torch.compiler.is_compiling
_kernel = _native.all_reduce_ if _native is not None else None


def all_reduce_(tensor, group, op="sum"):
    """Reduces ``tensor`` in place across the group of the handle ``group``
    (from :func:`group_handle`; a torch group is looked up each call) by
    ``op`` ("sum", "avg", "max", "min", "prod", or torch's ReduceOp) and
    returns it. Blocking; agreement across ranks is checked as for every
    meshcomm call."""
    if type(group) is not int:
        group = group_handle(group)
    if type(op) is not str:
        op = _op_name(op)
    if _is_compiling():
        torch.ops.meshcomm.all_reduce_(tensor, group, op)
        return tensor
    return _kernel(tensor, group, op)
