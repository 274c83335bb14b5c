"""meshcomm: collective communication for CPU processes on one or many hosts.

The package offers MindSpore's ``mint.distributed`` API on top of meshcomm's
C++ core (the ``_meshcomm`` extension). Each area lives in its own module and
is re-exported here; ``__all__`` lists the public names. docs/python-api.md
has an example of every function.

Tensors are numpy arrays, torch CPU tensors, :class:`bfloat16` views, or
any DLPack / buffer-protocol object; see :mod:`meshcomm._core.descriptors`.
"""

from . import _errors
from ._meshcomm import __version__
from ._errors import (
    DistAbortedError,
    DistError,
    DistMismatchError,
    DistPeerLostError,
    DistStoreError,
    DistTimeoutError,
)
from ._state import WORLD_COMM_GROUP
from ._core.descriptors import bfloat16
from .flight_recorder import dump_flight_recorder
from .alltoall import all_to_all, all_to_all_single, all_to_all_v_c
from .collectives import (
    all_reduce,
    barrier,
    broadcast,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    reduce_scatter_tensor_uneven,
)
from .fault import abort, group_error, shrink_group
from .gather_scatter import (
    all_gather,
    all_gather_into_tensor,
    all_gather_into_tensor_uneven,
    gather,
    gather_into_tensor,
    scatter,
    scatter_tensor,
)
from .group_options import GroupOptions
from .groups import (
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_local_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
    new_group,
)
from .handle import CommHandle
from .inplace import COMM_FUNCS, set_comm_ops_inplace
from .objects import (
    all_gather_object,
    broadcast_object_list,
    gather_object,
    scatter_object_list,
)
from .p2p import P2POp, batch_isend_irecv, irecv, isend, recv, send
from .reduce_op import ReduceOp
from .store import TCPStore

__all__ = [
    *_errors.__all__,
    # store
    "TCPStore",
    # process groups
    "init_process_group",
    "destroy_process_group",
    "get_rank",
    "get_world_size",
    "get_local_rank",
    "new_group",
    "get_backend",
    "get_global_rank",
    "get_process_group_ranks",
    "get_group_rank",
    "is_available",
    "is_initialized",
    "GroupOptions",
    "WORLD_COMM_GROUP",
    # surviving a lost rank
    "abort",
    "group_error",
    "shrink_group",
    # tensors and handles
    "ReduceOp",
    "CommHandle",
    "bfloat16",
    "set_comm_ops_inplace",
    # diagnosis
    "dump_flight_recorder",
    # communication: the native operations (_meshcomm.OPERATIONS), then
    # those composed of them here
    *COMM_FUNCS,
    "P2POp",
]
