"""GuestShell logins: a dead link is replaced once; one login per thread; a login whose
command outlived its deadline is set aside until that command ends."""

from __future__ import annotations

import threading
from pathlib import Path

import paramiko
import pytest

from harness.errors import TransportError
from harness.timeouts import Timeouts
from harness.vm.ssh import GuestShell


class FakeTransport:
    def __init__(self, active: bool) -> None:
        self.active = active

    def is_active(self) -> bool:
        return self.active

    def get_exception(self) -> BaseException | None:
        return None if self.active else EOFError("socket closed")


class FakeClient:
    def __init__(self, active: bool) -> None:
        self.transport = FakeTransport(active)
        self.closed = False

    def get_transport(self) -> FakeTransport:
        return self.transport

    def close(self) -> None:
        self.closed = True


def shell_with(client: FakeClient, monkeypatch: pytest.MonkeyPatch) -> tuple[GuestShell, list[int]]:
    shell = GuestShell(Path("/nonexistent"), timeouts=Timeouts())
    shell._client = client  # type: ignore[assignment]
    shell.port = 2222
    logins: list[int] = []

    def login(port: int) -> GuestShell:
        logins.append(port)
        shell._client = FakeClient(active=True)  # type: ignore[assignment]
        return shell

    monkeypatch.setattr(shell, "try_connect", login)
    return shell, logins


def test_a_dead_link_is_replaced_once_and_the_open_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = FakeClient(active=False)
    shell, logins = shell_with(dead, monkeypatch)
    assert shell._open(lambda transport: transport) is shell._client.get_transport()  # type: ignore[union-attr]
    assert logins == [2222]
    assert dead.closed


def test_an_open_that_fails_on_a_live_link_reconnects_and_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shell, logins = shell_with(FakeClient(active=True), monkeypatch)
    attempts: list[object] = []

    def open_one(transport: object) -> str:
        attempts.append(transport)
        if len(attempts) == 1:
            raise paramiko.SSHException("Unable to open channel.")
        return "channel"

    assert shell._open(open_one) == "channel"
    assert logins == [2222]
    assert attempts[0] is not attempts[1]  # the second try ran on the new connection


def test_a_guest_that_does_not_answer_again_gives_the_original_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shell, _ = shell_with(FakeClient(active=False), monkeypatch)
    monkeypatch.setattr(shell, "try_connect", lambda port: None)
    with pytest.raises(TransportError, match="not open"):
        shell._open(lambda transport: transport)


class FakeChannel:
    def __init__(self) -> None:
        self.closed = False


def test_each_thread_logs_in_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """dropbear closes a waiting channel when any other child of its login exits."""
    first = FakeClient(active=True)
    shell, logins = shell_with(first, monkeypatch)
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(shell._open(lambda t: t)))
    worker.start()
    worker.join()
    assert logins == [2222]
    assert seen[0] is not first.get_transport()
    mine: object = shell._open(lambda t: t)
    assert mine is first.get_transport()  # the first thread keeps its own
    assert shell.reconnects == 0
    shell._open(lambda t: t)  # the ended thread's login is closed on the next command
    assert len(shell._links) == 1


def test_a_retired_login_is_closed_once_its_command_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = FakeClient(active=True)
    shell, logins = shell_with(first, monkeypatch)
    hung = FakeChannel()
    shell._retire(hung, "a command outlived its deadline")  # type: ignore[arg-type]
    anew: object = shell._open(lambda t: t)
    assert anew is not first.get_transport()
    assert logins == [2222]
    assert (shell.retired, shell.reconnects) == (1, 0)
    assert not first.closed  # its command may still run
    hung.closed = True  # the guest ended it (killed, say)
    shell._open(lambda t: t)
    assert first.closed


def test_close_ends_retired_logins_and_further_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    first = FakeClient(active=True)
    shell, _ = shell_with(first, monkeypatch)
    shell._retire(FakeChannel(), "a command outlived its deadline")  # type: ignore[arg-type]
    shell.close()
    assert first.closed
    with pytest.raises(TransportError, match="not open"):
        shell._transport()
