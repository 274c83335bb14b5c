"""meshcomm-bench measures every operation it lists and its --check finds
the right values in every output, on odd and even rank counts, through
shared memory and over TCP."""

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "build" / "bin" / "meshcomm-bench"


def listed_operations():
    """The OPERATION list of --help: the bench's own table, so an operation
    added there is tested here without this file changing."""
    text = subprocess.run([str(BENCH), "--help"], capture_output=True, text=True, timeout=30).stdout
    block = text.split("OPERATION:", 1)[1].split("\n\n", 1)[0]
    block = re.sub(r"\([^)]*\)", "", block)
    return [name.strip() for name in block.replace("\n", " ").split(",") if name.strip()]


def test_the_list_holds_every_family():
    names = listed_operations()
    for expected in ("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
                     "all_gather_uneven", "reduce_scatter_uneven", "all_to_all", "gather",
                     "scatter", "barrier", "sendrecv"):
        assert expected in names, names


@pytest.mark.parametrize("shm", ["1", "0"])
@pytest.mark.parametrize("nranks", [2, 3])
def test_every_operation_checks_out(nranks, shm):
    env = dict(os.environ, MESHCOMM_SHM=shm)
    for op in listed_operations():
        # 8 B to 256 KiB: the inline, slot and multi-round paths on one host.
        result = subprocess.run(
            [str(BENCH), op, "-n", str(nranks), "-b", "8", "-e", "256K", "-f", "32", "--iters", "20",
             "--warmup", "2", "--check", "--timeout-ms", "60000"],
            env=env, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, f"{op}: {result.stdout}{result.stderr}"
        rows = [line for line in result.stdout.splitlines() if line.strip() and not line.startswith("#")]
        assert rows, f"{op}: no rows\n{result.stdout}"
        for row in rows:
            assert row.split()[-1] == "ok", f"{op}: {row}\n{result.stdout}"
