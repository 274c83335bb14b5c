#!/usr/bin/env python3
"""What one small all_reduce costs through torch, in instructions.

Runs one process (world size 1) per backend under valgrind's callgrind and
counts the instructions of N calls of ``dist.all_reduce`` on an 8-byte
float32 tensor, with the interpreter's start, torch's import and the group's
set-up left out (callgrind collects only while the calls run). For the
meshcomm backend it also counts the part spent in meshcomm's C++ operation
(``ProcessGroup::allReduce``), so what remains is the price of the way
there: torch's Python wrapper, the backend's Python method, the binding and
the Work.

Backends (each called through ``dist.all_reduce`` but the last two):
  meshcomm   the meshcomm backend (meshcomm.torch)
  null       a Python ProcessGroup whose allreduce returns a completed Work
             at once: what torch's wrapper and a Python backend cost before
             any backend work
  fake       torch's own FakeProcessGroup (C++, does nothing): what torch's
             wrapper and the C++ dispatch to a C++ backend cost
  meshcomm-op        meshcomm.torch.all_reduce_(x, handle), on the meshcomm
                     backend's group: meshcomm's kernel without torch's
                     operator dispatch
  meshcomm-dispatch  torch.ops.meshcomm.all_reduce_(x, handle): the same
                     kernel through torch's operator dispatch (as DeepSpeed's
                     CPU all_reduce is called)

Instruction counts do not move with the machine's load, as wall time does
here; they rank the parts, they are not times.

    build/venv/bin/python bench/torch_call_cost.py [--calls 2000]
        [--backends meshcomm,null,fake,meshcomm-op,meshcomm-dispatch]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# The measured process: sets the group up, then runs `calls` calls between
# two handshakes with the harness, which starts and stops the collection.
CHILD = r"""
import os, sys, time
import torch
import torch.distributed as dist
backend, calls, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if backend.startswith("meshcomm"):
    import meshcomm.torch  # noqa: F401
    dist.init_process_group("meshcomm", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
elif backend == "fake":
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=1)
else:
    from meshcomm.torch.work import DoneWork

    class NullGroup(dist.ProcessGroup):
        def allreduce(self, tensors, opts=None):
            return DoneWork(tensors)

        def getBackendName(self):
            return "null"

    dist.Backend.register_backend("null", lambda store, rank, size, timeout: NullGroup(rank, size),
                                  devices=["cpu"])
    dist.init_process_group("null", store=dist.HashStore(), rank=0, world_size=1)
x = torch.zeros(2)
if backend == "meshcomm-op":
    def run(n, f=meshcomm.torch.all_reduce_, h=meshcomm.torch.group_handle()):
        for _ in range(n):
            f(x, h)
elif backend == "meshcomm-dispatch":
    def run(n, f=torch.ops.meshcomm.all_reduce_, h=meshcomm.torch.group_handle()):
        for _ in range(n):
            f(x, h)
else:
    def run(n, f=dist.all_reduce):
        for _ in range(n):
            f(x)
run(200)  # warm every cache and lazy path first


def handshake(name):
    open(os.path.join(folder, name + ".ready"), "w").close()
    go = os.path.join(folder, name + ".go")
    while not os.path.exists(go):
        time.sleep(0.01)


handshake("start")
run(calls)
handshake("stop")
dist.destroy_process_group()
"""


def wait_for(path, proc, seconds):
    end = time.monotonic() + seconds
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise RuntimeError(f"the measured process ended early (exit {proc.returncode})")
        if time.monotonic() > end:
            raise RuntimeError(f"{path} did not appear within {seconds} s")
        time.sleep(0.2)


def measure(backend, calls, keep=None):
    folder = tempfile.mkdtemp(prefix=f"meshcomm-torch-cost-{backend}-")
    child = os.path.join(folder, "child.py")
    with open(child, "w") as f:
        f.write(CHILD)
    out = os.path.join(folder, "callgrind.out")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
           sys.executable, child, backend, str(calls), folder]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, MESHCOMM_TIMEOUT_MS="600000"))
    try:
        wait_for(os.path.join(folder, "start.ready"), proc, 1800)
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True,
                       capture_output=True)
        open(os.path.join(folder, "start.go"), "w").close()
        wait_for(os.path.join(folder, "stop.ready"), proc, 1800)
        subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True,
                       capture_output=True)
        open(os.path.join(folder, "stop.go"), "w").close()
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"{backend}: the measured process failed:\n{err[-2000:]}")
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
                          check=True, capture_output=True, text=True).stdout
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(out, os.path.join(keep, f"callgrind.{backend}"))
    shutil.rmtree(folder, ignore_errors=True)
    total = int(re.search(r"^\s*([\d,]+)\s+\(100\.0%\)\s+PROGRAM TOTALS", text, re.M)
                .group(1).replace(",", ""))
    core = 0
    m = re.search(r"^\s*([\d,]+)\s+\([ \d.]+%\)\s+\S*meshcomm::ProcessGroup::allReduce\(", text, re.M)
    if m:
        core = int(m.group(1).replace(",", ""))
    return total / calls, core / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--backends", default="meshcomm,null,fake,meshcomm-op,meshcomm-dispatch")
    ap.add_argument("--keep", help="keep each backend's callgrind file in this folder")
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("torch_call_cost: valgrind is missing; install it: apt-get install -y valgrind")
    print(f"# all_reduce of 8 bytes (float32), world size 1: instructions per call "
          f"(callgrind, {args.calls} calls)\n")
    print("| backend | whole call | in meshcomm's C++ operation | the way there |")
    print("|---|---:|---:|---:|")
    for backend in args.backends.split(","):
        whole, core = measure(backend, args.calls, args.keep)
        inside = f"{core:.0f}" if core else "-"
        print(f"| {backend} | {whole:.0f} | {inside} | {whole - core:.0f} |", flush=True)


if __name__ == "__main__":
    main()
