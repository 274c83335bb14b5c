"""The store's port: a free one on this host, or whether a given one is taken."""

import errno
import socket


def _free_port(addr):
    """A port that was free on addr a moment ago (the kernel's choice)."""
    infos = socket.getaddrinfo(addr, 0, type=socket.SOCK_STREAM)
    last = None
    for family, socktype, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, socktype, proto) as s:
                s.bind(sockaddr)
                return s.getsockname()[1]
        except OSError as e:
            last = e
    raise OSError(f"cannot bind a port on {addr}: {last}")


def _port_with_free_next(tries=50):
    """A kernel-chosen port P whose neighbour P + 1 is free too, or 0 (let
    the store choose). Under meshrun, torch's env:// rendezvous takes
    MASTER_PORT + 1 (meshcomm/torch/launch_env.py), so the job needs both."""
    for _ in range(tries):
        port = _free_port("0.0.0.0")
        if port < 65535 and not _port_in_use(port) and not _port_in_use(port + 1):
            return port
    return 0


def _port_in_use(port):
    """Whether the store of rank 0 would fail to bind port. It listens on
    0.0.0.0 with SO_REUSEADDR, so this asks the same question the same way."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False
