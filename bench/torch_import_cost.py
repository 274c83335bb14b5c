"""What installing meshcomm's wheel costs `import torch`.

    python3 bench/torch_import_cost.py VENV WHEEL [--rounds 6] [--imports 5]

VENV is a virtual environment with torch; WHEEL is meshcomm's wheel. Each
round installs the wheel, times `python -c "import torch"` IMPORTS times,
uninstalls it and times the same again (the median of each), so both sides
share the machine's minute. Then, with the wheel installed, the hook's own
time: import and call _meshcomm_autoload.register() after `import torch`
with torch's autoloading off. The wheel is left installed.
"""

import argparse
import os
import statistics
import subprocess
import time

HOOK = """
import os, sys, time
import torch
t = time.perf_counter()
import _meshcomm_autoload
_meshcomm_autoload.register()
print((time.perf_counter() - t) * 1e3, "meshcomm" in sys.modules)
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("venv")
    ap.add_argument("wheel")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--imports", type=int, default=5)
    args = ap.parse_args()
    python = os.path.join(args.venv, "bin", "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    def pip(*a):
        subprocess.run([python, "-m", "pip", "-q", *a], env=env, check=True,
                       stderr=subprocess.DEVNULL)

    def import_ms():
        times = []
        for _ in range(args.imports):
            t = time.perf_counter()
            subprocess.run([python, "-c", "import torch"], env=env, check=True)
            times.append((time.perf_counter() - t) * 1e3)
        return statistics.median(times)

    ratios = []
    print(f"{'round':>5} {'with (ms)':>10} {'without (ms)':>13} {'ratio':>6}")
    for r in range(args.rounds):
        pip("install", "--no-deps", "--force-reinstall", args.wheel)
        with_ms = import_ms()
        pip("uninstall", "-y", "meshcomm")
        without_ms = import_ms()
        ratios.append(with_ms / without_ms)
        print(f"{r + 1:>5} {with_ms:>10.0f} {without_ms:>13.0f} {ratios[-1]:>6.3f}")
    print(f"median of the per-round ratios: {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
    pip("install", "--no-deps", "--force-reinstall", args.wheel)
    hook = []
    for _ in range(args.imports):
        out = subprocess.run([python, "-c", HOOK], env=dict(env, TORCH_DEVICE_BACKEND_AUTOLOAD="0"),
                             check=True, capture_output=True, text=True).stdout.split()
        assert out[1] == "False", "the hook imported meshcomm"
        hook.append(float(out[0]))
    print(f"the hook alone: median {statistics.median(hook):.2f} ms "
          f"(min {min(hook):.2f}, max {max(hook):.2f}); meshcomm not imported")


if __name__ == "__main__":
    main()
