"""The backend's exchanges: all_to_all (list and single-tensor forms),
gather and scatter, a part of ProcessGroupMeshcomm (process_group.py) that
issues them as the rest of its calls are issued (issuing.py).

List lengths, dtypes and element counts are the native core's checks
(its ValueError arrives as InvalidArgumentError); split sizes count rows,
which only Python sees (meshcomm._core.checks)."""

import torch.distributed as dist

from .._core.checks import per_rank, split_counts
from .tensors import InvalidArgumentError, Staging, check_tensor, desc
from .tensors import as_is as _as_is, one as _one, timeout_ms as _timeout_ms

__all__ = ["Exchanges"]


class Exchanges:
    """ProcessGroupMeshcomm's all_to_all, gather and scatter; the group
    provides _size, _rank, _group() and _start()."""

    # ---- all_to_all ----------------------------------------------------------

    def alltoall(self, output_tensors, input_tensors, opts=None):
        if opts is None:
            opts = dist.AllToAllOptions()
        stage = Staging()
        srcs = [stage.read(i, "all_to_all") for i in input_tensors]
        dsts = [stage.write(o, "all_to_all") for o in output_tensors]
        return self._start(opts, output_tensors,
                           [(self._group().all_to_all, ([desc(d) for d in dsts],
                                                        [desc(s) for s in srcs],
                                                        _timeout_ms(opts)))],
                           stage.finisher(), (output_tensors, input_tensors, srcs, dsts))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        if opts is None:
            opts = dist.AllToAllOptions()
        what = "all_to_all_single"
        stage = Staging()
        out_d, in_d = _as_is(output), _as_is(input)
        dst, src = output, input
        if output_split_sizes or input_split_sizes or out_d is None or in_d is None or \
                out_d[2] != in_d[2] or out_d[1] != in_d[1]:
            # Not the hot path (equal blocks, nothing to stage).
            src = stage.read(input, what)
            dst = stage.write(output, what)
            out_d, in_d = desc(dst), desc(src)
        recv = self._splits(dst, output_split_sizes, what, "output_split_sizes")
        send = self._splits(src, input_split_sizes, what, "input_split_sizes")
        return self._start(opts, [output],
                           [(self._group().all_to_all_single,
                             (out_d, in_d, recv, send, _timeout_ms(opts)))],
                           stage.finisher(), (output, input, dst, src))

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes,
                          opts=None):
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def _splits(self, t, sizes, what, name):
        """Split sizes in rows of dim 0 -> element counts ([] = equal)."""
        counts = split_counts(sizes, tuple(t.shape), self._size, what, name, "the tensor",
                              InvalidArgumentError)
        return counts if sizes else []

    # ---- gather / scatter --------------------------------------------------

    def gather(self, output_lists, input_tensors, opts=None):
        t = _one(input_tensors, "gather")
        if opts is None:
            opts = dist.GatherOptions()
        root = opts.rootRank
        stage = Staging()
        src = stage.read(t, "gather")
        outs = self._root_list(output_lists, root, "gather", "gather_list", "destination",
                               stage.write)
        return self._start(opts, output_lists,
                           [(self._group().gather, ([desc(o) for o in outs], desc(src), root,
                                                    _timeout_ms(opts)))],
                           stage.finisher(), (output_lists, t, src, outs))

    def scatter(self, output_tensors, input_lists, opts=None):
        t = _one(output_tensors, "scatter")
        if opts is None:
            opts = dist.ScatterOptions()
        root = opts.rootRank
        stage = Staging()
        dst = stage.write(t, "scatter")
        ins = self._root_list(input_lists, root, "scatter", "scatter_list", "source",
                              stage.read)
        return self._start(opts, output_tensors,
                           [(self._group().scatter, (desc(dst), [desc(i) for i in ins], root,
                                                     _timeout_ms(opts)))],
                           stage.finisher(), (t, dst, input_lists, ins))

    def _root_list(self, lists, root, what, name, role, stage):
        """The root's list of per-rank tensors (torch's one-element list of
        it), staged; [] elsewhere, where none may be given."""
        if self._rank == root:
            return [stage(x, what) for x in _one(lists, what)]
        if lists and lists[0]:
            raise InvalidArgumentError(f"{what}: {name} must be given on the {role} rank "
                                       f"{root} only")
        return []

    def _check_list(self, lst, like, what, name):
        """For calls the native core sees only in parts (reductions built
        here): one tensor per rank, each of like's dtype and size."""
        per_rank(len(lst), self._size, what, name, InvalidArgumentError)
        for x in lst:
            check_tensor(x, what)
            if x.numel() != like.numel() or x.dtype != like.dtype:
                raise InvalidArgumentError(
                    f"{what}: every tensor of {name} must match the tensor "
                    f"({like.numel()} x {like.dtype}), got {x.numel()} x {x.dtype}")
