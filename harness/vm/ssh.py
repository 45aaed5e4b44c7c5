"""Commands, files and interactive shells in the guest, over SSH (paramiko).

::

    shell = GuestShell(key_file, timeouts=t)
    shell.try_connect(port)                 # None until sshd answers (for wait_until)
    result = shell.run("nproc", timeout_s=10)
    shell.put(local, "/tmp/x"); shell.get("/tmp/x", local)
    shell.close()

Every call has a deadline. A command that outlives it is a `GuestCommandTimeout`
(the guest may be wedged: that is evidence); a broken connection is a
`TransportError`; a non-zero exit with ``check=True`` is a `GuestCommandError`.

Logins that fail while a guest boots are expected: each is one DEBUG line, and
paramiko's own records of it (an ERROR with a traceback for "Error reading SSH
protocol banner") go to ``probe_log``, not to the log stream (see
`harness.vm.sshlogin.ProbeLog`, which also says how long each login waits).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import sys
import termios
import threading
import time
import tty
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import paramiko

from harness.errors import GuestCommandError, GuestError, TransportError
from harness.timeouts import Timeouts
from harness.vm.sshlogin import LATER_LOGIN_FAILED, PARAMIKO_CHANNEL, ProbeLog, login_waits

LOG = logging.getLogger(__name__)
_T = TypeVar("_T")

#: Opening a channel on a live login, in seconds (times `Timeouts.scale`): the same
#: run saw "Timeout opening channel" at 10 s, twice in a row.
CHANNEL_OPEN_S = 30.0


class GuestCommandTimeout(GuestError):
    """A guest command did not finish within its deadline."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a guest command did."""

    command: str
    exit_status: int
    stdout: str
    stderr: str
    duration_s: float


class GuestShell:
    """An SSH connection to one guest as root, by key."""

    def __init__(
        self,
        key_file: Path,
        *,
        timeouts: Timeouts,
        name: str = "guest",
        probe_log: Path | None = None,
    ) -> None:
        self._key_file = key_file
        self._timeouts = timeouts
        #: One login per thread that runs commands (see `_client`).
        self._links: dict[int, paramiko.SSHClient] = {}
        #: Logins set aside with a command that may still run (see `_retire`).
        self._retired: list[tuple[paramiko.SSHClient, paramiko.Channel]] = []
        self._log = LOG.getChild(name)
        self.probe = ProbeLog(probe_log, name)
        self.port: int | None = None
        #: Called when a command outlives its deadline; what it returns (where the
        #: guest's CPUs are, say) is added to the `GuestCommandTimeout`.
        self.on_timeout: Callable[[], str] | None = None
        #: Times a dead link was replaced (see `_open`); shown in the guest summary.
        self.reconnects = 0
        #: Logins set aside because a command outlived its deadline (see `_retire`).
        self.retired = 0
        self._lock = threading.Lock()

    def __enter__(self) -> GuestShell:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def try_connect(self, port: int) -> GuestShell | None:
        """Log in on ``127.0.0.1:port``; None while sshd does not answer yet."""
        client = paramiko.SSHClient()
        # A fresh guest with a fresh host key on loopback: nothing to verify against.
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        client.set_log_channel(self.probe.open())
        later = self.port is not None  # logged in before: the guest is up
        connect_s, banner_s, auth_s = login_waits(LATER_LOGIN_FAILED if later
                                                  else self.probe.attempts)  # fmt: skip
        try:
            client.connect(
                "127.0.0.1",
                port=port,
                username="root",
                key_filename=str(self._key_file),
                timeout=connect_s,
                banner_timeout=banner_s,
                auth_timeout=auth_s,
                allow_agent=False,
                look_for_keys=False,
            )
        except (paramiko.SSHException, OSError, EOFError) as exc:
            summary = self.probe.failed(port, exc)
            self._log.debug("ssh attempt %d on port %d: not ready (%s)", self.probe.attempts,
                            port, summary)  # fmt: skip
            client.close()
            return None
        transport = client.get_transport()
        if transport is not None:
            transport.set_log_channel(PARAMIKO_CHANNEL)
        self.probe.close()
        self._client = client
        self.port = port
        return self

    @property
    def _client(self) -> paramiko.SSHClient | None:
        """The calling thread's login.

        Every command of one login is a child of one dropbear process, and
        dropbear (2022.83, the rootfs's) closes each session channel that has no
        process yet whenever one of its children exits: SIGCHLD makes it check
        every channel, and a channel without a process counts as finished. A
        command asked for just then gets "Channel closed." (or, seen too, dropbear
        fails an assertion and the link dies). Commands of one thread run one at a
        time and each has exited before the next is asked for, so each thread gets
        its own login (`Agent.steps_with_host_actions` runs profctl in a second
        thread), and a command that may still run takes its login with it
        (`_retire`).
        """
        return self._links.get(threading.get_ident())

    @_client.setter
    def _client(self, client: paramiko.SSHClient | None) -> None:
        with self._lock:
            if client is None:
                self._links.pop(threading.get_ident(), None)
            else:
                self._links[threading.get_ident()] = client

    def _transport(self) -> paramiko.Transport:
        self._tidy()
        if self._client is None and self.port is not None:  # a new thread, or one that retired
            self._log.debug("%s logs in anew", threading.current_thread().name)
            self.try_connect(self.port)
        transport = self._client.get_transport() if self._client else None
        if transport is None or not transport.is_active():
            raise TransportError("the SSH connection to the guest is not open")
        return transport

    def _open(self, open_one: Callable[[paramiko.Transport], _T]) -> _T:
        """Open a channel (session or SFTP) with ``open_one``; reconnect once if the link died.

        Seen under load in CI: the SSH transport to a healthy guest died between
        two commands ("Unable to open channel", then "unconnected"). Nothing ran on
        the failed channel, so one fresh connection and one more try are safe; the
        cause is logged as evidence.
        """
        try:
            return open_one(self._transport())
        except (paramiko.SSHException, OSError, EOFError, TransportError) as exc:
            transport = self._client.get_transport() if self._client else None
            cause = transport.get_exception() if transport else None
            self._log.warning("SSH channel open failed (%r; transport: %r, cause: %r): "
                              "reconnecting once", exc, transport, cause)  # fmt: skip
            if self.port is None or self._reconnect(self.port) is None:
                raise
            self.reconnects += 1
        return open_one(self._transport())

    @property
    def _channel_s(self) -> float:
        return max(self._timeouts.qmp_s, CHANNEL_OPEN_S * self._timeouts.scale)

    def _retire(self, channel: paramiko.Channel, why: str) -> None:
        """Set this thread's login aside with ``channel``, whose command may still run.

        Its end would be a SIGCHLD in that login's dropbear (see `_client`), so the
        next command logs in anew. The old login is closed once the guest closed
        ``channel`` (its command ended: killed, say) or at `close`.
        """
        client = self._client
        if client is None:
            return
        self._client = None
        with self._lock:
            self._retired.append((client, channel))
        self.retired += 1
        self._log.info("%s: its login is set aside; the next command logs in anew", why)

    def _tidy(self) -> None:
        """Close set-aside logins whose command ended, and logins of threads that ended."""
        alive = {thread.ident for thread in threading.enumerate()}
        with self._lock:
            ended = [c for c, ch in self._retired if ch.closed or not _active(c)]
            self._retired = [(c, ch) for c, ch in self._retired if c not in ended]
            gone = [ident for ident in self._links if ident not in alive]
            ended += [self._links.pop(ident) for ident in gone]
        for client in ended:
            client.close()

    def _reconnect(self, port: int) -> GuestShell | None:
        if self._client is not None:
            self._client.close()
            self._client = None
        return self.try_connect(port)

    def run(
        self, command: str, *, timeout_s: float | None = None, check: bool = True
    ) -> CommandResult:
        """Run ``command`` via the guest's shell; blocks ≤ ``timeout_s``.

        :raise GuestCommandError: non-zero exit and ``check``.
        :raise GuestCommandTimeout: no exit within the deadline.
        :raise TransportError: the connection broke.
        """
        budget = self._timeouts.command_s if timeout_s is None else timeout_s
        self._log.debug("guest$ %s", command)
        started = time.monotonic()
        try:
            channel = self._open(lambda t: t.open_session(timeout=self._channel_s))
            channel.exec_command(command)
            stdout, stderr = _collect(channel, deadline=started + budget)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise TransportError(f"SSH failed while running {command!r}: {exc!r}") from exc
        if stdout is None:
            self._retire(channel, f"{command!r} outlived its {budget:.0f}s")
            evidence = f"; {self.on_timeout()}" if self.on_timeout is not None else ""
            raise GuestCommandTimeout(
                f"guest command {command!r} did not finish in {budget:.0f}s{evidence}"
            )
        status = channel.recv_exit_status()
        channel.close()
        if status == -1:  # paramiko's "closed without an exit status"
            raise TransportError(f"the guest closed the connection while running {command!r}")
        result = CommandResult(command, status, stdout, stderr or "", time.monotonic() - started)
        if check and result.exit_status != 0:
            raise GuestCommandError(command, result.exit_status, result.stdout, result.stderr)
        return result

    def put(self, local: Path, remote: str, *, mode: int | None = None) -> None:
        """Copy a host file into the guest over SFTP."""
        with self._sftp() as sftp:
            sftp.put(str(local), remote)
            if mode is not None:
                sftp.chmod(remote, mode)

    def get(self, remote: str, local: Path) -> None:
        """Copy a guest file to the host over SFTP."""
        with self._sftp() as sftp:
            sftp.get(remote, str(local))

    @contextlib.contextmanager
    def _sftp(self) -> Iterator[paramiko.SFTPClient]:
        """An SFTP session, ended only once the guest's sftp-server has exited.

        A server that exits after the next command was asked for can cost that
        command its channel (see `_client`). So: EOF to the server, wait (bounded)
        for its exit status, then close; a server that does not exit takes its
        login with it (`_retire`).
        """
        try:
            sftp = self._open(paramiko.SFTPClient.from_transport)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise TransportError(f"SFTP session failed: {exc!r}") from exc
        if sftp is None:
            raise TransportError("SFTP session could not be opened")
        channel = sftp.get_channel()
        assert channel is not None  # from_transport opened it
        channel.settimeout(self._timeouts.command_s)
        try:
            yield sftp
            channel.shutdown_write()
            if not channel.status_event.wait(self._timeouts.qmp_s):
                self._retire(channel, "the guest's sftp-server did not exit after EOF")
                return
        except BaseException:
            sftp.close()
            raise
        sftp.close()

    def interactive(self) -> int:
        """Attach this terminal to a login shell in the guest until it exits.

        Returns the shell's exit status. Blocks for as long as the user works.
        """
        width, height = shutil.get_terminal_size()
        channel = self._transport().open_session()
        channel.get_pty(term=os.environ.get("TERM", "vt100"), width=width, height=height)
        channel.invoke_shell()
        stdin_fd = sys.stdin.fileno()
        saved = termios.tcgetattr(stdin_fd) if os.isatty(stdin_fd) else None
        try:
            if saved is not None:
                tty.setraw(stdin_fd)
            _relay(channel, stdin_fd, sys.stdout.fileno())
        finally:
            if saved is not None:
                termios.tcsetattr(stdin_fd, termios.TCSADRAIN, saved)
        status = channel.recv_exit_status()
        channel.close()
        return status

    def close(self) -> None:
        """Close every login, set-aside ones too; idempotent. Commands need a new `try_connect`."""
        self.probe.close()
        with self._lock:
            clients = list(self._links.values()) + [client for client, _ in self._retired]
            self._links.clear()
            self._retired.clear()
            self.port = None
        for client in clients:
            client.close()


def _active(client: paramiko.SSHClient) -> bool:
    transport = client.get_transport()
    return transport is not None and transport.is_active()


def _collect(channel: paramiko.Channel, *, deadline: float) -> tuple[str | None, str | None]:
    """Read a channel's stdout and stderr until it exits; (None, None) at the deadline."""
    out, err = bytearray(), bytearray()
    while True:
        while channel.recv_ready():
            out += channel.recv(65536)
        while channel.recv_stderr_ready():
            err += channel.recv_stderr(65536)
        drained = not channel.recv_ready() and not channel.recv_stderr_ready()
        if channel.exit_status_ready() and drained:
            return out.decode(errors="replace"), err.decode(errors="replace")
        if time.monotonic() > deadline:
            return None, None
        select.select([channel], [], [], 0.05)


def _relay(channel: paramiko.Channel, stdin_fd: int, stdout_fd: int) -> None:
    """Copy bytes between the terminal and the channel until the channel closes."""
    inputs: list[int] = [channel.fileno(), stdin_fd]
    while True:
        readable, _, _ = select.select(inputs, [], [])
        if channel.fileno() in readable:
            data = channel.recv(4096)
            if not data:
                return
            os.write(stdout_fd, data)
        if stdin_fd in readable:
            data = os.read(stdin_fd, 1024)
            if data:
                channel.send(data)
            else:  # end of input: tell the guest, keep showing its output
                channel.shutdown_write()
                inputs.remove(stdin_fd)
