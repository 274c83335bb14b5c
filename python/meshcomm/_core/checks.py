"""The argument checks both fronts make, each raising the front's class.

A check takes ``bad``, the exception class its front raises for the
problem: MindSpore's TypeError or ValueError (as ``comm_func.py`` names
them) for the MindSpore-style API, InvalidArgumentError for the torch
backend. Messages name the call (`fn`) and the argument.
"""

__all__ = ["rows", "row_elements", "equal_rows", "per_rank", "split_counts"]


def rows(shape):
    """First-dimension rows of a tensor of this shape (1 for a scalar)."""
    return shape[0] if shape else 1


def row_elements(shape):
    """Elements per first-dimension row of a tensor of this shape."""
    n = 1
    for d in shape[1:]:
        n *= d
    return n


def equal_rows(total, n, fn, what, bad, condition=""):
    """Rows per rank when `total` rows split evenly among `n` ranks; raises
    `bad` otherwise. `condition` opens the message ("without ...")."""
    if total % n != 0:
        raise bad(f"{fn}: {condition}the first dimension of {what} ({total}) must be "
                  f"divisible by the group size ({n})")
    return total // n


def per_rank(count, n, fn, name, bad):
    """Raises `bad` unless a list of `count` entries has one per rank of a
    group of `n`."""
    if count != n or not count:
        raise bad(f"{fn}: '{name}' must hold one entry per rank of the group ({n}), got "
                  f"{count}")


def split_counts(sizes, shape, n, fn, name, what, bad, whole=True):
    """Element counts per rank of a tensor of `shape` (named `what`) split
    along its first dimension: `sizes[r]` rows for rank r, or equal blocks
    when `sizes` is None or empty. Raises `bad` unless there is one size per
    rank, none negative, adding up to the tensor's rows (or, without sizes,
    its rows divide evenly); `whole=False` skips that sum (a result not made
    yet takes its rows from the sizes)."""
    total = rows(shape)
    if not sizes:
        sizes = [equal_rows(total, n, fn, what, bad, f"without '{name}', ")] * n
    else:
        per_rank(len(sizes), n, fn, name, bad)
        for s in sizes:
            if s < 0:
                raise bad(f"{fn}: '{name}' must not hold negative sizes, got {s}")
        if whole and sum(sizes) != total:
            raise bad(f"{fn}: '{name}' add up to {sum(sizes)} rows but {what} has {total}")
    per_row = row_elements(shape)
    return [int(s) * per_row for s in sizes]
