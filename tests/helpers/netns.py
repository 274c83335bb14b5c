"""What the tests that build network namespaces need of the machine."""

import os
import shutil


def why_no_namespaces():
    """Why this process cannot create network namespaces with iproute2, or
    None when it has what it takes (the kernel may still refuse)."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "needs iproute2's ip"
    return None
