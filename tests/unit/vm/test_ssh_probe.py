"""SSH logins that fail while a guest boots: one DEBUG line each, paramiko's records in a file.

A real paramiko client against a loopback listener that reads the client's
banner and then resets the connection: what QEMU's user-mode forward does while
the guest's sshd is not up yet.
"""

from __future__ import annotations

import logging
import queue
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from harness.timeouts import Timeouts
from harness.vm.ssh import GuestShell
from harness.vm.sshlogin import FIRST_LOGIN_WAITS, LOGIN_STRETCH_MAX, PARAMIKO_CHANNEL, login_waits


@pytest.fixture
def resetting_port() -> Iterator[int]:
    """A port whose every connection is reset after the client's first bytes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(10)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed by the fixture, or no client came
                return
            conn.recv(256)  # the client's version line
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # linger 0: RST, "Connection reset by peer"

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (close alone does not)
    server.close()
    thread.join(timeout=10)


def test_failed_logins_are_one_debug_line_each_and_paramiko_writes_to_the_probe_log(
    resetting_port: int, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    probe_log = tmp_path / "ssh-probe.log"
    shell = GuestShell(tmp_path / "no-key", timeouts=Timeouts(), name="g1", probe_log=probe_log)

    assert shell.try_connect(resetting_port) is None
    assert shell.try_connect(resetting_port) is None
    shell.close()

    # Nothing from paramiko reaches the log stream, and no record carries a traceback.
    assert [r for r in caplog.records if r.name.startswith("paramiko")] == []
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert all("Traceback" not in r.getMessage() for r in caplog.records)
    ours = [r.getMessage() for r in caplog.records if r.name == "harness.vm.ssh.g1"]
    assert len(ours) == 2
    assert ours[0].startswith(f"ssh attempt 1 on port {resetting_port}: not ready (")
    assert "\n" not in ours[0]
    # The evidence is in the run's artifacts: both attempts, paramiko's error and traceback.
    text = probe_log.read_text()
    assert f"attempt 2 on port {resetting_port} failed" in text
    assert "Error reading SSH protocol banner" in text
    assert "Traceback" in text
    report = shell.probe.report()
    assert report is not None
    assert report.startswith("2 SSH login(s) failed, the last: ")
    assert str(probe_log) in report


def test_a_shell_that_never_failed_has_nothing_to_report(tmp_path: Path) -> None:
    shell = GuestShell(tmp_path / "no-key", timeouts=Timeouts(), probe_log=tmp_path / "p.log")
    assert shell.probe.report() is None
    shell.close()
    assert not (tmp_path / "p.log").exists()


class _Transport:
    def __init__(self) -> None:
        self.channels: list[str] = []

    def set_log_channel(self, name: str) -> None:
        self.channels.append(name)


def test_a_login_that_succeeds_logs_on_paramikos_own_channel_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After login a broken link is news: it must reach the log stream as usual."""
    transport = _Transport()
    logins: list[str | None] = []

    class Client:
        def __init__(self) -> None:
            self.channel: str | None = None

        def set_missing_host_key_policy(self, policy: object) -> None:
            pass

        def set_log_channel(self, name: str) -> None:
            self.channel = name

        def connect(self, *args: object, **kwargs: object) -> None:
            logins.append(self.channel)

        def get_transport(self) -> _Transport:
            return transport

    monkeypatch.setattr(paramiko, "SSHClient", Client)
    shell = GuestShell(tmp_path / "key", timeouts=Timeouts(), name="g2", probe_log=tmp_path / "p")
    assert shell.try_connect(2222) is shell
    assert logins == [shell.probe.channel]  # the login itself ran on the probe's channel
    assert transport.channels == [PARAMIKO_CHANNEL]
    assert shell.port == 2222


def test_login_waits_grow_with_each_failed_login_up_to_a_cap() -> None:
    assert login_waits(0) == FIRST_LOGIN_WAITS
    waits = [login_waits(n) for n in range(40)]
    banners = [banner for _, banner, _ in waits]
    assert banners == sorted(banners)
    assert banners[5] > 2 * FIRST_LOGIN_WAITS[1]
    assert waits[-1] == tuple(w * LOGIN_STRETCH_MAX for w in FIRST_LOGIN_WAITS)


#: Logins until the waits reach their cap (3 s x 1.25^n stops growing at x8: n = 10).
LOGINS_TO_CAP = 10
#: The late banner comes this many times as late as the first login waited: a login that
#: waits no longer than the first (waits that do not grow) would have to give up half its
#: wait late to hear it, and the waits reach it within a few logins (the 4th, 5.9 s).
LATE_BANNER = 1.5


@pytest.fixture
def late_banner_port() -> Iterator[tuple[int, queue.Queue[bool]]]:
    """A port that withholds its SSH banner from the first client until that client gives
    up, then sends it to every later client `LATE_BANNER` times as late as the first one
    waited. For each
    connection it reports whether the client was still there to answer the banner
    (paramiko sends its key exchange once it has the banner)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    heard: queue.Queue[bool] = queue.Queue()

    def serve() -> None:
        first_waited: float | None = None
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed by the fixture
                return
            began = time.monotonic()
            try:
                conn.recv(256)  # the client's version line, sent at once
                if first_waited is None:  # no banner: the client's wait ends on its own
                    answered = bool(conn.recv(4096))  # b"" once it gave up
                    first_waited = time.monotonic() - began
                else:
                    late = LATE_BANNER * first_waited
                    time.sleep(max(0.0, late - (time.monotonic() - began)))
                    conn.sendall(b"SSH-2.0-slow\r\n")
                    answered = bool(conn.recv(4096))
            except OSError:
                answered = False
            conn.close()
            heard.put(answered)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], heard
    server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (close alone does not)
    server.close()
    thread.join(timeout=10)


def test_a_guest_slower_than_the_first_banner_wait_is_still_heard(
    late_banner_port: tuple[int, queue.Queue[bool]], tmp_path: Path
) -> None:
    """The first login gives up before the banner; a later one waits longer, for it.

    No margin tuned to a quiet host: the banner comes half as late again as the first
    login waited, measured, and the logins go on (their waits growing) until one hears it
    or the waits stop growing. A busy host only makes that take another login or two.
    """
    port, heard = late_banner_port
    shell = GuestShell(tmp_path / "no-key", timeouts=Timeouts(), probe_log=tmp_path / "p.log")
    answered: list[bool] = []
    for _ in range(LOGINS_TO_CAP + 1):
        assert shell.try_connect(port) is None  # no real sshd: every login fails in the end
        answered.append(heard.get(timeout=30))  # the server is done once the client is
        if answered[-1]:
            break
    shell.close()
    assert answered[-1] is True, answered  # a later login outlasted the first one's wait
