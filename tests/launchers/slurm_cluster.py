"""A one-node Slurm cluster on this machine, for the duration of a test run.

Debian's munged, slurmctld and slurmd run in the foreground as children of
the test process: munged as the munge user on a socket of its own in
/run/munge, the two Slurm daemons as root with a slurm.conf written into a
temporary directory (state, spool, logs and pid files beside it, ports
picked free). The node declares 8 CPUs whatever the machine has
(SlurmdParameters=config_overrides), so `srun -n 4` fits on a 2-core
machine. Everything is stopped by pid and removed at the end; nothing is
registered with systemd, and a munged or Slurm already running on the
machine is left alone.
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from ports import free_port

DAEMONS = ["munged", "slurmctld", "slurmd"]
CLIENTS = ["srun", "sbatch", "sinfo", "squeue", "scontrol"]
# How long the cluster may take to come up (munged, then slurmctld, then the
# node registering as idle); a few seconds on a quiet machine.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


def missing_programs():
    """The daemons and clients this fixture needs that are not installed."""
    found = []
    for name in DAEMONS + CLIENTS:
        if shutil.which(name) is None and not os.path.exists("/usr/sbin/" + name):
            found.append(name)
    return found


def _program(name):
    return shutil.which(name) or "/usr/sbin/" + name


class SlurmCluster:
    """Started by start(), stopped by stop(); env() is what a client needs."""

    def __init__(self, workdir):
        self.dir = Path(workdir)
        self.hostname = socket.gethostname()
        tag = f"meshcomm-test-{os.getpid()}"
        # munged insists on directories only the munge user (or root) can
        # write; /run/munge and /var/lib/munge are those, and the names are
        # this run's own.
        self.munge_socket = f"/run/munge/{tag}.socket"
        self.munge_files = [self.munge_socket, self.munge_socket + ".lock",
                            f"/run/munge/{tag}.pid", f"/var/lib/munge/{tag}.seed",
                            f"/var/log/munge/{tag}.log"]
        self.conf = self.dir / "slurm.conf"
        # meshcomm derives MASTER_PORT from the job id under srun: clusters
        # of runs side by side must not hand out the same ids.
        self.first_job_id = random.randrange(1000, 1000000)
        self.procs = {}

    def env(self):
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        return env

    def _write_conf(self):
        for sub in ("state", "spool", "log"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        d = self.dir
        self.conf.write_text(f"""\
ClusterName=meshcommtest
FirstJobId={self.first_job_id}
SlurmctldHost={self.hostname}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
SwitchType=switch/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SchedulerType=sched/builtin
InactiveLimit=0
KillWait=2
MinJobAge=30
NodeName={self.hostname} NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=meshcomm Nodes={self.hostname} Default=YES MaxTime=INFINITE State=UP
""")

    def _start_munged(self):
        run_dir = Path("/run/munge")
        if not run_dir.is_dir():
            run_dir.mkdir(mode=0o755)
            shutil.chown(run_dir, "munge", "munge")
        tag = Path(self.munge_socket).stem
        self.procs["munged"] = subprocess.Popen(
            [_program("munged"), "--foreground", f"--socket={self.munge_socket}",
             f"--pid-file=/run/munge/{tag}.pid", f"--seed-file=/var/lib/munge/{tag}.seed",
             f"--log-file=/var/log/munge/{tag}.log"],
            user="munge", group="munge", stdin=subprocess.DEVNULL,
            stdout=open(self.dir / "log" / "munged.out", "wb"), stderr=subprocess.STDOUT)
        self._wait_until(lambda: os.path.exists(self.munge_socket), "munged's socket")

    def _start_slurm(self, name, *args):
        self.procs[name] = subprocess.Popen(
            [_program(name), "-D", "-f", str(self.conf), *args], env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=open(self.dir / "log" / f"{name}.out", "wb"), stderr=subprocess.STDOUT)

    def _node_state(self):
        r = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env(),
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip() if r.returncode == 0 else ""

    def _wait_until(self, ready, what):
        end = time.monotonic() + START_TIMEOUT_S
        while not ready():
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode} while waiting "
                                       f"for {what}:\n{self.logs()}")
            if time.monotonic() > end:
                raise RuntimeError(f"{what} not ready after {START_TIMEOUT_S} s:\n{self.logs()}")
            time.sleep(0.1)

    def start(self):
        self._write_conf()
        self._start_munged()
        self._start_slurm("slurmctld")
        self._start_slurm("slurmd", "-N", self.hostname)
        self._wait_until(lambda: self._node_state() == "idle", "the node to be idle")

    def logs(self):
        text = []
        for path in sorted((self.dir / "log").glob("*")):
            lines = path.read_text(errors="replace").splitlines()[-15:]
            text.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(text)

    def stop(self):
        # slurmd first (it ends the job steps it runs), munged last (the
        # others need it to say goodbye).
        for name in ["slurmd", "slurmctld", "munged"]:
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for path in self.munge_files:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def started_cluster(tmp_path_factory):
    """The body of the `slurm` fixture of the launcher and packaging tests:
    one cluster per test session, skipped where Slurm or root is missing."""
    import pytest

    missing = missing_programs()
    if missing:
        pytest.skip("Slurm is not installed (missing: " + ", ".join(missing) +
                    "); make deps installs it")
    if os.geteuid() != 0:
        pytest.skip("the Slurm fixture runs slurmd and munged, which needs root")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
