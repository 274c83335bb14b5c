"""Helpers for the multi-process tests of meshcomm's communication API.

Workers (module-level functions of the test modules, run by conftest's
``run_processes``) join a job of ``nprocs`` processes through
``tcp://127.0.0.1:<port>``, where rank 0 serves the store.
"""

import contextlib
import importlib.util
import io
import os
from datetime import timedelta

import numpy as np

import meshcomm

HAVE_TORCH = importlib.util.find_spec("torch") is not None

# The suite also runs with shared memory off (``make test-python-tcp``):
# then the ranks of one host talk over TCP, and the few expectations that
# depend on the transport follow this.
SHM_OFF = os.environ.get("MESHCOMM_SHM") == "0"

# Deadline of joining and of every operation: generous for a loaded 2-core
# machine, short enough that a hang fails the test well before conftest's.
OP_TIMEOUT = timedelta(seconds=40)

# numpy dtypes by meshcomm name (bfloat16 goes through meshcomm.bfloat16).
NUMPY_DTYPES = {name: np.dtype(name) for name in meshcomm._core.descriptors.DTYPES if name != "bfloat16"}


def init(rank, nprocs, port, timeout=OP_TIMEOUT, **kwargs):
    """Join the test job; keeps shutdown short when a peer already died."""
    os.environ.setdefault("MESHCOMM_SHUTDOWN_WAIT_MS", "10000")
    meshcomm.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=nprocs, timeout=timeout, **kwargs)


def torch_or_none():
    if not HAVE_TORCH:
        return None
    try:
        import torch
    except ImportError:  # installed but broken: treat as absent
        return None
    return torch


def capture(fn, *args, **kwargs):
    """Run fn, returning (its result, what it printed)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        result = fn(*args, **kwargs)
    return result, buf.getvalue()


def values(dtype, shape, fill):
    """An array of `dtype` (meshcomm name) holding `fill`, as numpy or bfloat16."""
    if dtype == "bfloat16":
        return meshcomm.bfloat16.from_float32(np.full(shape, fill, np.float32))
    if dtype == "bool":
        return np.full(shape, bool(fill), np.bool_)
    return np.full(shape, fill, NUMPY_DTYPES[dtype])


def as_float(x):
    """A float64 numpy copy of an array, bfloat16 view or torch tensor."""
    if isinstance(x, meshcomm.bfloat16):
        return x.to_float32().astype(np.float64)
    if type(x).__module__.startswith("torch"):
        x = x.float().numpy() if not x.is_complex() else x.numpy()
    return np.asarray(x).astype(np.complex128 if np.iscomplexobj(x) else np.float64)


class DLPackOnly:
    """Exports an array through DLPack only (no buffer protocol)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, stream=None):
        return self._array.__dlpack__()

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def expect(exc_type, fn, *args, **kwargs):
    """Assert fn raises exc_type (not a subclass' sibling); returns the error."""
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        return e
    except BaseException as e:  # wrong type: show what it was
        raise AssertionError(f"expected {exc_type.__name__}, got {type(e).__name__}: {e}") from e
    raise AssertionError(f"expected {exc_type.__name__}, nothing raised")
