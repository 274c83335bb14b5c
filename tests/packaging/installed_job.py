"""The job the installed wheel runs under each launcher: it imports torch,
joins from the launcher's variables alone, all_reduces, writes its flight recorder, and
reports to <out>/rank_<R>.json which meshcomm it imported (the test checks
that it is the venv's, not a build tree's).

Usage: installed_job.py OUT
"""

import json
import os
import sys

import numpy as np
# torch first, as scripts that use torch tensors with meshcomm's API do: the
# wheel's hook runs at `import torch`, and under meshrun it moves
# MASTER_PORT for torch's own rendezvous; meshcomm must still find
# meshrun's store.
import torch  # noqa: F401

import meshcomm


def main():
    out = sys.argv[1]
    meshcomm.init_process_group()
    rank, size = meshcomm.get_rank(), meshcomm.get_world_size()
    x = np.full(1024, rank + 1.0, dtype=np.float32)
    meshcomm.all_reduce(x)
    dumps = os.path.join(out, "dumps")
    os.makedirs(dumps, exist_ok=True)
    meshcomm.dump_flight_recorder(dumps)
    report = {
        "rank": rank,
        "size": size,
        "sum_ok": bool((x == size * (size + 1) / 2).all()),
        "meshcomm_file": meshcomm.__file__,
        "version": meshcomm.__version__,
        "pythonpath": os.environ.get("PYTHONPATH"),
    }
    with open(os.path.join(out, f"rank_{rank}.json"), "w") as f:
        json.dump(report, f)
    meshcomm.destroy_process_group()


if __name__ == "__main__":
    main()
