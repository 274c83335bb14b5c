"""all_reduce of sparse COO tensors (SUM), as torch's gloo backend offers it
(sparse embedding gradients).

The sum of sparse tensors is the concatenation of their entries, coalesced.
Every rank's entry count differs, so the reduction takes two steps on the
group's collective lane: an all_gather of a small header (entry count,
sparse and dense dimensions, shape), then uneven all_gathers of every
rank's indices and values, sized from the headers. Every rank sees every
header, so a rank whose tensor has another shape makes all of them raise
the same error; a header of another length is meshcomm's size mismatch.
The result, coalesced, replaces the tensor's contents (``copy_``).
"""

import math
import threading

import torch
from torch.distributed import ReduceOp

from .tensors import CODES, InvalidArgumentError, InvalidTypeError, desc

__all__ = ["SparseAllreduce", "Later"]

_SUM = int(ReduceOp.SUM)


class SparseAllreduce:
    """One sparse all_reduce: its calls, in order, and its finish."""

    def __init__(self, t, op_code, group_size, timeout_ms, what="all_reduce"):
        if op_code != _SUM:
            raise InvalidArgumentError(f"{what}: sparse tensors are reduced with ReduceOp.SUM "
                                       "only (the sum of sparse tensors stays sparse)")
        if not t.is_cpu:
            raise InvalidArgumentError(f"{what}: the meshcomm backend moves CPU tensors; this one "
                                       f"is on {t.device}")
        if t.dtype not in CODES:
            raise InvalidTypeError(f"{what}: sparse tensors of dtype {t.dtype} are not supported "
                                   "by meshcomm")
        self._what = what
        self._t = t
        self._size = group_size
        self._timeout_ms = timeout_ms
        local = t.coalesce()
        self._sparse_dim = local.sparse_dim()
        # Rows of (indices of one entry): one rank's rows are contiguous.
        self._rows = local.indices().t().contiguous()
        self._values = local.values().contiguous()
        self._header = torch.tensor([local._nnz(), local.sparse_dim(), local.dense_dim(),
                                     *local.shape], dtype=torch.int64)
        self._headers = torch.empty((group_size, self._header.numel()), dtype=torch.int64)
        self._all_rows = self._all_values = None

    def header_call(self, group):
        return (group.all_gather_into_tensor,
                (desc(self._headers), desc(self._header), self._timeout_ms))

    def data_calls(self, group):
        """The gathers of every rank's entries (after header_call ran).
        Raises InvalidArgumentError, on every rank alike, when ranks
        disagree about the tensor's layout or shape."""
        mine = self._header[1:]
        for r in range(self._size):
            theirs = self._headers[r, 1:]
            if not torch.equal(theirs, mine):
                raise InvalidArgumentError(
                    f"{self._what}: the sparse tensors of the ranks differ: rank {r} has "
                    f"{_layout(theirs)}, this rank {_layout(mine)}; every rank must pass a tensor "
                    "of the same shape and sparse/dense dimensions")
        counts = self._headers[:, 0].tolist()
        total = sum(counts)
        dense = tuple(self._values.shape[1:])
        per_entry = math.prod(dense)
        self._all_rows = torch.empty((total, self._sparse_dim), dtype=torch.int64)
        self._all_values = torch.empty((total, *dense), dtype=self._values.dtype)
        return [
            (group.all_gather_into_tensor_uneven,
             (desc(self._all_rows), desc(self._rows), [n * self._sparse_dim for n in counts],
              self._timeout_ms)),
            (group.all_gather_into_tensor_uneven,
             (desc(self._all_values), desc(self._values), [n * per_entry for n in counts],
              self._timeout_ms)),
        ]

    def finish(self):
        total = torch.sparse_coo_tensor(self._all_rows.t(), self._all_values, self._t.shape)
        self._t.copy_(total.coalesce())


def _layout(header):
    sparse_dim, dense_dim, *shape = header.tolist()
    return f"shape {tuple(shape)} with {sparse_dim} sparse and {dense_dim} dense dimensions"


class Later:
    """Stands for operations queued later, by another thread, in the
    places of PendingWork's natives: ``wait`` waits for them to be queued
    (or for the error that stopped it), then for them."""

    source_rank = -1

    def __init__(self, description):
        self.description = description
        self.natives = ()
        self.error = None
        self.queued = threading.Event()

    def wait(self, timeout_ms=None, run_here=False):
        if not self.queued.wait(None if timeout_ms is None else timeout_ms / 1000):
            return False
        if self.error is not None:
            raise self.error
        return all(native.wait(timeout_ms, run_here) for native in self.natives)

    def is_completed(self):
        return self.queued.is_set() and all(n.is_completed() for n in self.natives)
