"""What the torch backend asks of its arguments: its error types, torch's
reduce ops and options as meshcomm's native core takes them.

Tensors cross to the core as descriptors, staged through contiguous copies
when they are not dense, by meshcomm's Python core
(:mod:`meshcomm._core.staging`); here its Staging raises this backend's
error types.

Reduce ops the core lacks are built here: AVG is a SUM divided by the group
size (floating-point and complex tensors), and the bitwise ops BAND, BOR
and BXOR (integer and bool tensors) gather every rank's data and fold it
locally. PREMUL_SUM is NCCL's alone.
"""

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from .. import _meshcomm
from .._core import staging as _staging
from .._core.staging import CODES, COMPLEX_CODES, as_is, dense, desc

__all__ = ["InvalidArgumentError", "InvalidTypeError", "Staging", "CODES", "desc", "dense",
           "as_is", "ms", "one", "timeout_ms", "COMPLEX_CODES", "UNSET_TIMEOUT",
           "native_op", "op_code", "check_tensor", "FOLDS", "AVG", "fold"]


class InvalidArgumentError(ValueError, RuntimeError):
    """Bad input to a torch.distributed call on the meshcomm backend.

    A ValueError, as meshcomm raises for bad input everywhere, and a
    RuntimeError, as torch's gloo backend raises for it."""


class InvalidTypeError(TypeError, RuntimeError):
    """A tensor of an element type meshcomm cannot move or reduce."""


_NATIVE = {
    int(ReduceOp.SUM): _meshcomm.REDUCE_OP_CODES["sum"],
    int(ReduceOp.PRODUCT): _meshcomm.REDUCE_OP_CODES["prod"],
    int(ReduceOp.MIN): _meshcomm.REDUCE_OP_CODES["min"],
    int(ReduceOp.MAX): _meshcomm.REDUCE_OP_CODES["max"],
}
AVG = int(ReduceOp.AVG)
_SUM = _NATIVE[int(ReduceOp.SUM)]
_MIN = _NATIVE[int(ReduceOp.MIN)]
_MAX = _NATIVE[int(ReduceOp.MAX)]
#: Bitwise ops, folded locally over every rank's data.
FOLDS = {
    int(ReduceOp.BAND): torch.bitwise_and,
    int(ReduceOp.BOR): torch.bitwise_or,
    int(ReduceOp.BXOR): torch.bitwise_xor,
}
_OP_NAMES = {int(v): k for k, v in ReduceOp.RedOpType.__members__.items()}


class Staging(_staging.Staging):
    """meshcomm._core's Staging, raising this backend's error types."""

    __slots__ = ()
    errors = (InvalidTypeError, InvalidArgumentError)
    hint = " (use the backend string 'cpu:meshcomm,cuda:nccl' to route other devices elsewhere)"


#: Raises unless t is a dense CPU tensor of a dtype meshcomm moves.
check_tensor = Staging.check


def native_op(op, dtype, what):
    """meshcomm's code for a torch ReduceOp handled natively, or None for
    the ones built here (AVG, bitwise). Raises for combinations no backend
    could honour, before anything is sent."""
    code = op_code(op)
    native = _NATIVE.get(code)
    if native is not None:
        if code in (int(ReduceOp.MIN), int(ReduceOp.MAX)) and dtype.is_complex:
            raise InvalidArgumentError(f"{what}: ReduceOp.{_OP_NAMES[code]} is not defined on "
                                       f"complex tensors ({dtype})")
        return native
    if code == AVG:
        if not (dtype.is_floating_point or dtype.is_complex):
            raise InvalidArgumentError(f"{what}: ReduceOp.AVG needs a floating-point or complex "
                                       f"tensor, got {dtype} (use SUM and divide)")
        return None
    if code in FOLDS:
        if dtype.is_floating_point or dtype.is_complex:
            raise InvalidArgumentError(f"{what}: ReduceOp.{_OP_NAMES[code]} needs an integer or "
                                       f"bool tensor, got {dtype}")
        if dtype == torch.bool and code != int(ReduceOp.BXOR):
            return _MIN if code == int(ReduceOp.BAND) else _MAX
        return None
    raise InvalidArgumentError(f"{what}: ReduceOp.{_OP_NAMES.get(code, code)} is not supported by "
                               "the meshcomm backend (supported: SUM, AVG, PRODUCT, MIN, MAX, "
                               "BAND, BOR, BXOR)")


def op_code(op):
    """The RedOpType value of a ReduceOp (its hash, which is cheap)."""
    return hash(op) if hasattr(op, "op") else int(op)


def fold(code, stacked, out):
    """out = the bitwise op `code` over dim 0 of stacked."""
    fn = FOLDS[code]
    acc = stacked[0].clone()
    for i in range(1, stacked.shape[0]):
        fn(acc, stacked[i], out=acc)
    out.copy_(acc.reshape(out.shape))


# ---- what every call of the backend asks of its arguments ----------------

UNSET_TIMEOUT = dist.AllreduceOptions().timeout  # torch's "no timeout given"


def ms(timeout):
    """A torch timeout (timedelta; negative means unset) in ms, 0 = default."""
    if timeout is None:
        return 0
    ms = int(timeout.total_seconds() * 1000)
    return ms if ms > 0 else 0


def timeout_ms(opts):
    """The timeout of torch's options in ms, 0 = the group's."""
    timeout = opts.timeout
    return 0 if timeout == UNSET_TIMEOUT else ms(timeout)


def one(tensors, what):
    if len(tensors) != 1:
        raise InvalidArgumentError(f"{what}: the meshcomm backend takes exactly one tensor per "
                                   f"call (CPU tensors), got {len(tensors)}")
    return tensors[0]
