"""Lifecycle of one QEMU process: launch, find SSH, wait for boot, always stop.

Typical use::

    with GuestVM(spec, files, workdir, name="gw0-2s2cl1c2t", timeouts=t) as vm:
        port = vm.ssh_port()
        vm.wait_for_boot(probe=lambda: shell.try_connect(port))
        ...
    # QEMU is gone here, by its own PID; console.log, qemu.log, qmp.jsonl and
    # argv.txt stay in workdir.

Stopping is polite first (QMP ``quit``), then SIGKILL of our own child, each
bounded; it runs on success, exceptions, Ctrl-C and (through the CLI's signal
handler) SIGTERM. The child also carries ``PR_SET_PDEATHSIG``, so a harness
killed with SIGKILL takes its QEMU with it.
"""

from __future__ import annotations

import logging
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from types import TracebackType

from harness.builder.images import BootFiles
from harness.errors import (
    ConfigError,
    HarnessError,
    HarnessTimeout,
    HostSetupError,
    InfraError,
    VmLaunchError,
)
from harness.process import die_with_parent
from harness.timeouts import Timeouts, wait_until
from harness.vm.argv import MachineSpec, build_argv, parse_usernet_ssh_port, with_incoming
from harness.vm.console import classify_boot, crash_error, scan_console
from harness.vm.qmp import QmpSession

LOG = logging.getLogger(__name__)


class VmState(Enum):
    """Where a `GuestVM` is in its life."""

    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


class GuestVM:
    """One QEMU child process and its QMP session."""

    def __init__(
        self,
        spec: MachineSpec,
        files: BootFiles,
        workdir: Path,
        *,
        name: str,
        timeouts: Timeouts,
        qemu_binary: str | None = None,
        incoming: bool = False,
    ) -> None:
        self.spec = spec
        #: Started with ``-incoming defer``: waits for a saved state instead of booting.
        self.incoming = incoming
        self.files = files
        self.name = name
        self.workdir = workdir
        self.console_log = workdir / "console.log"
        self.qemu_log = workdir / "qemu.log"
        self.argv: tuple[str, ...] = ()
        self.state = VmState.NEW
        self._timeouts = timeouts
        self._qemu_binary = qemu_binary or spec.arch.qemu_binary
        self._log = LOG.getChild(name)
        self._proc: subprocess.Popen[bytes] | None = None
        self._qmp = QmpSession(name, transcript=workdir / "qmp.jsonl", timeout_s=timeouts.qmp_s)

    # --- context manager ----------------------------------------------------------------

    def __enter__(self) -> GuestVM:
        self.launch()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    @property
    def pid(self) -> int | None:
        """QEMU's PID while it was started by us, else None."""
        return None if self._proc is None else self._proc.pid

    @property
    def qmp(self) -> QmpSession:
        """The QMP session (valid while running)."""
        return self._qmp

    # --- launch --------------------------------------------------------------------------

    def launch(self) -> None:
        """Start QEMU and complete the QMP handshake; blocks ≤ the QMP budget.

        :raise HostSetupError: the QEMU binary is not installed.
        :raise ConfigError: the kernel or initramfs file is missing.
        :raise VmLaunchError: QEMU exited or never spoke QMP (with its output).
        """
        if self.state is not VmState.NEW:
            raise RuntimeError(f"{self.name}: launch() called in state {self.state}")
        self._preflight_files()
        self.workdir.mkdir(parents=True, exist_ok=True)
        ours, theirs = socket.socketpair()
        self.argv = build_argv(
            self.spec,
            self.files,
            qmp_fd=theirs.fileno(),
            console_log=self.console_log,
            qemu_binary=self._qemu_binary,
        )
        if self.incoming:
            self.argv = with_incoming(self.argv)
        (self.workdir / "argv.txt").write_text(shlex.join(self.argv) + "\n")
        self._log.debug("launching: %s", shlex.join(self.argv))
        try:
            with theirs, self.qemu_log.open("wb") as qemu_log:
                self._proc = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=qemu_log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(theirs.fileno(),),
                    preexec_fn=die_with_parent,  # noqa: PLW1509 - launched from one thread
                )
            self.state = VmState.RUNNING
            self._qmp.connect(ours)  # the session owns `ours` from here on
        except BaseException as exc:
            exitcode = self._exit_status_within(2.0)  # QMP may see EOF before QEMU is reaped
            ours.close()
            self.shutdown()
            if isinstance(exc, OSError | InfraError):
                raise VmLaunchError(
                    f"QEMU failed to start: {exc}", self.argv, exitcode, self._qemu_output()
                ) from exc
            raise  # KeyboardInterrupt and friends pass through unwrapped
        self._log.info("QEMU pid %d started (%s)", self._proc.pid, self.spec.name)

    def _preflight_files(self) -> None:
        if shutil.which(self._qemu_binary) is None:
            raise HostSetupError(
                [self._qemu_binary],
                f"run `invoke setup` (installs {self.spec.arch.qemu_package})",
            )
        for label, path in (("kernel", self.files.kernel), ("initramfs", self.files.initrd)):
            if not path.is_file():
                raise ConfigError(
                    f"{label} image {path} does not exist; build it with `invoke kernel` "
                    "and `invoke rootfs` (or `invoke images`)"
                )

    # --- while running ------------------------------------------------------------------

    def ssh_port(self) -> int:
        """The host port QEMU bound for the guest's SSH (no guessing, no races).

        :raise InfraError: QEMU reports no such forward.
        """
        port = parse_usernet_ssh_port(self._qmp.hmp("info usernet"))
        if port is None:
            raise InfraError(f"{self.name}: QEMU reports no host forward to guest port 22")
        return port

    def wait_for_boot(self, probe: Callable[[], object | None]) -> float:
        """Poll ``probe`` (an SSH login) until it answers; return the seconds waited.

        :raise GuestCrash: the console shows a panic, Oops, BUG... during boot.
        :raise BootHang: the kernel printed, then went silent.
        :raise VmLaunchError: QEMU exited before any console output.
        :raise HarnessTimeout: no console output at all within the boot budget.
        """
        started = time.monotonic()
        watch = _SilenceWatch(self._timeouts.silence_s)
        try:
            wait_until(
                probe,
                timeout_s=self._timeouts.boot_s,
                what=f"{self.name} to accept SSH",
                abort=lambda: self._boot_failure(watch, started),
            )
        except HarnessTimeout as exc:
            raise self._classify(time.monotonic() - started) from exc
        return time.monotonic() - started

    def _boot_failure(self, watch: _SilenceWatch, started: float) -> HarnessError | None:
        if self.exitcode() is not None:
            return self._classify(time.monotonic() - started)
        text = self.console_text()
        if findings := scan_console(text):
            return crash_error(findings, what=f"{self.name} crashed during boot",
                               console_log=self.console_log)  # fmt: skip
        if watch.silent_too_long(text):
            return self._classify(time.monotonic() - started)
        return None

    def _classify(self, waited_s: float) -> HarnessError:
        return classify_boot(
            self.console_text(),
            qemu_exitcode=self.exitcode(),
            waited_s=waited_s,
            qemu_output=self._qemu_output(),
            argv=self.argv,
            console_log=self.console_log,
        )

    def check_console(self, *, since_line: int = 0, what: str = "") -> None:
        """Raise `GuestCrash` if the console shows trouble after ``since_line``."""
        if findings := scan_console(self.console_text(), start_line=since_line):
            raise crash_error(findings, what=what or self.name, console_log=self.console_log)

    def console_text(self) -> str:
        """Everything the guest printed so far."""
        try:
            return self.console_log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def exit_status_within(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for QEMU to exit; its status, or None if it still runs."""
        return self._exit_status_within(timeout_s)

    def _exit_status_within(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for QEMU to exit; its status, or None if it still runs."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def exitcode(self) -> int | None:
        """QEMU's exit status once it has exited, else None."""
        return None if self._proc is None else self._proc.poll()

    def exit_error(self) -> VmLaunchError | None:
        """A `VmLaunchError` with QEMU's output once QEMU has exited, else None (an ``abort``)."""
        if (status := self.exitcode()) is None:
            return None
        return VmLaunchError(f"QEMU exited (status {status})", self.argv, status,
                             self._qemu_output())  # fmt: skip

    def qemu_output(self) -> str:
        """The last 4000 characters QEMU wrote on stdout and stderr."""
        return self._qemu_output()

    def _qemu_output(self) -> str:
        try:
            return self.qemu_log.read_text(errors="replace")[-4000:]
        except FileNotFoundError:
            return ""

    # --- stop ---------------------------------------------------------------------------

    def shutdown(self) -> float:
        """Stop QEMU: QMP ``quit``, then kill our PID. Idempotent, never raises.

        Blocks at most about twice the shutdown budget. Returns seconds spent.
        """
        started = time.monotonic()
        if self._proc is None or self.state is VmState.STOPPED:
            self.state = VmState.STOPPED
            self._qmp.close()
            return 0.0
        try:
            if self._proc.poll() is None:
                try:
                    self._qmp.execute("quit")
                except HarnessError as exc:  # QEMU may close the socket before replying
                    self._log.debug("QMP quit: %s", exc)
                self._proc.wait(timeout=self._timeouts.shutdown_s)
        except subprocess.TimeoutExpired:
            self._log.warning("QEMU pid %d did not quit in %.0fs; killing it", self._proc.pid,
                              self._timeouts.shutdown_s)  # fmt: skip
        finally:
            self._kill()
            self._qmp.close()
            self.state = VmState.STOPPED
        elapsed = time.monotonic() - started
        self._log.info(
            "QEMU pid %d stopped in %.2fs (status %s)",
            self._proc.pid,
            elapsed,
            self._proc.returncode,
        )
        return elapsed

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            try:
                self._proc.wait(timeout=self._timeouts.shutdown_s)
            except subprocess.TimeoutExpired:
                self._log.error(
                    "QEMU pid %d ignored SIGKILL for %.0fs",
                    self._proc.pid,
                    self._timeouts.shutdown_s,
                )


class _SilenceWatch:
    """Tracks when the console last grew, to tell a boot hang from a slow boot."""

    def __init__(self, silence_s: float) -> None:
        self._silence_s = silence_s
        self._last_len = -1
        self._last_change = time.monotonic()

    def silent_too_long(self, text: str) -> bool:
        if len(text) != self._last_len:
            self._last_len = len(text)
            self._last_change = time.monotonic()
            return False
        return bool(text) and time.monotonic() - self._last_change > self._silence_s
