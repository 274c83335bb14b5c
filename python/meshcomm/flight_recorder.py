"""The flight recorder: this process's record of its last operations.

Every process keeps the last ``MESHCOMM_FLIGHT_RECORDER`` operations
(default 2000; 0 turns the recorder off) and writes them as JSON lines,
``rank_<R>.jsonl``, when an operation times out, loses a peer or finds a
mismatch, on SIGUSR1, and when :func:`dump_flight_recorder` is called.
``meshcomm-diagnose DIR`` (or ``python3 -m meshcomm.diagnose DIR``) reads
every rank's file and says which rank is stuck, where, and since when.
"""

import os

from . import _meshcomm

__all__ = ["dump_flight_recorder"]


def dump_flight_recorder(path=None):
    """Writes this process's flight recorder and returns the path written.

    Args:
        path (str or os.PathLike, optional): None for ``rank_<R>.jsonl`` in
            ``MESHCOMM_DUMP_DIR`` (meshrun sets it to its ``--log-dir``; the
            default is ``/tmp/meshcomm-dumps-<job>``, under
            ``MESHCOMM_DUMP_ROOT`` when set, a folder meshcomm removes in
            time: docs/errors.md, "How long dumps are kept"); a directory for
            ``rank_<R>.jsonl`` in it; otherwise the file to write. Missing
            directories are created.

    Returns:
        str: the file written.

    Raises:
        TypeError: if path is not a str or path-like object.
        DistError: if the file cannot be written, or the recorder is off
            (``MESHCOMM_FLIGHT_RECORDER=0``).

    Safe at any time, from any thread, while operations are in flight; it
    never touches the network.

    Example::

        >>> import meshcomm
        >>> meshcomm.dump_flight_recorder("/tmp/dumps")  # doctest: +SKIP
        '/tmp/dumps/rank_0.jsonl'
    """
    if path is None:
        path = ""
    elif isinstance(path, (str, os.PathLike)):
        path = os.fspath(path)
        if not isinstance(path, str):
            raise TypeError(f"path must be a str or os.PathLike of str, got bytes {path!r}")
        if path == "":
            raise ValueError("path must not be empty; pass None for the default place")
    else:
        raise TypeError(f"path must be a str, os.PathLike or None, got {type(path).__name__}")
    return _meshcomm.dump_flight_recorder(path)
