"""The torch backend's native part for an installed wheel: compiled once per
torch, on the machine that runs it.

The native part (``meshcomm.torch._native``: the backend's hot path and
``meshcomm.torch.all_reduce_``) is compiled against torch's C++ headers, and
must match the exact torch that loads it: torch's C++ ABI changes between
releases, so no single build in a wheel fits every torch. ``make`` builds it
beside the extension; the wheel carries its sources instead
(``_native_src/``), and the first process that needs it compiles it with
the system's C++ compiler (about a minute on two cores) into a cache folder
named after everything the build depends on (meshcomm's version and
sources, torch's version and place, the interpreter). Later processes load
it from there. Processes that start together (the ranks of a job) take
turns on a lock: one compiles, the others load its result.

Without a compiler or Python's headers the build fails once, says why, and
the backend runs its Python path (the same behaviour, more time per call);
the failure is remembered for that key, so later processes do not retry
(``python -m meshcomm.torch.build_native`` retries and shows the
compiler's output).

Environment:
  MESHCOMM_TORCH_NATIVE=0   neither build nor load it (the Python path)
  MESHCOMM_CACHE_DIR        the cache folder (default $XDG_CACHE_HOME/meshcomm,
                            else ~/.cache/meshcomm)
  CXX                       the compiler (default c++)

    python -m meshcomm.torch.build_native    # build now (an image's build step, say)
"""

import fcntl
import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import torch

MODULE = "meshcomm.torch._native"
SOURCES = ["python/src/torch/native.cc", "python/src/torch/blocking.cc",
           "python/src/torch/operators.cc", "python/src/error_names.cc"]
LOCK_WAIT_S = 900  # another process's build, at most
_PACKAGE = Path(__file__).resolve().parent.parent  # meshcomm/


def sources_dir():
    """The native part's sources in an installed wheel, or None (a make
    build, which compiles the part beside the extension)."""
    path = Path(__file__).resolve().parent / "_native_src"
    return path if (path / SOURCES[0]).is_file() else None


def _library():
    """meshcomm's shared library in the installed package."""
    found = sorted(_PACKAGE.glob("libmeshcomm.so*"))
    if not found:
        raise RuntimeError(f"no libmeshcomm.so in {_PACKAGE}")
    return found[0]


def cache_dir():
    root = os.environ.get("MESHCOMM_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "meshcomm")
    return Path(root)


def build_key(src):
    """A name for this build: it changes with anything that would change the
    compiled module."""
    from .. import __version__
    h = hashlib.sha256()
    for part in (__version__, torch.__version__, os.path.dirname(torch.__file__), str(_PACKAGE),
                 sys.implementation.cache_tag, sysconfig.get_config_var("EXT_SUFFIX") or ""):
        h.update(part.encode() + b"\0")
    for f in sorted(p for p in src.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(src)).encode() + b"\0" + f.read_bytes())
    return f"torch-{torch.__version__.replace('+', '_')}-{h.hexdigest()[:16]}"


def _commands(src, out_dir, target):
    torch_dir = Path(torch.__file__).resolve().parent
    cxx = shlex.split(os.environ.get("CXX", "c++"))
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    flags = ["-std=c++20", "-O2", "-DNDEBUG", "-fPIC", "-fvisibility=hidden",
             f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
             "-isystem", str(torch_dir / "include"),
             "-isystem", str(torch_dir / "include/torch/csrc/api/include"),
             "-isystem", sysconfig.get_paths()["include"],
             "-I", str(src / "include")]
    objects, compiles = [], []
    for s in SOURCES:
        obj = out_dir / (Path(s).stem + ".o")
        objects.append(str(obj))
        compiles.append(cxx + flags + ["-c", str(src / s), "-o", str(obj)])
    lib = _library()
    link = cxx + ["-shared", "-o", str(target)] + objects + [
        str(lib), "-L", str(torch_dir / "lib"), "-ltorch_python", "-ltorch_cpu", "-lc10",
        f"-Wl,-rpath,{torch_dir / 'lib'}", f"-Wl,-rpath,{lib.parent}"]
    return compiles, link


def build(src, target, log):
    """Compiles the part into `target` (written whole or not at all). Two
    compilers at a time. Raises RuntimeError with the compiler's output."""
    with tempfile.TemporaryDirectory(prefix="meshcomm-native-", dir=target.parent) as work:
        work = Path(work)
        partial = work / target.name
        compiles, link = _commands(src, work, partial)
        running, pending = [], list(compiles)
        while pending or running:
            while pending and len(running) < 2:
                cmd = pending.pop(0)
                running.append((cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                      stderr=subprocess.STDOUT, text=True)))
            cmd, proc = running.pop(0)
            output, _ = proc.communicate()
            log.write(f"$ {shlex.join(cmd)}\n{output}")
            if proc.returncode != 0:
                for _, other in running:
                    other.kill()
                    other.wait()
                raise RuntimeError(f"compiling failed:\n{output[-3000:]}")
        done = subprocess.run(link, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log.write(f"$ {shlex.join(link)}\n{done.stdout}")
        if done.returncode != 0:
            raise RuntimeError(f"linking failed:\n{done.stdout[-3000:]}")
        os.replace(partial, target)


def _import(path):
    loader = importlib.machinery.ExtensionFileLoader(MODULE, str(path))
    spec = importlib.util.spec_from_file_location(MODULE, str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[MODULE] = module
    return module


class _Lock:
    """An exclusive lock on a file, waited for at most LOCK_WAIT_S."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(self.fd)
                    raise TimeoutError(f"{self.path} stayed locked for {LOCK_WAIT_S} s "
                                       f"(another process building?)") from None
                time.sleep(0.2)

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def load(force=False, quiet=False):
    """The native part from the cache, built first if it is not there.
    Returns the module, or None with the reason on stderr (once per key:
    a failed build is not retried unless `force`)."""
    if MODULE in sys.modules:  # loaded already (an extension loads once)
        return sys.modules[MODULE]
    src = sources_dir()
    if src is None:
        return None
    key = build_key(src)
    folder = cache_dir() / "torch-native" / key
    target = folder / f"_native{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    failed = folder / "FAILED"
    if target.is_file():
        return _import(target)
    if failed.is_file() and not force:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    with _Lock(folder / "lock"):
        if target.is_file():  # another process built it meanwhile
            return _import(target)
        if not quiet:
            print(f"meshcomm: compiling the torch backend's native part for torch "
                  f"{torch.__version__} (once per torch; about a minute) into {folder}",
                  file=sys.stderr, flush=True)
        with open(folder / "build.log", "w") as log:
            try:
                build(src, target, log)
            except (OSError, RuntimeError) as e:
                failed.write_text(str(e))
                print(f"meshcomm: the torch backend's native part could not be compiled, so "
                      f"the backend runs its Python path (slower per call). Log: "
                      f"{folder / 'build.log'}; to retry: python -m meshcomm.torch.build_native "
                      f"(needs a C++20 compiler and Python's headers: apt-get install g++ "
                      f"python3-dev). {str(e).splitlines()[0]}", file=sys.stderr, flush=True)
                return None
        failed.unlink(missing_ok=True)
    return _import(target)


def main():
    if sources_dir() is None:
        print("meshcomm: this meshcomm has no native part's sources (a make build compiles the "
              "part itself: -DMESHCOMM_TORCH_PYTHON)", file=sys.stderr)
        return 1
    module = load(force=True)
    if module is None:
        return 1
    print(f"meshcomm: the torch backend's native part for torch {torch.__version__}: "
          f"{module.__file__}")
    return 0
