"""The TCP key-value store that processes of a job rendezvous through.

One process runs the server (``is_master=True``); every process, the server's
included, talks to it through a client connection. Keys are ``str``; values
are ``bytes`` (a ``str`` value is stored as its UTF-8 encoding).

Argument rules, checked here before anything is sent:

* a wrong type is a ``TypeError``, an out-of-range value a ``ValueError``;
* ``bool`` is not accepted where an ``int`` is expected (``port``,
  ``world_size``, ``amount``), although Python makes it an ``int`` subclass:
  ``port=True`` is far more likely a mistake than a request for port 1;
* timeouts are ``datetime.timedelta``; negative ones are refused, and ones
  longer than 100 years are treated as 100 years.

Run-time failures raise the :mod:`meshcomm._errors` classes, all subclasses
of ``RuntimeError``: :class:`~meshcomm.DistTimeoutError` when a key does not
appear in time (the message names the missing keys),
:class:`~meshcomm.DistStoreError` when the server refuses a request or goes
away.
"""

import warnings
from datetime import timedelta

from . import _meshcomm

__all__ = ["TCPStore"]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

# The C++ core turns a timeout into a point on the monotonic clock counted in
# nanoseconds; much beyond a few centuries that sum overflows and the call
# would time out at once. A century is "forever" for any job.
_MAX_TIMEOUT = timedelta(days=36500)
_MS = timedelta(milliseconds=1)


def _type_name(value):
    return type(value).__name__


def _check_str(value, name, where):
    if not isinstance(value, str):
        raise TypeError(f"{where}: '{name}' must be a str, got {_type_name(value)}")


def _check_bool(value, name, where):
    if not isinstance(value, bool):
        raise TypeError(f"{where}: '{name}' must be a bool, got {_type_name(value)}")


def _check_int(value, name, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where}: '{name}' must be an int, got {_type_name(value)}")


def _to_bytes(value, name, where):
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{where}: '{name}' must be str or bytes, got {_type_name(value)}")


def _check_keys(keys, name, where):
    # A bare str is a sequence of one-character keys, which is never meant.
    if not isinstance(keys, (list, tuple)):
        raise TypeError(
            f"{where}: '{name}' must be a list or tuple of str, got {_type_name(keys)}"
        )
    for i, key in enumerate(keys):
        if not isinstance(key, str):
            raise TypeError(
                f"{where}: '{name}[{i}]' must be a str, got {_type_name(key)}"
            )
    return list(keys)


def _timeout_ms(timeout, name, where):
    if not isinstance(timeout, timedelta):
        raise TypeError(
            f"{where}: '{name}' must be a datetime.timedelta, got {_type_name(timeout)}"
        )
    if timeout < timedelta(0):
        raise ValueError(f"{where}: '{name}' must not be negative, got {timeout}")
    timeout = min(timeout, _MAX_TIMEOUT)
    # Round up, so that a sub-millisecond timeout still waits a little.
    return -(-timeout // _MS)


class TCPStore:
    """A key-value store served over TCP, for rendezvous between processes.

    The process created with ``is_master=True`` starts the server, listening
    on ``host_name:port``; the others connect to it as clients, retrying until
    ``timeout`` so that they may start before the server. All of them then
    read and write the same keys.

    Args:
        host_name (str): address the server listens on (server) or connects
            to (client): an IPv4/IPv6 literal or a host name. A server also
            accepts ``""`` or ``"0.0.0.0"`` for every interface.
        port (int): TCP port, 0 to 65535. A server given 0 picks a free port;
            read it back from :attr:`port` and hand it to the clients.
        world_size (int, optional): number of store users, the server
            included. Used by the server only: with ``wait_for_workers`` its
            constructor returns once ``world_size - 1`` clients have
            connected. ``None`` (the default) means the number is not fixed
            and nobody is waited for.
        is_master (bool, optional): whether this process runs the server.
            Default ``False``.
        timeout (datetime.timedelta, optional): deadline for connecting and
            for waiting for workers, and the default deadline of
            :meth:`get`, :meth:`wait` and :meth:`multi_get`. Default 300 s.
        wait_for_workers (bool, optional): whether the server's constructor
            waits for ``world_size - 1`` clients. Default ``True``.
        multi_tenant: accepted for compatibility; not supported, a warning
            is issued when set.
        master_listen_fd: accepted for compatibility; not supported, a
            warning is issued when set.
        use_libuv: accepted for compatibility (the server has its own event
            loop); a warning is issued when set to ``False``.
        auth_token (str, optional, keyword-only): shared secret that clients
            must prove they know. ``None`` (the default) uses the
            ``MESHCOMM_AUTH_TOKEN`` environment variable, and no
            authentication when that is unset too.

    Raises:
        TypeError: an argument has the wrong type (``bool`` is not an
            ``int`` here).
        ValueError: ``port`` is outside 0..65535, ``world_size`` is not
            positive, ``timeout`` is negative, ``auth_token`` is empty, or
            (on the server) ``host_name`` does not resolve.
        DistTimeoutError: the server could not be reached, or the workers
            did not all connect, within ``timeout``.
        DistStoreError: the server refused this client's credentials.
        DistError: the server could not listen on ``host_name:port`` (for
            example, the port is in use).

    A store holds one connection; calls from several threads on one object
    take turns. Blocking calls release the GIL, so other Python threads keep
    running while one waits.

    Examples:
        >>> from datetime import timedelta
        >>> from meshcomm import TCPStore
        >>> server = TCPStore("127.0.0.1", 0, is_master=True,
        ...                   timeout=timedelta(seconds=30))
        >>> client = TCPStore("127.0.0.1", server.port)  # usually elsewhere
        >>> client.set("greeting", "hello")
        >>> server.get("greeting")
        b'hello'
    """

    def __init__(self, host_name, port, world_size=None, is_master=False,
                 timeout=timedelta(seconds=300), wait_for_workers=True,
                 multi_tenant=False, master_listen_fd=None, use_libuv=True, *,
                 auth_token=None):
        where = "TCPStore"
        _check_str(host_name, "host_name", where)
        _check_int(port, "port", where)
        _check_bool(is_master, "is_master", where)
        timeout_ms = _timeout_ms(timeout, "timeout", where)
        _check_bool(wait_for_workers, "wait_for_workers", where)
        if world_size is not None:
            _check_int(world_size, "world_size", where)
        if not 0 <= port <= 65535:
            raise ValueError(f"{where}: 'port' must be in 0..65535, got {port}")
        if world_size is not None and world_size <= 0:
            raise ValueError(f"{where}: 'world_size' must be positive, got {world_size}")
        if auth_token is not None:
            _check_str(auth_token, "auth_token", where)
            if not auth_token:
                raise ValueError(
                    f"{where}: 'auth_token' must not be empty; pass None to use "
                    "MESHCOMM_AUTH_TOKEN from the environment"
                )
        for name, is_set in (("multi_tenant", bool(multi_tenant)),
                             ("master_listen_fd", master_listen_fd is not None),
                             ("use_libuv", not use_libuv)):
            if is_set:
                warnings.warn(
                    f"{where}: '{name}' is not supported by meshcomm and is ignored",
                    UserWarning, stacklevel=2)
        self._host = host_name
        # Other meshcomm modules hand this native object to the C++ core.
        self._store = _meshcomm.TCPStore(
            host_name, port, world_size=world_size, is_master=is_master,
            timeout_ms=timeout_ms, wait_for_workers=wait_for_workers,
            auth_token=auth_token or "")

    def __repr__(self):
        role = "server" if self._store.is_master else "client"
        return f"TCPStore({self._host!r}, {self.port}, {role})"

    @property
    def host(self):
        """str: the ``host_name`` this store was created with."""
        return self._host

    @property
    def port(self):
        """int: the server's port; on a server created with port 0, the one
        it picked."""
        return self._store.port

    @property
    def timeout(self):
        """datetime.timedelta: default deadline of :meth:`get`, :meth:`wait`
        and :meth:`multi_get` (and of every request's round trip).

        Settable; affects this object only, not other clients of the server.

        >>> store.timeout = timedelta(seconds=10)
        """
        return timedelta(milliseconds=self._store.timeout_ms)

    @timeout.setter
    def timeout(self, value):
        self._store.timeout_ms = _timeout_ms(value, "timeout", "TCPStore.timeout")

    def set(self, key, value):
        """Store ``value`` under ``key``, replacing any previous value, and
        wake everyone waiting for ``key``.

        Args:
            key (str): the key.
            value (Union[str, bytes]): the value; a ``str`` is stored as UTF-8.

        Raises:
            TypeError: ``key`` is not a ``str``, or ``value`` is neither
                ``str`` nor ``bytes``.
            ValueError: the key is longer than 4096 bytes or the value
                larger than 1 GiB.

        >>> store.set("config", b"\\x00\\x01")
        """
        where = "TCPStore.set"
        _check_str(key, "key", where)
        self._store.set(key, _to_bytes(value, "value", where))

    def get(self, key):
        """Return the value of ``key``, waiting up to :attr:`timeout` for
        another process to set it.

        Args:
            key (str): the key.

        Returns:
            bytes: the value.

        Raises:
            TypeError: ``key`` is not a ``str``.
            DistTimeoutError: ``key`` was not set in time (the message names it).

        >>> store.set("rank0/addr", "10.0.0.1:29500")
        >>> store.get("rank0/addr")
        b'10.0.0.1:29500'
        """
        _check_str(key, "key", "TCPStore.get")
        return self._store.get(key)

    def add(self, key, amount):
        """Add ``amount`` to the integer counter at ``key`` and return the new
        value. An absent key starts at 0, so the first call returns ``amount``.

        The counter is stored as its decimal text: ``get`` on it returns for
        example ``b"3"``, and ``set(key, "10")`` makes it a counter at 10.

        Args:
            key (str): the counter's key.
            amount (int): the increment (may be negative or zero); must fit
                in a signed 64-bit integer.

        Returns:
            int: the counter after the addition.

        Raises:
            TypeError: ``key`` is not a ``str`` or ``amount`` is not an ``int``.
            ValueError: ``amount`` does not fit in 64 bits.
            DistStoreError: the value at ``key`` is not an integer, or the
                sum would overflow.

        >>> store.add("arrived", 1)
        1
        >>> store.add("arrived", 1)
        2
        """
        where = "TCPStore.add"
        _check_str(key, "key", where)
        _check_int(amount, "amount", where)
        if not _INT64_MIN <= amount <= _INT64_MAX:
            raise ValueError(f"{where}: 'amount' must fit in a signed 64-bit integer, "
                             f"got {amount}")
        return self._store.add(key, amount)

    def delete_key(self, key):
        """Remove ``key`` from the store.

        Args:
            key (str): the key.

        Returns:
            bool: whether the key existed.

        Raises:
            TypeError: ``key`` is not a ``str``.

        >>> store.set("tmp", "x")
        >>> store.delete_key("tmp")
        True
        >>> store.delete_key("tmp")
        False
        """
        _check_str(key, "key", "TCPStore.delete_key")
        return self._store.delete_key(key)

    def compare_set(self, key, expected, desired):
        """Atomically replace the value of ``key`` by ``desired`` if it
        currently equals ``expected``.

        An absent key counts as matching an empty ``expected``, so
        ``compare_set(key, b"", value)`` creates ``key`` only if nobody else
        has: a simple way to elect one process.

        Args:
            key (str): the key.
            expected (Union[str, bytes]): the value the caller believes is there.
            desired (Union[str, bytes]): the value to store on a match.

        Returns:
            bytes: the value ``key`` holds afterwards: ``desired`` on success,
            otherwise the current value (or ``expected`` when the key is
            absent and ``expected`` is not empty; nothing is stored then).

        Raises:
            TypeError: ``key`` is not a ``str``, or ``expected`` or
                ``desired`` is neither ``str`` nor ``bytes``.

        >>> store.compare_set("leader", b"", b"rank3")   # first caller wins
        b'rank3'
        >>> store.compare_set("leader", b"", b"rank5")   # later callers see it
        b'rank3'
        """
        where = "TCPStore.compare_set"
        _check_str(key, "key", where)
        return self._store.compare_set(key, _to_bytes(expected, "expected", where),
                                       _to_bytes(desired, "desired", where))

    def wait(self, keys, timeout=None):
        """Block until every key in ``keys`` has been set.

        Args:
            keys (Union[list[str], tuple[str]]): the keys; empty returns at once.
            timeout (datetime.timedelta, optional): how long to wait; ``None``
                (the default) means :attr:`timeout`.

        Raises:
            TypeError: ``keys`` is not a list or tuple of ``str``, or
                ``timeout`` is neither ``None`` nor a ``timedelta``.
            ValueError: ``timeout`` is negative.
            DistTimeoutError: some keys were still missing at the deadline
                (the message names them).

        >>> store.wait(["rank0/ready", "rank1/ready"], timedelta(seconds=30))
        """
        where = "TCPStore.wait"
        keys = _check_keys(keys, "keys", where)
        timeout_ms = None if timeout is None else _timeout_ms(timeout, "timeout", where)
        self._store.wait(keys, timeout_ms)

    def check(self, keys):
        """Return whether every key in ``keys`` is set, without waiting.

        Args:
            keys (Union[list[str], tuple[str]]): the keys; empty gives ``True``.

        Returns:
            bool: ``True`` if all of them are present.

        Raises:
            TypeError: ``keys`` is not a list or tuple of ``str``.

        >>> store.check(["rank0/ready"])
        False
        """
        keys = _check_keys(keys, "keys", "TCPStore.check")
        return self._store.check(keys)

    def num_keys(self):
        """Return the number of keys the server holds (set by any client).

        Returns:
            int: the key count.

        >>> store.num_keys()
        0
        """
        return self._store.num_keys()

    def append(self, key, value):
        """Append ``value`` to the bytes stored at ``key``; an absent key is
        created with ``value``. Wakes everyone waiting for ``key``.

        Args:
            key (str): the key.
            value (Union[str, bytes]): the bytes to append (``str`` as UTF-8).

        Raises:
            TypeError: ``key`` is not a ``str``, or ``value`` is neither
                ``str`` nor ``bytes``.
            DistStoreError: the result would exceed the 1 GiB value limit.

        >>> store.append("log", "a")
        >>> store.append("log", "b")
        >>> store.get("log")
        b'ab'
        """
        where = "TCPStore.append"
        _check_str(key, "key", where)
        self._store.append(key, _to_bytes(value, "value", where))

    def multi_get(self, keys):
        """Like :meth:`get` for several keys in one request: waits up to
        :attr:`timeout` until all are set.

        Args:
            keys (Union[list[str], tuple[str]]): the keys.

        Returns:
            list[bytes]: the values, in the order of ``keys``.

        Raises:
            TypeError: ``keys`` is not a list or tuple of ``str``.
            DistTimeoutError: some keys were still missing at the deadline.

        >>> store.multi_set(["a", "b"], ["1", "2"])
        >>> store.multi_get(["b", "a"])
        [b'2', b'1']
        """
        keys = _check_keys(keys, "keys", "TCPStore.multi_get")
        return self._store.multi_get(keys)

    def multi_set(self, keys, values):
        """Like :meth:`set` for several pairs, applied atomically: nobody
        sees some of the new values without the others.

        Args:
            keys (Union[list[str], tuple[str]]): the keys.
            values (Union[list, tuple]): one ``str`` or ``bytes`` per key.

        Raises:
            TypeError: ``keys`` is not a list or tuple of ``str``, or
                ``values`` is not a list or tuple of ``str``/``bytes``.
            ValueError: ``keys`` and ``values`` differ in length.

        >>> store.multi_set(["x", "y"], [b"1", "2"])
        """
        where = "TCPStore.multi_set"
        keys = _check_keys(keys, "keys", where)
        if not isinstance(values, (list, tuple)):
            raise TypeError(f"{where}: 'values' must be a list or tuple, "
                            f"got {_type_name(values)}")
        if len(keys) != len(values):
            raise ValueError(f"{where}: got {len(keys)} keys but {len(values)} values")
        converted = [_to_bytes(v, f"values[{i}]", where) for i, v in enumerate(values)]
        self._store.multi_set(keys, converted)
