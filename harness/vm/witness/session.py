"""The witness's shell: QEMU's gdbstub opened at run time, gdb attached by its own PID.

::

    with Witness(vm.qmp, offsets, workdir, timeouts, depth=8, nmi_on=True) as witness:
        witness.arm(handler_address)      # returns once the breakpoint is in
        ...                               # START, the workload, STOP
        log = witness.disarm()            # gdb detached; the guest runs on

Arming opens the gdbstub (QMP's HMP ``gdbserver``), writes `gdbside`'s configuration and
starts ``gdb-multiarch -batch``; it returns when gdbside says its breakpoint is
inserted. Disarming sends gdb SIGINT (to its PID), so gdbside deletes the breakpoint
and detaches; a gdb that does not finish in time is killed. Leaving the block disarms
and closes the gdbstub, on success, failure and Ctrl-C alike. gdb's output and the
overflows it saw stay in ``workdir``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Protocol

from harness.errors import HarnessTimeout, HostSetupError, InfraError
from harness.process import die_with_parent
from harness.timeouts import Timeouts
from harness.vm.witness.offsets import KernelOffsets
from harness.vm.witness.records import WitnessLog, parse_log

LOG = logging.getLogger(__name__)
GDB = "gdb-multiarch"
GDBSIDE = Path(__file__).with_name("gdbside.py")
_POLL_S = 0.05


class HumanMonitor(Protocol):
    """What the witness needs of QMP (`harness.vm.qmp.QmpSession`): HMP commands."""

    def hmp(self, command_line: str) -> str:
        """Run a human-monitor command; its text."""


def free_tcp_port() -> int:
    """A TCP port on 127.0.0.1 free right now (syzkaller's UnusedTCPPort; a small race)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _gdb_child_setup() -> None:
    """``preexec_fn``: gdb takes SIGINT as an interrupt even where our caller ignores it."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    die_with_parent()


class Witness:
    """One guest's witness: armed on one handler address at a time."""

    def __init__(self, qmp: HumanMonitor, offsets: KernelOffsets, workdir: Path,
                 timeouts: Timeouts, *, depth: int, nmi_on: bool,
                 gdb: str = GDB) -> None:  # fmt: skip
        self._qmp, self._offsets, self._workdir, self._gdb_binary = qmp, offsets, workdir, gdb
        self._timeouts, self._depth, self._nmi_on = timeouts, depth, nmi_on
        self._port: int | None = None
        self._gdb: subprocess.Popen[bytes] | None = None
        self._arms = 0
        self.armed_s = 0.0  # seconds the guest ran with the breakpoint in, over every arm

    @property
    def gdb_pid(self) -> int | None:
        """The armed gdb's PID (None: not armed): the one process the session stops."""
        return self._gdb.pid if self._gdb is not None else None

    def __enter__(self) -> Witness:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:  # fmt: skip
        self.close()

    def _paths(self) -> tuple[Path, Path, Path, Path]:
        stem = self._workdir / f"witness-{self._arms:02d}"
        return (stem.with_suffix(".json"), stem.with_suffix(".jsonl"),
                stem.with_suffix(".ready"), stem.with_suffix(".gdb.log"))  # fmt: skip

    def arm(self, address: int) -> None:
        """Break on ``address`` from now on (disarming an earlier arm first).

        :raise HostSetupError: gdb-multiarch is not installed.
        :raise HarnessTimeout: gdb did not insert its breakpoint in time (its log kept).
        """
        if self._gdb is not None:
            self.disarm()
        if self._port is None:
            self._port = free_tcp_port()
            self._qmp.hmp(f"gdbserver tcp:127.0.0.1:{self._port}")
        self._arms += 1
        self._workdir.mkdir(parents=True, exist_ok=True)
        config, out, ready, log = self._paths()
        config.write_text(json.dumps({
            "port": self._port, "address": address, "depth": self._depth,
            "offsets": self._offsets.as_dict(), "out": str(out), "ready": str(ready)}))  # fmt: skip
        env = dict(os.environ, PROFBENCH_WITNESS=str(config))
        argv = [self._gdb_binary, "-nx", "-batch", "-x", str(GDBSIDE)]
        try:
            with log.open("wb") as sink:
                self._gdb = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=sink,
                                             stderr=subprocess.STDOUT,
                                             preexec_fn=_gdb_child_setup)  # noqa: PLW1509  # fmt: skip
        except FileNotFoundError as exc:
            raise HostSetupError(
                [self._gdb_binary], "run `invoke setup` (installs gdb-multiarch)"
            ) from exc
        started = time.monotonic()
        while not ready.exists():
            if self._gdb.poll() is not None:
                raise InfraError(f"gdb exited {self._gdb.returncode} before its breakpoint "
                                 f"was in: {log.read_text(errors='replace')[-400:]}")  # fmt: skip
            if time.monotonic() - started > self._timeouts.qmp_s * 3:
                self._stop_gdb()
                raise HarnessTimeout(f"gdb's breakpoint (log: {log})", time.monotonic() - started)
            time.sleep(_POLL_S)
        self._armed_at = time.monotonic()
        LOG.info("witness armed at %#x (gdb pid %d, port %d)", address, self._gdb.pid, self._port)

    def disarm(self) -> WitnessLog:
        """Detach: what the witness saw since `arm`.

        :raise InfraError: nothing is armed.
        :raise HarnessTimeout: gdb did not detach in time (killed; the log is what it wrote).
        """
        if self._gdb is None:
            raise InfraError("the witness is not armed")
        self.armed_s += time.monotonic() - self._armed_at
        clean = self._stop_gdb()
        _, out, _, log = self._paths()
        text = out.read_text() if out.exists() else ""
        seen = parse_log(text, self._offsets, nmi_on=self._nmi_on)
        if not clean:
            raise HarnessTimeout(f"gdb to detach (log: {log}; saw {len(seen.overflows)})",
                                 self._timeouts.qmp_s * 3)  # fmt: skip
        return seen

    def _stop_gdb(self) -> bool:
        """SIGINT gdb by its PID and wait; SIGKILL it if it stays. Whether it left by itself."""
        gdb, self._gdb = self._gdb, None
        if gdb is None or gdb.poll() is not None:
            return True
        gdb.send_signal(signal.SIGINT)
        try:
            gdb.wait(timeout=self._timeouts.qmp_s * 3)
        except subprocess.TimeoutExpired:
            gdb.kill()
            gdb.wait(timeout=self._timeouts.qmp_s)
            return False
        return True

    def close(self) -> None:
        """Stop gdb if it runs and close the gdbstub; idempotent, never raises."""
        try:
            self._stop_gdb()
        except (OSError, subprocess.TimeoutExpired) as exc:
            LOG.warning("witness: gdb did not stop: %r", exc)
        if self._port is not None:
            self._port = None
            try:
                self._qmp.hmp("gdbserver none")
            except Exception as exc:  # the VM may already be gone
                LOG.info("witness: gdbserver none failed: %r", exc)
