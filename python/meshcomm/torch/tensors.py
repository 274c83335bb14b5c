"""torch tensors and reduce ops as meshcomm's native core takes them.

A tensor crosses to the core as a descriptor ``(address, numel, dtype
code)``. The core needs dense memory, torch does not: a strided or lazily
conjugated/negated tensor is staged through a contiguous copy, and the
result copied back once the operation is done (:class:`Staging`), so views
give correct results and the memory around them is left alone.

Reduce ops the core lacks are built here: AVG is a SUM divided by the group
size (floating-point and complex tensors), and the bitwise ops BAND, BOR
and BXOR (integer and bool tensors) gather every rank's data and fold it
locally. PREMUL_SUM is NCCL's alone.
"""

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from .. import _meshcomm

__all__ = ["InvalidArgumentError", "InvalidTypeError", "Staging", "CODES", "desc", "dense",
           "as_is", "ms", "one", "timeout_ms", "COMPLEX_CODES", "UNSET_TIMEOUT",
           "native_op", "op_code", "check_tensor", "FOLDS", "AVG", "fold"]


class InvalidArgumentError(ValueError, RuntimeError):
    """Bad input to a torch.distributed call on the meshcomm backend.

    A ValueError, as meshcomm raises for bad input everywhere, and a
    RuntimeError, as torch's gloo backend raises for it."""


class InvalidTypeError(TypeError, RuntimeError):
    """A tensor of an element type meshcomm cannot move or reduce."""


#: torch dtype -> meshcomm's dtype code, for every dtype both know.
CODES = {}
for _name, _code in _meshcomm.DTYPE_CODES.items():
    _dt = getattr(torch, _name, None)
    if isinstance(_dt, torch.dtype):
        CODES[_dt] = _code

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


def check_tensor(t, what):
    """Raises unless t is a dense CPU tensor of a dtype meshcomm moves."""
    if not isinstance(t, torch.Tensor):
        raise InvalidTypeError(f"{what}: expected a torch.Tensor, got {type(t).__name__}")
    if not t.is_cpu:
        raise InvalidArgumentError(f"{what}: the meshcomm backend moves CPU tensors; this one "
                                   f"is on {t.device} (use the backend string "
                                   "'cpu:meshcomm,cuda:nccl' to route other devices elsewhere)")
    if t.layout != torch.strided:
        raise InvalidArgumentError(f"{what}: only dense tensors are supported, got {t.layout}")
    if t.dtype not in CODES:
        raise InvalidTypeError(f"{what}: tensors of dtype {t.dtype} are not supported by "
                               "meshcomm (supported: " +
                               ", ".join(str(d) for d in CODES) + ")")


def desc(t):
    """The descriptor of a dense tensor (the caller checked it)."""
    return (t.data_ptr(), t.numel(), CODES[t.dtype])


def dense(t):
    """Whether t can be handed to the core as it is."""
    return t.is_contiguous() and not t.is_conj() and not t.is_neg()


class Staging:
    """Contiguous stand-ins for tensors that are not, and the copies back.

    ``read(t)`` returns t or a contiguous copy of it; ``write(t)`` returns t
    or a contiguous buffer whose contents are copied into t by ``finish()``;
    ``update(t)`` is both (in-place operations). The core sees only
    addresses, so the Staging holds every copy it made until it is dropped:
    keep it alive until the operation is done.
    """

    __slots__ = ("back", "held")

    def __init__(self):
        self.back = None
        self.held = None

    def read(self, t, what):
        check_tensor(t, what)
        if dense(t):
            return t
        staged = t.resolve_conj().resolve_neg().contiguous()
        if self.held is None:
            self.held = []
        self.held.append(staged)
        return staged

    def write(self, t, what, keep_contents=False):
        check_tensor(t, what)
        if dense(t):
            return t
        if keep_contents:
            staged = t.resolve_conj().resolve_neg().contiguous()
        else:
            staged = torch.empty(t.shape, dtype=t.dtype)
        if t.is_conj() or t.is_neg():
            raise InvalidArgumentError(f"{what}: the tensor is a lazy conjugate/negative view and "
                                       "cannot receive results; call resolve_conj()/resolve_neg()")
        if self.back is None:
            self.back = []
        self.back.append((t, staged))
        return staged

    def update(self, t, what):
        return self.write(t, what, keep_contents=True)

    def finisher(self):
        """finish, or None when nothing was staged for writing."""
        return self.finish if self.back else None

    def finish(self):
        if self.back:
            for t, staged in self.back:
                t.copy_(staged)
            self.back = None
        self.held = None


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

_STRIDED = torch.strided
# Per dtype code, looked up instead of asking the tensor (cheaper).
COMPLEX_CODES = frozenset(code for dtype, code in CODES.items() if dtype.is_complex)
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


def as_is(t):
    """The descriptor of t when the core can use its memory as it is (a
    contiguous CPU tensor of a dtype meshcomm moves, with no lazy conjugate
    or negative bit), else None. This is the hot path's only check: every
    other tensor takes the general path, which stages it through a copy or
    raises the error that names what is wrong."""
    if isinstance(t, torch.Tensor) and t.layout is _STRIDED and t.is_cpu and \
            t.is_contiguous() and not t.is_neg():
        code = CODES.get(t.dtype)
        # Only complex tensors carry the conjugate bit.
        if code is not None and not (code in COMPLEX_CODES and t.is_conj()):
            return (t.data_ptr(), t.numel(), code)
    return None


def one(tensors, what):
    if len(tensors) != 1:
        raise InvalidArgumentError(f"{what}: the meshcomm backend takes exactly one tensor per "
                                   f"call (CPU tensors), got {len(tensors)}")
    return tensors[0]
