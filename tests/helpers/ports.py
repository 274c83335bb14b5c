"""TCP ports for the jobs the tests start (MASTER_PORT, daemons' ports).

A job's port must be a number known before its processes start, so a test
cannot bind port 0 and keep the socket. Asking the kernel for port 0 and
closing it would hand out a number from the ephemeral range, which every
outgoing connection and every other ``bind(0)`` on the machine draws from:
with suites running side by side, another process can take it before the
job's store binds it (seen as a store client reaching a stranger's server
and being refused during its hello). So the ports come from just below
the ephemeral range, where the kernel never assigns one by itself, chosen
at random and checked free by binding them.

Every suite's conftest puts this folder (tests/helpers) on sys.path:
``from ports import free_port``.
"""

import random
import socket

_RANDOM = random.SystemRandom()
_SPAN = 12000  # how far below the ephemeral range the ports may lie


def _range():
    """[low, high) below the kernel's ephemeral ports, or None."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if low <= 2048:
        return None
    return max(1024, low - _SPAN), low


def free_ports(count):
    """`count` distinct ports of 127.0.0.1 that were free a moment ago."""
    held = []
    try:
        span = _range()
        for _ in range(200 * count):
            if len(held) == count:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", _RANDOM.randrange(*span) if span else 0))
            except OSError:  # taken: draw again
                s.close()
                continue
            held.append(s)
        if len(held) < count:
            raise RuntimeError(f"found only {len(held)} of {count} free ports")
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def free_port():
    """One port of 127.0.0.1 that was free a moment ago."""
    return free_ports(1)[0]
