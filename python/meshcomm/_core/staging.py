"""torch tensors as the native core takes them, contiguous or not.

The core needs dense memory, torch does not: a strided or lazily
conjugated/negated tensor is staged through a contiguous copy, and results
are copied back once the operation is done (:class:`Staging`), so views give
correct results and the memory around them is left alone. A tensor the core
can take as it is skips all of that (:func:`as_is`, the hot path's only
check). Imports torch: only the torch backend loads this module.
"""

import torch

from .descriptors import check_torch, torch_codes

__all__ = ["CODES", "COMPLEX_CODES", "Staging", "as_is", "dense", "desc"]

#: torch dtype -> meshcomm's dtype code, for every dtype both know.
CODES = torch_codes()
# Per dtype code, looked up instead of asking the tensor (cheaper).
COMPLEX_CODES = frozenset(code for dtype, code in CODES.items() if dtype.is_complex)
_STRIDED = torch.strided
_Tensor = torch.Tensor


def as_is(t):
    """The descriptor of t when the core can use its memory as it is (a
    contiguous CPU tensor of a dtype meshcomm moves, with no lazy conjugate
    or negative bit), else None. Every other tensor takes the general path,
    which stages it through a copy or raises the error that names what is
    wrong."""
    if isinstance(t, _Tensor) and t.layout is _STRIDED and t.is_cpu and \
            t.is_contiguous() and not t.is_neg():
        code = CODES.get(t.dtype)
        # Only complex tensors carry the conjugate bit.
        if code is not None and not (code in COMPLEX_CODES and t.is_conj()):
            return (t.data_ptr(), t.numel(), code)
    return None


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

    Each tensor is checked first (:meth:`check`); a front sets ``errors``,
    its (type error, value error) classes, and ``hint``, what its message
    about a tensor on another device adds.
    """

    __slots__ = ("back", "held")
    errors = (TypeError, ValueError)
    hint = ""

    def __init__(self):
        self.back = None
        self.held = None

    @classmethod
    def check(cls, t, what):
        """Raises unless t is a CPU tensor of dense layout and a dtype meshcomm moves."""
        if not isinstance(t, _Tensor):
            raise cls.errors[0](f"{what}: expected a torch.Tensor, got {type(t).__name__}")
        check_torch(t, cls.errors, f"{what}: ", cls.hint)

    def read(self, t, what):
        self.check(t, what)
        if dense(t):
            return t
        staged = t.resolve_conj().resolve_neg().contiguous()
        if self.held is None:
            self.held = []
        self.held.append(staged)
        return staged

    def write(self, t, what, keep_contents=False):
        self.check(t, what)
        if dense(t):
            return t
        if t.is_conj() or t.is_neg():
            raise self.errors[1](f"{what}: the tensor is a lazy conjugate/negative view and "
                                 "cannot receive results; call resolve_conj()/resolve_neg()")
        if keep_contents:
            staged = t.contiguous()
        else:
            staged = torch.empty(t.shape, dtype=t.dtype)
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
