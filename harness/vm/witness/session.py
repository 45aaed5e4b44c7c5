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

An input-free guest (`harness.scenarios.deterministic`) takes no QMP command once it
runs and cannot be told the handler's address: its gdbstub is on QEMU's command line
(``port``), and `watch` has gdbside find the handler itself (`Discovery`); gdb's
``continue`` starts the guest, and `finish` waits for gdb to leave once it powered off::

    with Witness(None, offsets, workdir, timeouts, depth=33, nmi_on=True, port=port) as w:
        w.watch(Discovery(at=create_counter, image=(stext, etext)))
        ...                               # the guest runs and powers off
        log = w.finish()
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class Discovery:
    """Where gdbside finds the overflow handler itself (`gdbside`'s discovery mode).

    ``at``: ``perf_event_create_kernel_counter``'s address (vmlinux); ``image``: the
    kernel's text ``[lo, hi)``, whose handlers (its watchdog's) are not the agent's.
    """

    at: int
    image: tuple[int, int]


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

    def __init__(self, qmp: HumanMonitor | None, offsets: KernelOffsets, workdir: Path,
                 timeouts: Timeouts, *, depth: int, nmi_on: bool, gdb: str = GDB,
                 port: int | None = None) -> None:  # fmt: skip
        """``port``: the gdbstub QEMU opened from its command line (None: open it over ``qmp``)."""
        self._qmp, self._offsets, self._workdir, self._gdb_binary = qmp, offsets, workdir, gdb
        self._timeouts, self._depth, self._nmi_on = timeouts, depth, nmi_on
        self._port, self._own_port = port, port is None
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
            if self._qmp is None:
                raise InfraError("the witness has neither a gdbstub port nor QMP to open one")
            self._port = free_tcp_port()
            self._qmp.hmp(f"gdbserver tcp:127.0.0.1:{self._port}")
        self._start({"address": address})
        LOG.info("witness armed at %#x (gdb pid %s, port %d)", address, self.gdb_pid, self._port)

    def watch(self, discovery: Discovery) -> None:
        """Start gdb on the command line's gdbstub; it breaks on every handler it discovers.

        Returns once the discovery breakpoint is in; gdb's ``continue`` then starts a guest
        that QEMU holds stopped (``-S``).

        :raise HostSetupError: gdb-multiarch is not installed.
        :raise HarnessTimeout: gdb did not insert its breakpoint in time (its log kept).
        :raise InfraError: no gdbstub port was given, or gdb left early.
        """
        if self._port is None or self._gdb is not None:
            raise InfraError("watch needs the gdbstub QEMU opened (port) and no gdb yet")
        self._start({"address": None, "discover": {"at": discovery.at,
                                                   "image": list(discovery.image)}})  # fmt: skip
        LOG.info("witness watching perf_event_create_kernel_counter at %#x (gdb pid %s)",
                 discovery.at, self.gdb_pid)  # fmt: skip

    def _start(self, where: dict[str, object]) -> None:
        """Write gdbside's configuration, start gdb, wait for its breakpoint."""
        self._arms += 1
        self._workdir.mkdir(parents=True, exist_ok=True)
        config, out, ready, log = self._paths()
        config.write_text(json.dumps({
            "port": self._port, **where, "depth": self._depth,
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

    def finish(self, timeout_s: float) -> WitnessLog:
        """What the witness saw, once gdb left by itself (the guest powered off).

        Waits up to ``timeout_s`` for gdb to exit, then stops it as `disarm` does.

        :raise InfraError: nothing is armed.
        :raise HarnessTimeout: gdb had to be killed (the log is what it wrote).
        """
        if self._gdb is not None:
            try:
                self._gdb.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                LOG.warning("witness: gdb %d still runs after the guest left", self._gdb.pid)
        return self.disarm()

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
        if self._port is not None and self._own_port and self._qmp is not None:
            self._port = None
            try:
                self._qmp.hmp("gdbserver none")
            except Exception as exc:  # the VM may already be gone
                LOG.info("witness: gdbserver none failed: %r", exc)
