"""Exceptions raised by meshcomm at run time.

Argument problems found before any communication are reported with the
built-in ``TypeError`` and ``ValueError``. Everything that goes wrong while
talking to other processes is a :class:`DistError`, which derives from
``RuntimeError`` so that code written against the MindSpore API (where a
timed-out store read is a ``RuntimeError``) keeps working unchanged.

The native extension raises these classes directly: a C++
``meshcomm::Timeout`` arrives in Python as :class:`DistTimeoutError`, and so
on (see ``python/src/errors_binding.cc``). Catch the specific class to react
to one kind of failure, or :class:`DistError` for all of them::

    try:
        value = store.get("ready")
    except meshcomm.DistTimeoutError:
        ...  # nobody published "ready" within the store timeout
"""

__all__ = [
    "DistError",
    "DistTimeoutError",
    "DistPeerLostError",
    "DistStoreError",
    "DistMismatchError",
    "DistAbortedError",
]


class DistError(RuntimeError):
    """Base class of every run-time failure meshcomm reports.

    Also raised as is for failures without a more specific class, such as an
    operation interrupted because its group or store was shut down, or a
    server that cannot listen on the requested address.
    """


class DistTimeoutError(DistError):
    """A deadline passed before the operation could complete.

    Examples: a store key that never appeared (the message names it), a
    store server that could not be reached, or workers that did not connect
    to the server in time. A store whose key wait timed out on the server
    stays usable; one whose server stopped answering does not.
    """


class DistPeerLostError(DistError):
    """Another process of the job went away (connection reset, process died).

    The group the peer belonged to cannot run further collectives.
    """


class DistStoreError(DistError):
    """The store refused a request or its connection failed.

    Examples: authentication refused, ``add`` on a value that is not an
    integer, or the server process exited while this client was using it.
    """


class DistMismatchError(DistError):
    """Processes disagree about an operation they are running together,
    for example different element counts or dtypes for the same collective.
    """


class DistAbortedError(DistError):
    """The group was aborted: by :func:`meshcomm.abort` on this rank (from
    any thread), by another member (the message names it), or because it
    was shrunk (:func:`meshcomm.shrink_group`) without this rank.

    Every later operation on the group raises it again at once.
    """
