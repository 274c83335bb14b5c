"""Waiting for the processes a test started (launchers, job ranks)."""


def collect(procs, timeout):
    """Waits for every process of `procs` (subprocess.Popen with stdout
    piped), each at most `timeout` s, killing what is left on the way out
    (a timeout raises subprocess.TimeoutExpired); returns their exit codes
    and outputs."""
    outputs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            outputs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [p.returncode for p in procs], outputs
