"""monitored_barrier: a barrier that says which ranks did not arrive.

torch's gloo backend offers it for debugging hangs (``dist.monitored_barrier``
accepts only gloo groups by name; ``ProcessGroup.monitored_barrier`` works on
a meshcomm group). It runs through the group's store, not its transport: a
rank that never arrives leaves nothing half-sent behind, and the group stays
usable whatever the outcome.

Each rank but 0 announces itself and waits for rank 0's verdict. Rank 0
waits for the ranks in order, each for what is left of the timeout, and
then publishes the verdict: ``ok``, or the error that names the missing
ranks, which every rank then raises. The messages begin as gloo's do
(torch's tests and users' scripts match them) and add meshcomm's detail.
"""

import time

__all__ = ["monitored_barrier"]

_OK = b"ok"
# How much longer than the timeout a rank other than 0 waits for rank 0's
# verdict: rank 0 may start later, and names the culprits when it answers.
_VERDICT_GRACE_S = 1.0


def monitored_barrier(store, rank, size, seq, timeout, wait_all_ranks):
    """Call `seq` (counted per group, from 1) of monitored_barrier on `rank`."""
    limit_s = max(timeout.total_seconds(), 0.0)
    limit_ms = int(limit_s * 1000)
    if size == 1:
        return
    prefix = f"meshcomm/monitored_barrier/{seq}/"
    if rank != 0:
        store.set(f"{prefix}arrived/{rank}", b"1")
        verdict = _wait(store, prefix + "verdict", time.monotonic() + limit_s + _VERDICT_GRACE_S)
        if store.add(prefix + "read", 1) == size - 1:
            store.delete_key(prefix + "verdict")
            store.delete_key(prefix + "read")
        if verdict == _OK:
            return
        why = (verdict.decode(errors="replace") if verdict is not None else
               f"rank 0 gave no verdict within {limit_ms} ms plus {_VERDICT_GRACE_S:g} s: it has "
               "not reached the barrier, or is still waiting for a rank that has not")
        raise RuntimeError(f"Rank {rank} successfully reached monitoredBarrier, but received "
                           f"errors while waiting for send/recv from rank 0 (meshcomm: {why})")

    deadline = time.monotonic() + limit_s
    missing = []
    error = None
    for r in range(1, size):
        key = f"{prefix}arrived/{r}"
        if missing:  # wait_all_ranks after the deadline: only who is there
            if _wait(store, key, 0.0) is None:
                missing.append(r)
            continue
        if time.monotonic() >= deadline and _wait(store, key, 0.0) is None:
            if not wait_all_ranks:
                error = (f"Rank 0 timed out in monitoredBarrier after {limit_ms} ms (meshcomm: "
                         f"rank {r} had not arrived, nor perhaps the ranks after it)")
                break
            missing.append(r)
            continue
        if _wait(store, key, deadline) is None:
            missing.append(r)
            if not wait_all_ranks:
                break
    if error is None and missing:
        if len(missing) == 1:
            error = (f"[Rank 0]: Rank {missing[0]} failed to pass monitoredBarrier in "
                     f"{limit_ms} ms")
        else:
            error = (f"[Rank 0]: Ranks {', '.join(map(str, missing))} failed to pass "
                     f"monitoredBarrier in {limit_ms} ms")
        error += " (meshcomm: it never called monitored_barrier, or called it too late; its "
        error += "stack shows where it is)"
    store.set(prefix + "verdict", _OK if error is None else error.encode())
    for r in range(1, size):
        store.delete_key(f"{prefix}arrived/{r}")
    if error is not None:
        raise RuntimeError(error)


def _wait(store, key, deadline):
    """The value of key once set, or None at `deadline` (time.monotonic).
    Polls (every 1 ms at first, then up to every 20 ms): torch's
    store.wait logs a warning of its own when it times out."""
    pause = 0.001
    while not store.check([key]):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        time.sleep(min(pause, remaining))
        pause = min(pause * 2, 0.02)
    return store.get(key)
