"""ReduceOp: the element-wise reductions, spelled as MindSpore spells them.

The members are plain strings, so ``op="sum"`` and ``op=ReduceOp.SUM`` mean
the same thing everywhere an ``op`` is taken.
"""

from . import _meshcomm

__all__ = ["ReduceOp"]


class ReduceOp:
    """Reduction operators for ``all_reduce``, ``reduce`` and ``reduce_scatter*``.

    ``SUM`` and ``PROD`` work for every dtype; ``MIN`` and ``MAX`` for every
    dtype except complex ones. float16 and bfloat16 are accumulated in
    float32. ``bool`` reduces as logical or (sum, max) / and (prod, min).

    Example:
        >>> meshcomm.all_reduce(x, op=meshcomm.ReduceOp.MAX)
        >>> meshcomm.all_reduce(x, op="max")          # the same
    """

    SUM = "sum"
    PROD = "prod"
    MIN = "min"
    MAX = "max"


#: op name -> native code.
CODES = dict(_meshcomm.REDUCE_OP_CODES)
