"""meshcomm: collective communication for CPU processes on one or many hosts.

The package offers MindSpore's ``mint.distributed`` API on top of meshcomm's
C++ core (the ``_meshcomm`` extension). Each area lives in its own module and
is re-exported here; ``__all__`` lists the public names.
"""

from ._errors import (
    DistError,
    DistMismatchError,
    DistPeerLostError,
    DistStoreError,
    DistTimeoutError,
)
from .store import TCPStore

__all__ = [
    # errors
    "DistError",
    "DistTimeoutError",
    "DistPeerLostError",
    "DistStoreError",
    "DistMismatchError",
    # store
    "TCPStore",
]
