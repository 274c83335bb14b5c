"""meshcomm's Python core: what both Python fronts do the same way.

The fronts are the MindSpore-style API (``meshcomm.all_reduce`` and the
rest: :mod:`meshcomm.collectives`, ``gather_scatter``, ``alltoall``,
``p2p``, ``objects``) and the torch.distributed backend
(:mod:`meshcomm.torch`). Each keeps only its own semantics: the MindSpore
front its argument types and exception types (``comm_func.py``'s TypeError,
ValueError and RuntimeError: :mod:`meshcomm._checks`), in-place mode and
:class:`~meshcomm.CommHandle`; the torch front its Works and futures, the
ReduceOp mapping and the reductions built in Python (AVG, bitwise), and its
error types (InvalidArgumentError, InvalidTypeError). The core, one concept
a module:

* :mod:`.descriptors`: a tensor (numpy, torch incl. bfloat16, meshcomm's
  bfloat16, DLPack, buffers) as the native core's ``(address, numel,
  dtype code)`` descriptor; torch's dtype table and CPU/layout/dtype check.
* :mod:`.staging`: torch tensors the native core cannot take as they are
  (strided, lazily conjugated or negated), staged through contiguous copies
  that are copied back at completion; the torch hot path's one check.
* :mod:`.checks`: the checks both fronts make (list lengths per rank,
  split sizes in first-dimension rows), raising the class a front names.
* :mod:`.waiting`: blocking waits, :class:`~.waiting.Pending` (one call's
  native Works, the memory they use, the finisher run once at the end:
  what a CommHandle and a torch PendingWork wrap), parking memory of
  operations whose caller stopped waiting, the wait's spin setting.

Where the checks live. The native core (``src/runtime/process_group.cc``)
checks every call of its public C++ API before anything is queued, and
keeps doing so whatever Python checked: C++ programs call it directly. In
elements, it checks tensors (negative counts, missing data), dtypes that
must agree, the reduce op against the dtype (MIN/MAX of complex), roots and
peers within the group (no send to oneself), tags, per-rank list lengths,
every list entry's dtype and size, a whole buffer holding size x its block,
split counts (one per rank, none negative, adding up) and overlapping
inputs and outputs, raising ValueError. Python adds no second copy of
those; it checks, once:

* what the native core cannot see: Python types (a tensor, an int, a str),
  torch tensors' device and layout, first-dimension rows (the core counts
  elements), in-place mode, world ranks outside the group (the core speaks
  of group ranks), lists a torch rank off the root must not pass;
* the checks of :mod:`.checks`, both fronts', each with its front's class.

The native core repeats a few of those, and Python makes them anyway:

* split sizes' count, sign and sum (:func:`.checks.split_counts`): Python
  checks rows, the unit callers pass, so the message speaks of rows and a
  tensor whose rows hold no elements is still checked;
* the MindSpore front's list lengths and matching dtypes/shapes
  (``_checks.py``): the reference raises TypeError for them, the core's
  ValueError would not match;
* the torch front's reduce op against the dtype (``tensors.native_op``)
  and sizes of calls the core sees in parts (coalesced calls, and AVG or
  bitwise reductions built of other operations): those must fail before
  the first part is sent;
* a torch tensor's dtype (:func:`.descriptors.check_torch`): its
  descriptor needs the dtype code.

Everything else is the core's alone: the torch front turns its ValueError
into InvalidArgumentError when it submits (``torch/issuing.py``); the
MindSpore front lets it pass as the ValueError the reference expects.
"""
