"""Synchronous QMP for a synchronous harness, with a transcript on disk.

``qemu.qmp.QMPClient`` is asyncio-only. `QmpSession` owns a private event loop
and runs every call to completion under a deadline, so the rest of the harness
(and pytest) stays synchronous. Every command, reply and event is appended to
a JSON-lines transcript in the run's artifact directory::

    qmp = QmpSession("gw0-arm64", transcript=workdir / "qmp.jsonl", timeout_s=10)
    qmp.connect(sock)                       # one end of a socketpair
    qmp.execute("query-cpus-fast")
    qmp.hmp("info usernet")                 # human monitor, through QMP
    qmp.close()
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from qemu.qmp import ExecuteError, QMPClient, QMPError

from harness.errors import HarnessTimeout, TransportError

LOG = logging.getLogger(__name__)
T = TypeVar("T")


class QmpSession:
    """One QMP connection, one command at a time.

    A second thread (a timed-out guest command asking where the vCPUs are) waits for
    the first's reply.
    """

    def __init__(self, name: str, *, transcript: Path, timeout_s: float) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None  # made by connect()
        self._client = QMPClient(name)
        self._transcript = transcript
        self._timeout_s = timeout_s
        self._log = LOG.getChild(name)
        self._lock = threading.Lock()

    def _run(self, awaitable: Awaitable[T], timeout_s: float | None = None) -> T:
        budget = self._timeout_s if timeout_s is None else timeout_s
        if self._loop is None or self._loop.is_closed():
            raise TransportError("QMP is not connected")
        try:
            with self._lock:
                return self._loop.run_until_complete(asyncio.wait_for(awaitable, budget))
        except TimeoutError as exc:
            raise HarnessTimeout("a QMP reply", budget) from exc

    def _record(self, direction: str, message: object) -> None:
        entry = {"t": round(time.time(), 6), "dir": direction, "msg": message}
        with self._transcript.open("a") as out:
            out.write(json.dumps(entry, default=str) + "\n")

    def connect(self, sock: socket.socket) -> None:
        """Handshake over ``sock``; the session owns the socket from here on.

        :raise TransportError: QEMU did not speak QMP.
        """
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        try:
            self._run(self._client.connect(sock))
        except QMPError as exc:
            raise TransportError(f"QMP handshake failed: {exc}") from exc
        greeting = self._client.greeting
        self._record("greeting", dict(greeting._raw) if greeting is not None else None)

    def execute(self, command: str, arguments: Mapping[str, object] | None = None) -> Any:
        """Run one QMP command and return its raw ``return`` value.

        :raise TransportError: QEMU refused the command or the connection broke.
        :raise HarnessTimeout: no reply within the QMP budget.
        """
        self._log.debug("qmp -> %s %s", command, arguments or "")
        self._record("cmd", {"execute": command, "arguments": dict(arguments or {})})
        try:
            reply = self._run(self._client.execute(command, dict(arguments or {}) or None))
        except ExecuteError as exc:
            self._record("error", {"class": exc.error_class, "desc": str(exc)})
            raise TransportError(f"QMP {command} failed: {exc.error_class}: {exc}") from exc
        except QMPError as exc:
            raise TransportError(f"QMP {command} not delivered: {exc}") from exc
        finally:
            self._drain_events()
        self._record("reply", reply)
        return reply

    def hmp(self, command_line: str) -> str:
        """Run a human-monitor command through QMP and return its text."""
        return str(self.execute("human-monitor-command", {"command-line": command_line}))

    def _drain_events(self) -> None:
        for event in self._client.events.clear():
            self._log.debug("qmp event %s", event.get("event"))
            self._record("event", dict(event))

    def close(self) -> None:
        """Disconnect and release the loop; idempotent, never raises."""
        if self._loop is None or self._loop.is_closed():
            return
        try:
            self._run(self._client.disconnect(), 5.0)
            self._drain_events()
        except (QMPError, OSError, EOFError, HarnessTimeout) as exc:
            self._log.debug("ignoring error while closing QMP: %r", exc)  # QEMU may be gone
        finally:
            self._loop.close()
