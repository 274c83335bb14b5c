#!/usr/bin/python3
"""Operations per second of torch.distributed.TCPStore, measured the way
bench/store_bench measures meshcomm's store, so the two can be compared.

Per measurement: the parent forks the client processes first, then starts
the master store (port 0) and hands the port to the clients through a pipe;
each client connects on its own, stores the keys it will read (for get),
and waits on a "go" key; then runs its operation until --duration-ms passes
or it has done --max-ops, and reports (ops, seconds) through a second pipe.
ops/s = all clients' operations / the slowest client's elapsed time.

Numbers include the cost of calling the store from Python, which is how
torch users reach it.
"""

import argparse
import datetime
import os
import select
import signal
import struct
import sys
import time

import torch
import torch.distributed as dist

RECORD = struct.Struct("<iiqd")  # client, ok, ops, seconds (atomic pipe write)
HOST = "127.0.0.1"


def parse_size(text):
    mult = 1
    if text[-1:] in ("K", "k"):
        mult, text = 1 << 10, text[:-1]
    elif text[-1:] in ("M", "m"):
        mult, text = 1 << 20, text[:-1]
    value = int(text) * mult
    if value <= 0 or value > (1 << 30):
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    return value


def positive(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def read_exact(fd, n, deadline):
    data = b""
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out reading from a pipe")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError("pipe closed")
        data += chunk
    return data


def run_client(args, op, value_bytes, client, port_fd):
    timeout = datetime.timedelta(milliseconds=args.timeout_ms)
    (port,) = struct.unpack("<H", read_exact(port_fd, 2, time.monotonic() + args.timeout_ms / 1000))
    store = dist.TCPStore(HOST, port, None, False, timeout)
    value = bytes([ord("a") + client % 26]) * value_bytes
    keys = [f"sb/{client}/{k}" for k in range(args.keys)]
    if op == "get":
        for k in keys:
            store.set(k, value)
    store.add("sb/ready", 1)
    store.get("sb/go")

    nkeys = len(keys)
    max_ops = args.max_ops
    start = time.monotonic()
    stop = start + args.duration_ms / 1000.0
    ops = 0
    total = 0
    # One loop per op keeps the per-call overhead of the harness minimal.
    if op == "set":
        while ops < max_ops and time.monotonic() < stop:
            store.set(keys[ops % nkeys], value)
            ops += 1
    elif op == "get":
        while ops < max_ops and time.monotonic() < stop:
            total += len(store.get(keys[ops % nkeys]))
            ops += 1
    else:
        while ops < max_ops and time.monotonic() < stop:
            store.add(keys[ops % nkeys], 1)
            ops += 1
    seconds = time.monotonic() - start
    ok = 1 if op != "get" or total == ops * value_bytes else 0
    return RECORD.pack(client, ok, ops, seconds)


def measure(args, op, value_bytes, clients):
    port_r, port_w = os.pipe()
    res_r, res_w = os.pipe()
    pids = []
    try:
        for client in range(clients):
            pid = os.fork()
            if pid == 0:
                code = 3
                try:
                    os.close(port_w)
                    os.close(res_r)
                    record = run_client(args, op, value_bytes, client, port_r)
                    os.write(res_w, record)
                    code = 0
                except BaseException as e:  # report anything, then leave at once
                    print(f"torch_store_bench: client {client}: {e}", file=sys.stderr)
                    os.write(res_w, RECORD.pack(client, 0, 0, 0.0))
                finally:
                    os._exit(code)
            pids.append(pid)
        os.close(port_r)
        os.close(res_w)

        timeout = datetime.timedelta(milliseconds=args.timeout_ms)
        server = dist.TCPStore(HOST, 0, None, True, timeout, wait_for_workers=False)
        port = server.port
        for _ in range(clients):
            os.write(port_w, struct.pack("<H", port))
        os.close(port_w)

        ready_by = time.monotonic() + args.timeout_ms / 1000
        while server.add("sb/ready", 0) < clients:
            if time.monotonic() > ready_by:
                raise TimeoutError("clients did not connect in time")
            time.sleep(0.0002)
        server.set("sb/go", "1")

        done_by = time.monotonic() + (args.duration_ms + args.timeout_ms) / 1000
        total_ops, slowest = 0, 0.0
        for _ in range(clients):
            client, ok, ops, seconds = RECORD.unpack(read_exact(res_r, RECORD.size, done_by))
            if not ok:
                raise RuntimeError(f"client {client} failed")
            total_ops += ops
            slowest = max(slowest, seconds)
        os.close(res_r)
        for pid in pids:
            os.waitpid(pid, 0)
        pids = []
        del server
        return total_ops, slowest
    finally:
        for pid in pids:  # only left on failure: kill by pid, then reap
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default="set,get,add")
    p.add_argument("--sizes", default="64,1M", help="value sizes for set and get")
    p.add_argument("--clients", default="1,4")
    p.add_argument("--duration-ms", type=positive, default=2000)
    p.add_argument("--max-ops", type=positive, default=200000)
    p.add_argument("--keys", type=positive, default=4)
    p.add_argument("--timeout-ms", type=positive, default=30000)
    p.add_argument("--csv", action="store_true")
    args = p.parse_args()
    try:
        ops = args.ops.split(",")
        if any(o not in ("set", "get", "add") for o in ops):
            raise ValueError("--ops takes set, get, add")
        sizes = [parse_size(s) for s in args.sizes.split(",")]
        clients = [positive(c) for c in args.clients.split(",")]
    except (ValueError, argparse.ArgumentTypeError) as e:
        p.error(str(e))

    if args.csv:
        print("op,value_bytes,clients,ops_per_s", flush=True)
    else:
        print(f"# torch.distributed.TCPStore (torch {torch.__version__}): {args.duration_ms} ms or {args.max_ops} ops "
              f"per client per row, {args.keys} keys per client")
        print(f"{'op':<4} {'value_bytes':>12} {'clients':>8} {'ops_per_s':>14} {'total_ops':>12}",
              flush=True)
    for op in ops:
        for size in ([0] if op == "add" else sizes):
            for c in clients:
                try:
                    n, seconds = measure(args, op, size, c)
                except Exception as e:
                    print(f"torch_store_bench: {op} {size} B x{c}: {e}", file=sys.stderr)
                    return 3
                rate = n / seconds if seconds > 0 else 0.0
                if args.csv:
                    print(f"{op},{size},{c},{rate:.1f}", flush=True)
                else:
                    print(f"{op:<4} {size:>12} {c:>8} {rate:>14.0f} {n:>12}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
