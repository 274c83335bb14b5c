#!/usr/bin/env python3
"""DeepSpeed's CPU shared-memory all_reduce (the deepspeed_shm_comm op of
DeepSpeed 0.19.8, csrc/cpu/comm/shm.cpp and shm_interface.cpp), measured the
way meshcomm-bench measures meshcomm, with the same CSV columns:
op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check.

    PY deepspeed_bench.py build --source DEEPSPEED_SDIST_DIR --op-dir DIR
    PY deepspeed_bench.py all_reduce -n N --op-dir DIR [-b SIZE] [-e SIZE]
        [-f F] [--iters N] [--warmup N] [--buffers K] [--check]
        [--timeout-ms T] [--time-limit S]

PY is an interpreter with torch 2.13 (and ninja, for `build`):
build-peers/pyenv/bin/python, which bench/peers/install_peers.sh makes.

`build` compiles the op from DeepSpeed's source with the flags DeepSpeed's
own ShareMemCommBuilder passes (-O2 -fopenmp), through
torch.utils.cpp_extension as DeepSpeed's JIT loader does, into DIR.
shm.cpp's reduce kernels are declared __attribute__((target("avx512bw"))):
on a CPU with AVX2 but no AVX512BW the compiler may still emit AVX-512
instructions into the float32 kernel and the memcpy loop (an illegal
instruction at run time), so there `build` compiles a copy of the source
in which those two functions target AVX2 instead, and checks the result's
disassembly. The bf16/fp16 kernels keep AVX-512 (this bench never calls
them; DeepSpeed itself only calls them on AVX512BW hosts).

The measurement is bench/peers/torch_bench.py's (imported from it: sizes,
buffer rotation, warmup, calibration, max over ranks; read its docstring):
only the timed call differs, torch.ops.deepspeed.inference_all_reduce_ on a
float32 tensor, in place, the call DeepSpeed's inference_all_reduce makes
when every rank is on this host. Barriers and the max over ranks of the
times go through a gloo process group, as in a DeepSpeed job, where the op
handles only all_reduce and torch.distributed everything else. Only
all_reduce exists: the op has no other collective.

The process forks N ranks, set up as DeepSpeed's launcher sets them up:
LOCAL_SIZE = N (the op uses shared memory only when every rank is local)
and OMP_NUM_THREADS = cores / N (its --bind_cores_to_rank; at least 1),
which sizes the OpenMP loops inside the op. Each rank maps the 66 MiB
shared segment of every other rank (/dev/shm/deepspeed_allreduce_buffer_*);
the op never removes them, so the ranks and the parent do.
"""

import argparse
import contextlib
import datetime
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist

import torch_bench
from torch_bench import EXIT_RUNTIME, at_least

OP_NAME = "deepspeed_shm_comm"  # DeepSpeed's ShareMemCommBuilder.NAME
COMM_SOURCES = ("shm.cpp", "shm.h", "shm_interface.cpp", "x86_64/shm.h")
# The compile flags of DeepSpeed's ShareMemCommBuilder.cxx_args(), plus the
# -UC10_USE_GLOG its jit_load() adds to every op.
CXX_FLAGS = ["-O2", "-fopenmp", "-UC10_USE_GLOG"]
# (mangled symbol, declaration in x86_64/shm.h) of the functions a float32
# all_reduce runs under target("avx512bw").
FP32_KERNELS = {
    "_Z19reduce_fp32_buffersiiPcPS_":
        "void reduce_fp32_buffers(int start_elements, int num_elements, char* to_buffer, "
        "char** buffers)\n    __attribute__((target(\"avx512bw\")));",
    "_Z15parallel_memcpyPvS_m":
        "void parallel_memcpy(void* to, void* from, size_t n_bytes) "
        "__attribute__((target(\"avx512bw\")));",
}
AVX512_OPERAND = re.compile(r"%zmm|%k[0-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])\b")


def fail(message):
    print(f"deepspeed_bench: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def read(path):
    with open(path) as f:
        return f.read()


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def avx512_in(so_path, symbol):
    """Whether function `symbol` of `so_path`, or a loop OpenMP outlined from
    it (`symbol`._omp_fn.N, where the vector code lives), uses an AVX-512
    register."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so_path], check=True,
                          capture_output=True, text=True).stdout
    bodies = [block for block in text.split("\n\n")
              if re.match(rf"[0-9a-f]+ <{re.escape(symbol)}(\.[^>@]*)?>:", block.lstrip("\n"))]
    if not bodies:
        fail(f"{symbol} not found in {so_path}")
    return any(AVX512_OPERAND.search(body) for body in bodies)


def build(argv):
    p = argparse.ArgumentParser(prog="deepspeed_bench.py build")
    p.add_argument("--source", required=True, help="the unpacked deepspeed sdist")
    p.add_argument("--op-dir", required=True, help="where the op is built")
    args = p.parse_args(argv)
    comm = os.path.join(args.source, "csrc", "cpu", "comm")
    flags = cpu_flags()
    if "avx512bw" in flags:
        isa = "avx512bw"
    elif "avx2" in flags:
        isa = "avx2"
    else:
        fail("this CPU has no AVX2: DeepSpeed would not use its shm all_reduce here "
             "(vector_kernel_level 0) but torch.distributed's")

    # A copy of the sources, rewritten only when its content changes, so
    # that ninja recompiles nothing on a second build.
    src = os.path.join(args.op_dir, "src")
    os.makedirs(os.path.join(src, "x86_64"), exist_ok=True)
    for name in COMM_SOURCES:
        path = os.path.join(comm, name)
        if not os.path.isfile(path):
            fail(f"{path} not found: is --source a deepspeed 0.19.8 sdist?")
        text = read(path)
        if isa == "avx2" and name == "x86_64/shm.h":
            for declaration in FP32_KERNELS.values():
                if declaration not in text:
                    fail(f"{path} no longer declares {declaration.split('(')[0]!r} as expected; "
                         "revisit the AVX2 patch")
                text = text.replace(declaration, declaration.replace('"avx512bw"', '"avx2"'))
        copy = os.path.join(src, name)
        if not os.path.isfile(copy) or read(copy) != text:
            with open(copy, "w") as f:
                f.write(text)

    # cpp_extension runs the ninja that pip installed beside this interpreter.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    from torch.utils.cpp_extension import load
    out = os.path.join(args.op_dir, "build")
    os.makedirs(out, exist_ok=True)
    module = load(name=OP_NAME, sources=[os.path.join(src, "shm_interface.cpp"),
                                         os.path.join(src, "shm.cpp")],
                  extra_cflags=CXX_FLAGS, build_directory=out, verbose=False)
    so_path = module.__file__
    wide = {sym: avx512_in(so_path, sym) for sym in FP32_KERNELS}
    if isa == "avx2" and any(wide.values()):
        fail(f"{so_path}: the float32 kernels still use AVX-512 on an AVX2-only CPU")
    print(f"deepspeed_bench: built {so_path} for {isa} (torch {torch.__version__}, "
          f"vector_kernel_level {module.vector_kernel_level()}, float32 kernels "
          f"{'with' if any(wide.values()) else 'without'} AVX-512 instructions)")
    return 0


def op_path(op_dir):
    return os.path.join(op_dir, "build", OP_NAME + ".so")


def load_op(op_dir):
    """Imports the built op, which registers torch.ops.deepspeed.*."""
    spec = importlib.util.spec_from_file_location(OP_NAME, op_path(op_dir))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("op", choices=("all_reduce",))
    p.add_argument("-n", "--nranks", type=at_least(2), required=True)
    p.add_argument("--op-dir", required=True, help="where `build` put the op")
    torch_bench.add_sweep_options(p)
    args = p.parse_args(argv)
    if args.minbytes > args.maxbytes:
        p.error("-b is larger than -e")
    # What torch_bench.Rank reads besides the sweep.
    args.backend, args.async_op = "deepspeed", False
    return args


class DeepSpeedRank(torch_bench.Rank):
    def issue(self, inp, out):
        torch.ops.deepspeed.inference_all_reduce_(inp)


def segment_prefix(tag):
    # shm.cpp names rank r's segment
    # deepspeed_allreduce_buffer_<uid>_<MASTER_ADDR>_<MASTER_PORT>_<r>.
    return f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_127.0.0.1_{tag}_"


def child(args, rank, store_dir, parent):
    if not torch_bench.tied_to(parent):
        return EXIT_RUNTIME
    n = args.nranks
    # MASTER_ADDR and MASTER_PORT only name the op's segments here; the
    # parent's pid keeps them apart from any other run's.
    os.environ.update(LOCAL_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(parent),
                      GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // n))
    op = load_op(args.op_dir)
    if op.vector_kernel_level() < 1:
        raise RuntimeError("vector_kernel_level() < 1: DeepSpeed would not call this op "
                           "for float32 on this CPU")
    store = dist.FileStore(os.path.join(store_dir, "store"), n)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=n,
                            timeout=datetime.timedelta(milliseconds=args.timeout_ms))
    op.initialize(n, rank)
    # initialize() creates this rank's segment and maps the others'; only
    # after every rank has done so are all segments complete.
    dist.barrier()
    rc = DeepSpeedRank(args, rank).run()
    dist.barrier()  # every peer is done with this rank's segment
    os.unlink(segment_prefix(parent) + str(rank))
    dist.destroy_process_group()
    return rc


def main(argv):
    if argv[:1] == ["build"]:
        return build(argv[1:])
    args = parse_args(argv)
    if not os.path.isfile(op_path(args.op_dir)):
        fail(f"{op_path(args.op_dir)} not found: run bench/peers/install_peers.sh deepspeed")
    store_dir = tempfile.mkdtemp(prefix="deepspeed_bench.")
    parent = os.getpid()
    try:
        return torch_bench.fork_ranks(args, "deepspeed_bench",
                                      lambda rank: child(args, rank, store_dir, parent))
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
        for path in glob.glob(segment_prefix(parent) + "*"):  # ranks that did not finish
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
