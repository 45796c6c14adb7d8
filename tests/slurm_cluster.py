"""A real one-node Slurm cluster in a temporary folder, for the tests of ``--executor slurm``.

:class:`SlurmCluster` writes a munge key and a ``slurm.conf`` into a folder, starts ``munged``,
``slurmctld`` and ``slurmd`` in the foreground as child processes (nothing is installed as a service,
nothing under ``/etc`` or ``/run`` is used), waits until ``sinfo`` shows the node idle, and stops
exactly those three processes, by their process ids, in :meth:`SlurmCluster.stop`. Clients reach it
through ``SLURM_CONF`` (``cluster.env``): the configuration names its own munge socket and ports.

The cluster: one node (``rote-node``, 2 CPUs, this machine's memory) in one partition (``debug``),
CPUs as the only consumable resource (two 1-CPU jobs run at once), no accounting storage (so ``sacct``
fails, as on a cluster without slurmdbd), process tracking by process tree (no cgroups needed).

It needs root (slurmd runs jobs as their users) and Debian's ``slurm-wlm`` and ``munge`` packages;
:func:`unavailable_reason` says what is missing. To try the cluster path by hand::

    sudo .venv/bin/python tests/slurm_cluster.py /tmp/rote-slurm    # prints the export line, Ctrl-C stops it
    export SLURM_CONF=/tmp/rote-slurm/slurm.conf
    .venv/bin/python -m rote train --task fda --profile smoke --seeds 2 --executor slurm --partition debug
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "sinfo", "squeue", "scancel", "scontrol")
PARTITION = "debug"
NODE = "rote-node"


def _which(name: str) -> str | None:
    return shutil.which(name) or next((str(Path(d, name)) for d in ("/usr/sbin", "/sbin")
                                       if Path(d, name).exists()), None)


def unavailable_reason() -> str | None:
    """Why a Slurm cluster cannot be started here (None when it can)."""
    if not sys.platform.startswith("linux"):
        return "Slurm runs on Linux only"
    if os.geteuid() != 0:
        return "starting slurmd needs root"
    missing = [name for name in DAEMONS + CLIENTS if _which(name) is None]
    if missing:
        return f"{', '.join(missing)} not found (Debian: apt-get install slurm-wlm munge; .ci/run installs them)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memory_mb() -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024 * 9 // 10
    return 4096


def slurm_conf(folder: Path, *, cpus: int = 2, ctld_port: int = 6817, slurmd_port: int = 6818) -> str:
    """The configuration of the one-node cluster whose files all lie in ``folder``."""
    host = socket.gethostname().split(".")[0]
    return "\n".join([
        "ClusterName=rote-test",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={folder / 'munge' / 'munge.socket'}",
        f"StateSaveLocation={folder / 'ctld'}",
        f"SlurmdSpoolDir={folder / 'slurmd'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}",
        f"PlugStackConfig={folder / 'plugstack.conf'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SlurmdParameters=config_overrides",  # the node is what this file says, whatever the machine has
        "ReturnToService=2",
        "KillWait=5",
        "MailProg=/bin/true",
        f"NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={_memory_mb()} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def _die_with_parent() -> None:
    """In a daemon, before exec: SIGTERM when the process that started it dies, even by SIGKILL."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class SlurmCluster:
    """Start with :meth:`start`, stop with :meth:`stop` (also usable as a context manager)."""

    def __init__(self, folder: Path, cpus: int = 2):
        self.folder = Path(folder).resolve()
        self.cpus = cpus
        self.conf = self.folder / "slurm.conf"
        self.partition, self.node = PARTITION, NODE
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    # -- life cycle ----------------------------------------------------------------------------------
    def start(self, timeout: float = 60) -> "SlurmCluster":
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        try:
            self._write_files()
            self._spawn("munged", [_which("munged"), "--foreground", "--force",
                                   f"--key-file={self.folder / 'munge' / 'munge.key'}",
                                   f"--socket={self.folder / 'munge' / 'munge.socket'}",
                                   f"--pid-file={self.folder / 'munge' / 'munged.pid'}",
                                   f"--seed-file={self.folder / 'munge' / 'munged.seed'}",
                                   f"--log-file={self.folder / 'munge' / 'munged.log'}"])
            self._wait(lambda: (self.folder / "munge" / "munge.socket").exists(), timeout, "munged's socket")
            self._spawn("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)])
            self._wait(lambda: self.run("scontrol", "ping").returncode == 0 and
                       "UP" in self.run("scontrol", "ping").stdout, timeout, "slurmctld to answer")
            self._spawn("slurmd", [_which("slurmd"), "-D", "-N", self.node, "-f", str(self.conf)])
            self._wait(self.idle, timeout, f"node {self.node} to be idle in sinfo")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Cancel any job left, then stop the daemons this object started (by pid; nothing else)."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            jobs = self.run("squeue", "-h", "-o", "%i").stdout.split()
            if jobs:
                self.run("scancel", *jobs)
                with contextlib.suppress(TimeoutError):
                    self._wait(lambda: not self.run("squeue", "-h", "-o", "%i").stdout.split(), 30, "jobs to end")
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def __enter__(self) -> "SlurmCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- queries -------------------------------------------------------------------------------------
    def run(self, *cmd: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """A Slurm client command against this cluster (never raises for a non-zero exit)."""
        try:
            return subprocess.run(list(cmd), env=self.env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as err:
            return subprocess.CompletedProcess(list(cmd), 124, "", f"timed out: {err}")

    def idle(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-n", self.node, "-o", "%T").stdout.split()
        return out == ["idle"]

    def jobs(self) -> dict[str, str]:
        """Job id -> state of every job slurmctld still holds (finished ones too, for MinJobAge)."""
        out = self.run("squeue", "-h", "--states=all", "-o", "%i|%T").stdout
        return dict(line.split("|", 1) for line in out.split() if "|" in line)

    def logs(self) -> str:
        """The daemons' logs (for a failure message)."""
        parts = []
        for path in (self.folder / "munge" / "munged.log", self.folder / "slurmctld.log", self.folder / "slurmd.log"):
            with contextlib.suppress(OSError):
                parts.append(f"== {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-30:]))
        return "\n".join(parts)

    # -- helpers -------------------------------------------------------------------------------------
    def _write_files(self) -> None:
        munge = self.folder / "munge"
        for d in (self.folder, munge, self.folder / "ctld", self.folder / "slurmd"):
            d.mkdir(parents=True, exist_ok=True)
            d.chmod(0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (self.folder / "plugstack.conf").write_text("")
        ctld_port = _free_port()
        slurmd_port = next(port for port in iter(_free_port, None) if port != ctld_port)
        self.conf.write_text(slurm_conf(self.folder, cpus=self.cpus, ctld_port=ctld_port, slurmd_port=slurmd_port))

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = open(self.folder / f"{name}.out", "ab")
        with log:
            self.procs[name] = subprocess.Popen(cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True,
                                                preexec_fn=_die_with_parent)

    def _wait(self, predicate, timeout: float, what: str) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited while waiting for {what}\n{self.logs()}")
            if predicate():
                return
            time.sleep(0.2)
        raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}\n{self.logs()}")


def skip_or_fail(reason: str) -> None:
    """Skip with the reason, or fail where the Slurm tests are required (CI: ROTE_REQUIRE_SLURM=1)."""
    if os.environ.get("ROTE_REQUIRE_SLURM") == "1":
        pytest.fail(f"Slurm tests required (ROTE_REQUIRE_SLURM=1) but {reason}", pytrace=False)
    pytest.skip(f"Slurm tests skipped: {reason}")


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A running one-node cluster for the whole session; its daemons are stopped at the end, also when
    a test fails or the session is interrupted (and, should pytest die outright, by PR_SET_PDEATHSIG)."""
    reason = unavailable_reason()
    if reason:
        skip_or_fail(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except Exception as err:  # start() has stopped whatever it had started
        skip_or_fail(f"the cluster did not start: {err}")
    try:
        yield cluster
    finally:
        cluster.stop()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/slurm_cluster.py FOLDER   (as root; Ctrl-C stops the cluster)", file=sys.stderr)
        return 2
    reason = unavailable_reason()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 2
    cluster = SlurmCluster(Path(argv[0]))
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        cluster.start()
        print(f"export SLURM_CONF={cluster.conf}   # partition {cluster.partition}; Ctrl-C stops the cluster",
              flush=True)
        while all(p.poll() is None for p in cluster.procs.values()):
            time.sleep(1)
        print("a daemon exited; stopping", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
