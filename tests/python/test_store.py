"""Tests of meshcomm.TCPStore: argument checks, every method, timeouts,
authentication, GIL release, error mapping, and several processes sharing one
store. Every wait in here is bounded by a store timeout of a few seconds, a
thread join with a timeout, or the process runner's deadline.
"""

import os
import signal
import threading
import time
import warnings
from datetime import timedelta

import pytest

import meshcomm
from meshcomm import (
    DistError,
    DistMismatchError,
    DistPeerLostError,
    DistStoreError,
    DistTimeoutError,
    TCPStore,
)
from meshcomm import _meshcomm

HOST = "127.0.0.1"
# Generous enough for a loaded 2-core machine, short enough that a failure
# to wake a waiter shows up quickly.
STORE_TIMEOUT = timedelta(seconds=20)


@pytest.fixture(autouse=True)
def _no_ambient_token(monkeypatch):
    # A token in the caller's environment would change what these tests see.
    monkeypatch.delenv("MESHCOMM_AUTH_TOKEN", raising=False)


def make_server(timeout=STORE_TIMEOUT, **kwargs):
    return TCPStore(HOST, 0, is_master=True, timeout=timeout, **kwargs)


def make_client(server, timeout=STORE_TIMEOUT, **kwargs):
    return TCPStore(HOST, server.port, timeout=timeout, **kwargs)


@pytest.fixture
def server():
    return make_server()


@pytest.fixture
def client(server):
    return make_client(server)


def start_thread(fn, *args):
    """Runs fn in a daemon thread; returns (thread, box) where box collects
    the result or the exception."""
    box = {}

    def run():
        try:
            box["result"] = fn(*args)
        except BaseException as e:  # handed back to the test thread
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def join_result(thread, box, timeout=10.0):
    thread.join(timeout)
    assert not thread.is_alive(), "thread still blocked after %.0f s" % timeout
    if "error" in box:
        raise box["error"]
    return box.get("result")


# ---- package and errors -----------------------------------------------------

def test_package_exports():
    for name in ("TCPStore", "DistError", "DistTimeoutError", "DistPeerLostError",
                 "DistStoreError", "DistMismatchError"):
        assert name in meshcomm.__all__
        assert hasattr(meshcomm, name)


@pytest.mark.parametrize("cls", [DistError, DistTimeoutError, DistPeerLostError,
                                 DistStoreError, DistMismatchError])
def test_error_classes_are_runtime_errors(cls):
    assert issubclass(cls, RuntimeError)
    assert issubclass(cls, DistError)


@pytest.mark.parametrize("kind, expected", [
    ("InvalidArgument", ValueError),
    ("Timeout", DistTimeoutError),
    ("PeerLost", DistPeerLostError),
    ("StoreError", DistStoreError),
    ("Mismatch", DistMismatchError),
    ("Aborted", meshcomm.DistAbortedError),
    ("Error", DistError),
])
def test_native_errors_map_to_python_classes(kind, expected):
    with pytest.raises(expected) as info:
        _meshcomm._throw_for_testing(kind, f"message for {kind}")
    assert type(info.value) is expected
    assert str(info.value) == f"message for {kind}"


def test_foreign_native_errors_stay_runtime_error():
    with pytest.raises(RuntimeError) as info:
        _meshcomm._throw_for_testing("not a kind", "x")
    assert not isinstance(info.value, DistError)


# ---- constructor argument checks --------------------------------------------

@pytest.mark.parametrize("override, exc", [
    ({"host_name": None}, TypeError),
    ({"host_name": 127}, TypeError),
    ({"host_name": b"127.0.0.1"}, TypeError),
    ({"port": "1234"}, TypeError),
    ({"port": 1234.0}, TypeError),
    ({"port": None}, TypeError),
    ({"port": True}, TypeError),  # bool is refused where an int is expected
    ({"port": -1}, ValueError),
    ({"port": 65536}, ValueError),
    ({"world_size": "2"}, TypeError),
    ({"world_size": 2.0}, TypeError),
    ({"world_size": True}, TypeError),
    ({"world_size": 0}, ValueError),
    ({"world_size": -4}, ValueError),
    ({"is_master": 1}, TypeError),
    ({"is_master": "yes"}, TypeError),
    ({"is_master": None}, TypeError),
    ({"timeout": 300}, TypeError),
    ({"timeout": 1.5}, TypeError),
    ({"timeout": None}, TypeError),
    ({"timeout": timedelta(seconds=-1)}, ValueError),
    ({"wait_for_workers": 1}, TypeError),
    ({"wait_for_workers": None}, TypeError),
    ({"auth_token": b"secret"}, TypeError),
    ({"auth_token": 5}, TypeError),
    ({"auth_token": ""}, ValueError),
])
def test_constructor_rejects_bad_arguments(override, exc):
    kwargs = {"host_name": HOST, "port": 0, "is_master": True,
              "timeout": timedelta(seconds=2)}
    kwargs.update(override)
    with pytest.raises(exc) as info:
        TCPStore(**kwargs)
    assert list(override)[0] in str(info.value)


def test_type_errors_come_before_range_errors():
    with pytest.raises(TypeError):
        TCPStore(HOST, 70000, world_size="x")


@pytest.mark.parametrize("override", [
    {"multi_tenant": True},
    {"master_listen_fd": 3},
    {"use_libuv": False},
])
def test_unsupported_parameters_warn_and_are_ignored(override):
    name = list(override)[0]
    with pytest.warns(UserWarning, match=name):
        store = make_server(**override)
    store.set("k", "v")
    assert store.get("k") == b"v"


def test_default_reserved_parameters_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = make_server(multi_tenant=False, master_listen_fd=None, use_libuv=True)
        make_client(store)


def test_positional_arguments_follow_the_reference_order():
    store = TCPStore(HOST, 0, None, True, timedelta(seconds=5), True, False, None, True)
    assert store.port > 0
    assert store.timeout == timedelta(seconds=5)
    with pytest.raises(TypeError):
        # auth_token is keyword-only
        TCPStore(HOST, 0, None, True, timedelta(seconds=5), True, False, None, True, "t")


# ---- method argument checks -------------------------------------------------

@pytest.mark.parametrize("method, args, exc", [
    ("set", (1, "v"), TypeError),
    ("set", ("k", 1), TypeError),
    ("set", ("k", None), TypeError),
    ("set", ("k", bytearray(b"v")), TypeError),
    ("set", ("k" * 5000, "v"), ValueError),  # key over the 4 KiB limit
    ("get", (1,), TypeError),
    ("get", (None,), TypeError),
    ("get", ("k" * 5000,), ValueError),
    ("add", (1, 1), TypeError),
    ("add", ("k", "1"), TypeError),
    ("add", ("k", 1.0), TypeError),
    ("add", ("k", True), TypeError),
    ("add", ("k", None), TypeError),
    ("add", ("k", 1 << 63), ValueError),
    ("add", ("k", -(1 << 63) - 1), ValueError),
    ("delete_key", (1,), TypeError),
    ("delete_key", (b"k",), TypeError),
    ("compare_set", (1, b"", b"v"), TypeError),
    ("compare_set", ("k", 1, b"v"), TypeError),
    ("compare_set", ("k", b"", None), TypeError),
    ("wait", ("k",), TypeError),  # a bare str is not a list of keys
    ("wait", (None,), TypeError),
    ("wait", ([1],), TypeError),
    ("wait", (["k"], 5), TypeError),
    ("wait", (["k"], 0.5), TypeError),
    ("wait", (["k"], timedelta(seconds=-1)), ValueError),
    ("check", ("k",), TypeError),
    ("check", ([b"k"],), TypeError),
    ("append", (1, "v"), TypeError),
    ("append", ("k", 1), TypeError),
    ("multi_get", ("k",), TypeError),
    ("multi_get", (["a", 2],), TypeError),
    ("multi_set", ("k", ["v"]), TypeError),
    ("multi_set", (["k"], "v"), TypeError),
    ("multi_set", (["k"], [1]), TypeError),
    ("multi_set", ([1], ["v"]), TypeError),
    ("multi_set", (["a", "b"], ["v"]), ValueError),
])
def test_methods_reject_bad_arguments(server, method, args, exc):
    with pytest.raises(exc):
        getattr(server, method)(*args)
    # A refused call leaves the store usable and changes nothing.
    assert server.num_keys() == 0


@pytest.mark.parametrize("value, exc", [
    (5, TypeError),
    (5.0, TypeError),
    (None, TypeError),
    (timedelta(milliseconds=-1), ValueError),
])
def test_timeout_setter_rejects_bad_values(server, value, exc):
    with pytest.raises(exc):
        server.timeout = value
    assert server.timeout == STORE_TIMEOUT


# ---- methods ----------------------------------------------------------------

def test_set_and_get_round_trip(server, client):
    client.set("text", "hello")
    client.set("binary", b"\x00\xff\x00")
    client.set("empty", b"")
    client.set("unicode", "значение")
    assert server.get("text") == b"hello"
    assert server.get("binary") == b"\x00\xff\x00"
    assert server.get("empty") == b""
    assert server.get("unicode") == "значение".encode("utf-8")
    assert type(server.get("text")) is bytes
    client.set("text", "replaced")
    assert server.get("text") == b"replaced"


def test_large_value(server, client):
    value = os.urandom(8 << 20)
    client.set("big", value)
    assert server.get("big") == value


def test_add_counts(server, client):
    assert client.add("n", 1) == 1
    assert server.add("n", 5) == 6
    assert client.add("n", -10) == -4
    assert client.add("n", 0) == -4
    assert server.get("n") == b"-4"
    server.set("m", "41")
    assert client.add("m", 1) == 42
    assert client.add("big", (1 << 63) - 1) == (1 << 63) - 1


def test_add_on_non_numeric_value_raises(server):
    server.set("word", "hello")
    with pytest.raises(RuntimeError) as info:
        server.add("word", 1)
    assert isinstance(info.value, DistStoreError)
    assert "word" in str(info.value)
    assert server.get("word") == b"hello"  # untouched, store still usable


def test_add_overflow_raises(server):
    server.add("c", (1 << 63) - 1)
    with pytest.raises(DistStoreError):
        server.add("c", 1)


def test_delete_key(server, client):
    client.set("k", "v")
    assert server.delete_key("k") is True
    assert server.delete_key("k") is False
    assert client.check(["k"]) is False


@pytest.mark.parametrize("initial, expected, desired, returned, stored", [
    (None, b"", b"new", b"new", b"new"),         # absent, empty expected: created
    (None, b"old", b"new", b"old", None),        # absent, other expected: nothing
    (b"old", b"old", b"new", b"new", b"new"),    # match: swapped
    (b"cur", b"old", b"new", b"cur", b"cur"),    # mismatch: current returned
    (b"cur", "cur", "new", b"new", b"new"),      # str arguments
])
def test_compare_set(server, initial, expected, desired, returned, stored):
    if initial is not None:
        server.set("k", initial)
    assert server.compare_set("k", expected, desired) == returned
    if stored is None:
        assert server.check(["k"]) is False
    else:
        assert server.get("k") == stored


def test_check(server):
    assert server.check([]) is True
    server.set("a", "1")
    assert server.check(["a"]) is True
    assert server.check(("a", "b")) is False
    server.set("b", "2")
    assert server.check(["a", "b"]) is True


def test_num_keys(server, client):
    assert server.num_keys() == 0
    client.set("a", "1")
    client.add("b", 1)
    client.append("c", "x")
    assert server.num_keys() == 3
    server.delete_key("a")
    assert client.num_keys() == 2


def test_append(server, client):
    client.append("log", "a")
    server.append("log", b"b")
    client.append("log", "")
    assert server.get("log") == b"ab"


def test_multi_set_and_multi_get(server, client):
    client.multi_set(["a", "b", "c"], ["1", b"2", ""])
    assert server.multi_get(["c", "a", "b"]) == [b"", b"1", b"2"]
    client.multi_set(("a",), (b"x",))
    assert server.multi_get(("a", "a")) == [b"x", b"x"]
    assert server.multi_get([]) == []
    client.multi_set([], [])


def test_wait_returns_once_keys_exist(server, client):
    server.wait([])
    client.set("a", "1")
    server.wait(["a"])
    server.wait(["a"], timedelta(seconds=1))
    thread, box = start_thread(server.wait, ["b", "c"], timedelta(seconds=10))
    client.set("b", "1")
    time.sleep(0.05)
    assert thread.is_alive()  # still missing "c"
    client.set("c", "1")
    join_result(thread, box)


@pytest.mark.parametrize("writer", ["set", "add", "append", "multi_set", "compare_set"])
def test_every_write_wakes_a_getter(server, client, writer):
    thread, box = start_thread(server.get, "k")
    time.sleep(0.05)
    if writer == "multi_set":
        client.multi_set(["other", "k"], ["x", "1"])
    elif writer == "compare_set":
        client.compare_set("k", b"", b"1")
    elif writer == "add":
        client.add("k", 1)
    else:
        getattr(client, writer)("k", "1")
    assert join_result(thread, box) == b"1"


def test_properties(server, client):
    assert server.port > 0
    assert client.port == server.port
    assert server.host == HOST and client.host == HOST
    assert server.timeout == STORE_TIMEOUT
    client.timeout = timedelta(seconds=3, microseconds=1500)
    # Rounded up to whole milliseconds.
    assert client.timeout == timedelta(seconds=3, milliseconds=2)
    assert server.timeout == STORE_TIMEOUT  # per object, not per server
    assert str(server.port) in repr(server) and "server" in repr(server)
    assert "client" in repr(client)


def test_default_timeout_is_300_seconds():
    store = TCPStore(HOST, 0, is_master=True)
    assert store.timeout == timedelta(seconds=300)


def test_very_long_timeout_still_waits(server, client):
    client.timeout = timedelta.max
    thread, box = start_thread(client.get, "later")
    time.sleep(0.2)
    server.set("later", "ok")
    assert join_result(thread, box) == b"ok"


def test_server_on_every_interface():
    store = TCPStore("0.0.0.0", 0, is_master=True, timeout=STORE_TIMEOUT)
    other = TCPStore(HOST, store.port, timeout=STORE_TIMEOUT)
    other.set("k", "v")
    assert store.get("k") == b"v"


def test_one_store_shared_by_threads(server):
    def bump():
        for _ in range(200):
            server.add("n", 1)

    threads = [start_thread(bump) for _ in range(4)]
    for thread, box in threads:
        join_result(thread, box, timeout=30)
    assert server.get("n") == b"800"


# ---- timeouts ---------------------------------------------------------------

def test_get_timeout_names_the_key():
    store = make_server(timeout=timedelta(milliseconds=300))
    start = time.monotonic()
    with pytest.raises(DistTimeoutError) as info:
        store.get("never_set_key")
    elapsed = time.monotonic() - start
    assert isinstance(info.value, RuntimeError)
    assert "never_set_key" in str(info.value)
    assert 0.25 <= elapsed < 5
    # The server answered the timeout, so the connection is still good.
    store.set("k", "v")
    assert store.get("k") == b"v"


def test_wait_timeout_names_only_missing_keys(server):
    server.set("present", "1")
    start = time.monotonic()
    with pytest.raises(DistTimeoutError) as info:
        server.wait(["present", "absent"], timedelta(milliseconds=200))
    assert time.monotonic() - start < 5  # overrides the 20 s store timeout
    assert "'absent'" in str(info.value)
    assert "'present'" not in str(info.value)


def test_multi_get_timeout(server):
    server.set("a", "1")
    server.timeout = timedelta(milliseconds=200)
    with pytest.raises(DistTimeoutError) as info:
        server.multi_get(["a", "missing"])
    assert "missing" in str(info.value)


def test_zero_timeout_fails_at_once(server):
    with pytest.raises(DistTimeoutError):
        server.wait(["x"], timedelta(0))
    server.set("x", "1")
    server.wait(["x"], timedelta(0))


def test_connect_timeout_without_server(free_port):
    start = time.monotonic()
    with pytest.raises(DistTimeoutError) as info:
        TCPStore(HOST, free_port, timeout=timedelta(milliseconds=500))
    assert time.monotonic() - start < 10
    assert str(free_port) in str(info.value)


def test_wait_for_workers_timeout():
    start = time.monotonic()
    with pytest.raises(DistTimeoutError) as info:
        TCPStore(HOST, 0, world_size=3, is_master=True, timeout=timedelta(milliseconds=500))
    assert time.monotonic() - start < 10
    assert "worker" in str(info.value)


def test_without_wait_for_workers_the_server_returns_at_once():
    start = time.monotonic()
    store = TCPStore(HOST, 0, world_size=3, is_master=True, timeout=timedelta(seconds=20),
                     wait_for_workers=False)
    assert time.monotonic() - start < 5
    store.set("k", "v")


def test_port_in_use_is_a_dist_error(server):
    with pytest.raises(DistError) as info:
        TCPStore(HOST, server.port, is_master=True, timeout=timedelta(seconds=2))
    assert str(server.port) in str(info.value)


# ---- authentication ---------------------------------------------------------

def test_matching_token_is_accepted():
    server = make_server(auth_token="s3cret")
    client = make_client(server, auth_token="s3cret")
    client.set("k", "v")
    assert server.get("k") == b"v"


@pytest.mark.parametrize("token", ["wrong", None])
def test_wrong_or_missing_token_is_refused(token):
    server = make_server(auth_token="s3cret")
    with pytest.raises(DistStoreError) as info:
        make_client(server, timeout=timedelta(seconds=5), auth_token=token)
    assert isinstance(info.value, RuntimeError)
    assert "auth" in str(info.value).lower()
    server.set("still", "working")


def test_token_from_environment(monkeypatch):
    monkeypatch.setenv("MESHCOMM_AUTH_TOKEN", "from-env")
    server = make_server()
    make_client(server).set("k", "v")
    with pytest.raises(DistStoreError):
        make_client(server, timeout=timedelta(seconds=5), auth_token="other")
    monkeypatch.delenv("MESHCOMM_AUTH_TOKEN")
    with pytest.raises(DistStoreError):
        make_client(server, timeout=timedelta(seconds=5))


# ---- the GIL is released while calls block ----------------------------------

def _spin_python(seconds):
    """Runs Python bytecode for `seconds`; returns iterations done."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


@pytest.mark.parametrize("call, args, expected", [
    ("get", ("late",), b"v"),
    ("wait", (["late"],), None),
    ("multi_get", (["late"],), [b"v"]),
])
def test_blocking_calls_release_the_gil(server, client, call, args, expected):
    thread, box = start_thread(getattr(server, call), *args)
    time.sleep(0.05)
    start = time.monotonic()
    spins = _spin_python(0.3)
    # If the blocked call held the GIL, this thread could not have run until
    # the 20 s store timeout.
    assert time.monotonic() - start < 2
    assert spins > 1000
    assert thread.is_alive()
    client.set("late", "v")
    assert join_result(thread, box) == expected


def test_constructor_releases_the_gil(free_port):
    # The server waits for one worker; the worker is created by this thread,
    # which needs the GIL to do so.
    thread, box = start_thread(
        lambda: TCPStore(HOST, free_port, world_size=2, is_master=True,
                         timeout=timedelta(seconds=20)))
    client = TCPStore(HOST, free_port, timeout=timedelta(seconds=20))
    server = join_result(thread, box, timeout=25)
    client.set("k", "v")
    assert server.get("k") == b"v"


# ---- several processes ------------------------------------------------------

def _counter_worker(rank, nprocs, port):
    timeout = timedelta(seconds=30)
    store = TCPStore(HOST, port, world_size=nprocs, is_master=(rank == 0), timeout=timeout)
    counts = [store.add("counter", 1) for _ in range(25)]
    store.set(f"value/{rank}", f"hello from {rank}")
    store.set(f"added/{rank}", "1")
    store.wait([f"added/{r}" for r in range(nprocs)])
    total = int(store.get("counter"))
    values = store.multi_get([f"value/{r}" for r in range(nprocs)])
    leader = store.compare_set("leader", b"", f"rank{rank}")
    # The server must outlive every client's last request.
    store.set(f"done/{rank}", "1")
    if rank == 0:
        store.wait([f"done/{r}" for r in range(nprocs)])
    return {"counts": counts, "total": total, "values": values, "leader": leader}


def test_four_processes_share_one_store(free_port, run_workers):
    nprocs = 4
    results = run_workers(_counter_worker, nprocs, args=(free_port,), timeout=90)
    all_counts = sorted(c for r in results for c in r["counts"])
    # Every add returned a distinct value: increments were atomic.
    assert all_counts == list(range(1, 25 * nprocs + 1))
    expected_values = [f"hello from {r}".encode() for r in range(nprocs)]
    leaders = {r["leader"] for r in results}
    assert len(leaders) == 1
    assert leaders.pop() in {f"rank{r}".encode() for r in range(nprocs)}
    for r in results:
        assert r["total"] == 25 * nprocs
        assert r["values"] == expected_values


def _late_server_worker(rank, nprocs, port):
    timeout = timedelta(seconds=30)
    if rank == 0:
        time.sleep(1.0)  # the client is already retrying by now
        store = TCPStore(HOST, port, world_size=2, is_master=True, timeout=timeout)
        store.set("hello", "from the server")
        return store.get("reply")
    store = TCPStore(HOST, port, timeout=timeout)
    greeting = store.get("hello")
    store.set("reply", b"from the client")
    return greeting


def test_client_started_before_server(free_port, run_workers):
    results = run_workers(_late_server_worker, 2, args=(free_port,), timeout=60)
    assert results == [b"from the client", b"from the server"]


def _dying_server(rank, nprocs, port):
    store = TCPStore(HOST, port, is_master=True, timeout=timedelta(seconds=30))
    store.set("ready", "1")
    store.get("die")
    os.kill(os.getpid(), signal.SIGKILL)


def test_client_fails_fast_when_server_dies(free_port, spawn_workers):
    workers = spawn_workers(_dying_server, 1, args=(free_port,), timeout=60)
    client = TCPStore(HOST, free_port, timeout=timedelta(seconds=30))
    client.wait(["ready"])
    client.set("die", "now")
    start = time.monotonic()
    with pytest.raises(DistStoreError) as info:
        # Waits for a key nobody will set; must end when the server goes,
        # not after the 30 s timeout.
        client.get("never")
    assert time.monotonic() - start < 10
    assert isinstance(info.value, RuntimeError)
    (outcome,) = workers.join()
    assert outcome.exitcode == -signal.SIGKILL
    # The connection is marked broken; later calls fail at once.
    with pytest.raises(DistStoreError):
        client.set("k", "v")
