"""Turning user tensors into the raw descriptors the native core takes.

A descriptor is ``(address, numel, dtype_code)``: the first element's
address, the element count, and the ``meshcomm::DType`` value. Accepted:

* ``numpy.ndarray`` of any supported dtype (see :data:`DTYPES`);
* ``torch.Tensor`` on the CPU, written in place, ``bfloat16`` included.
  torch is never imported here: a tensor is recognised by its type's
  module, so programs without torch do not pay for it;
* :class:`meshcomm.bfloat16`, a view of a 16-bit numpy array whose
  elements are bfloat16 bit patterns (numpy has no bfloat16 of its own);
  arrays of the ``ml_dtypes.bfloat16`` dtype are accepted as they are;
* any other object exporting ``__dlpack__`` (through
  ``numpy.from_dlpack``; numpy makes those arrays read-only, so such an
  object can be an input only, unless it also exports the buffer protocol);
* any buffer-protocol object: ``memoryview``, ``bytearray``, ``array.array``.

Memory must be C-contiguous (ValueError otherwise); a read-only object
cannot receive results (ValueError); an unsupported element type is a
TypeError, as is anything that is not a tensor at all.

The caller keeps every object returned as ``keep`` alive until the
operation completes: the native core holds raw pointers only.

The torch backend takes its tensors through :mod:`meshcomm._core.staging`, which
uses this module's dtype table and torch check (:func:`torch_codes`,
:func:`check_torch`) and stages what is not contiguous instead of refusing it.
"""

import numpy as np

from .. import _meshcomm

__all__ = ["bfloat16", "DTYPES", "is_tensor", "ref", "shape_of", "dtype_of",
           "empty_like", "copy_of", "kind_of", "torch_codes", "check_torch"]

#: Element types meshcomm moves and reduces, by name.
DTYPES = tuple(_meshcomm.DTYPE_CODES)
_CODES = dict(_meshcomm.DTYPE_CODES)
_BF16 = _CODES["bfloat16"]
_describe = _meshcomm.describe_buffer
_ndarray = np.ndarray

_TORCH_CODES = None  # torch dtype -> code, filled on the first torch tensor


class bfloat16:
    """A numpy array of bfloat16 values, stored as their 16-bit patterns.

    numpy has no bfloat16 dtype; wrap a ``uint16`` (or ``int16``) array
    holding the upper halves of float32 values to send, receive and reduce
    it as bfloat16. The wrapper shares memory with ``array``; results are
    written into it in place.

    Args:
        array (numpy.ndarray): 16-bit integer array of bit patterns.

    Example:
        >>> x = meshcomm.bfloat16.from_float32(np.ones(4, np.float32))
        >>> meshcomm.all_reduce(x)
        >>> x.to_float32()          # with 2 processes
        array([2., 2., 2., 2.], dtype=float32)
    """

    __slots__ = ("array",)

    def __init__(self, array):
        if not isinstance(array, np.ndarray) or array.dtype.itemsize != 2 or \
                array.dtype.kind not in "ui":
            raise TypeError("bfloat16 wraps a numpy uint16/int16 array of bit patterns, got "
                            f"{type(array).__name__}"
                            + (f" of {array.dtype}" if isinstance(array, np.ndarray) else ""))
        self.array = array

    @classmethod
    def from_float32(cls, values):
        """Round float32 values to the nearest bfloat16 (ties to even)."""
        bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
        nan = np.isnan(bits.view(np.float32))
        rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
        out = (rounded >> np.uint32(16)).astype(np.uint16)
        out[nan] = 0x7FC0
        return cls(out)

    def to_float32(self):
        """The values as a new float32 array (exact)."""
        return (self.array.astype(np.uint32) << np.uint32(16)).view(np.float32)

    @property
    def shape(self):
        return self.array.shape

    @property
    def size(self):
        return self.array.size

    def __repr__(self):
        return f"meshcomm.bfloat16({self.to_float32()!r})"


def _is_torch(obj):
    return type(obj).__module__.startswith("torch")


def torch_codes():
    """torch dtype -> dtype code, for every dtype both know (torch is
    imported on the first call, which only a torch tensor in hand makes)."""
    global _TORCH_CODES
    if _TORCH_CODES is None:
        import torch
        table = {}
        for name in DTYPES:
            dt = getattr(torch, name, None)  # torch.uint16 etc. are recent
            if isinstance(dt, torch.dtype):
                table[dt] = _CODES[name]
        _TORCH_CODES = table
    return _TORCH_CODES


def check_torch(t, errors, what="", hint=""):
    """The dtype code of torch tensor t, a CPU tensor with dense (strided)
    layout of a dtype meshcomm moves; otherwise raises ``errors[0]`` (a
    type problem) or ``errors[1]`` (a value problem), the front's classes,
    with `what` ahead of the message and `hint` after the device's."""
    if t.device.type != "cpu":
        raise errors[1](f"{what}meshcomm moves CPU tensors; this one is on {t.device}{hint}")
    if t.layout != _torch_strided():
        raise errors[1](f"{what}only dense (strided) tensors are supported, got {t.layout}")
    code = torch_codes().get(t.dtype)
    if code is None:
        raise errors[0](f"{what}tensors of dtype {t.dtype} are not supported by meshcomm "
                        "(supported: " + ", ".join(str(d) for d in torch_codes()) + ")")
    return code


def _torch_ref(t, writable):
    code = check_torch(t, (TypeError, ValueError))
    if not t.is_contiguous():
        raise ValueError("the tensor is not contiguous; pass tensor.contiguous()")
    if getattr(t, "is_conj", bool)() or getattr(t, "is_neg", bool)():
        raise ValueError("the tensor is a lazy conjugate/negative view; call "
                         "tensor.resolve_conj() / resolve_neg() first")
    return (t.data_ptr(), t.numel(), code), t


def ref(obj, writable):
    """Return ``(descriptor, keep)`` for a tensor; ``keep`` must outlive the
    operation. Raises TypeError / ValueError as described in the module."""
    if isinstance(obj, _ndarray):  # subclasses too (np.matrix, memmap, ...)
        if obj.dtype.name == "bfloat16":
            return _bf16_ndarray(obj, writable)
        return _describe(obj, writable), obj
    if isinstance(obj, bfloat16):
        addr, numel, _ = _describe(obj.array, writable)
        return (addr, numel, _BF16), obj.array
    if _is_torch(obj) and hasattr(obj, "data_ptr"):
        return _torch_ref(obj, writable)
    try:
        view = memoryview(obj)
    except TypeError:
        view = None
    if view is not None:
        return _describe(view, writable), view
    if hasattr(obj, "__dlpack__"):
        arr = np.from_dlpack(obj)
        if writable and not arr.flags.writeable:
            raise ValueError(f"{type(obj).__name__} is exported read-only through DLPack and "
                             "cannot receive results; pass a numpy array or torch tensor")
        return ref(arr, writable)[0], (obj, arr)
    raise TypeError("expected a tensor (numpy array, torch CPU tensor, meshcomm.bfloat16, "
                    f"DLPack or buffer object), got {type(obj).__name__}")


def _bf16_ndarray(arr, writable):
    # ml_dtypes' bfloat16: same bits as our wrapper, read through a uint16 view.
    if not arr.flags.c_contiguous:
        raise ValueError("the tensor is not contiguous; pass numpy.ascontiguousarray(x)")
    addr, numel, _ = _describe(arr.view(np.uint16), writable)
    return (addr, numel, _BF16), arr


def is_tensor(obj):
    """Whether obj is something :func:`ref` may accept (without checking
    contiguity or dtype)."""
    if isinstance(obj, (_ndarray, bfloat16)):
        return True
    if _is_torch(obj) and hasattr(obj, "data_ptr"):
        return True
    if isinstance(obj, (str, int, float, complex, bool, list, tuple, dict)) or obj is None:
        return False
    if hasattr(obj, "__dlpack__"):
        return True
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True


def kind_of(obj):
    """"numpy", "torch" or "bfloat16": what non-in-place results are made of.
    Buffer and DLPack objects produce numpy results."""
    if isinstance(obj, bfloat16):
        return "bfloat16"
    if _is_torch(obj) and hasattr(obj, "data_ptr"):
        return "torch"
    return "numpy"


def shape_of(obj):
    """The shape as a tuple of ints."""
    if isinstance(obj, bfloat16):
        return obj.array.shape
    if isinstance(obj, _ndarray):
        return obj.shape
    if _is_torch(obj) and hasattr(obj, "shape"):
        return tuple(obj.shape)
    return _as_numpy(obj).shape


def dtype_of(obj):
    """A comparable dtype: the numpy/torch dtype, or "bfloat16"."""
    if isinstance(obj, bfloat16):
        return "bfloat16"
    if isinstance(obj, _ndarray) or (_is_torch(obj) and hasattr(obj, "dtype")):
        return obj.dtype
    return _as_numpy(obj).dtype


def _as_numpy(obj):
    if hasattr(obj, "__dlpack__") and not _supports_buffer(obj):
        return np.from_dlpack(obj)
    return np.asarray(memoryview(obj))


def _supports_buffer(obj):
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True


def empty_like(template, shape):
    """A new uninitialised tensor of `template`'s kind and dtype."""
    kind = kind_of(template)
    if kind == "torch":
        import torch
        return torch.empty(tuple(shape), dtype=template.dtype)
    if kind == "bfloat16":
        return bfloat16(np.empty(shape, dtype=template.array.dtype))
    return np.empty(shape, dtype=dtype_of(template))


def copy_of(obj):
    """A contiguous copy of a tensor, of the same kind."""
    kind = kind_of(obj)
    if kind == "torch":
        return obj.detach().clone(memory_format=_torch_contiguous())
    if kind == "bfloat16":
        return bfloat16(np.array(obj.array, order="C", copy=True))
    if isinstance(obj, _ndarray):
        return np.array(obj, order="C", copy=True)
    return np.array(_as_numpy(obj), order="C", copy=True)


def _torch_contiguous():
    import torch
    return torch.contiguous_format


def _torch_strided():
    import torch
    return torch.strided
