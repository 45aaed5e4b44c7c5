"""Saving a stopped guest to a file and loading it into a fresh QEMU, over QMP.

The QMP session is a seam (`MigrationQmp`): `harness.vm.qmp.QmpSession` in real
runs, a scripted fake in unit tests. Every poll goes through `wait_until` with a
budget, and ``abort`` ends it early when QEMU has died::

    save_state(vm.qmp, entry / "state.mig", timeout_s=t.qmp_s, abort=vm.failure)
    # ... a new QEMU started with the same argv plus -incoming defer ...
    load_state(vm.qmp, entry / "state.mig", timeout_s=t.qmp_s, abort=vm.failure)

Both raise `SnapshotError` (host side) with the migration status as evidence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from harness.errors import HarnessTimeout, SnapshotError, TransportError
from harness.timeouts import wait_until
from harness.vm.snapshot import (
    MAX_BANDWIDTH_BYTES_S,
    MigrationState,
    load_uri,
    migration_state,
    migration_summary,
    save_uri,
)

LOG = logging.getLogger(__name__)
#: Polling period of ``query-migrate``: a load takes about 0.1 s, so the default 0.2 s
#: period of `wait_until` would double it.
POLL_S = 0.01


class MigrationQmp(Protocol):
    """The part of `harness.vm.qmp.QmpSession` used here."""

    def execute(self, command: str, arguments: Mapping[str, object] | None = None) -> Any:
        """Run one QMP command; its raw ``return`` value."""


def _never() -> BaseException | None:
    return None


def save_state(
    qmp: MigrationQmp,
    path: Path,
    *,
    timeout_s: float,
    abort: Callable[[], BaseException | None] = _never,
) -> dict[str, Any]:
    """Stop the guest and write its state to ``path``; blocks ≤ ``timeout_s``.

    The guest stays stopped (QEMU in ``postmigrate``): the caller stops QEMU.
    Returns the final ``query-migrate`` reply (sizes, times).

    :raise SnapshotError: QEMU refused or the migration failed or ran out of time.
    """
    try:
        qmp.execute("migrate-set-parameters", {"max-bandwidth": MAX_BANDWIDTH_BYTES_S})
        qmp.execute("stop")
        qmp.execute("migrate", {"uri": save_uri(path)})
    except TransportError as exc:
        raise SnapshotError(f"QEMU refused to save the guest to {path}", str(exc)) from exc
    return _wait(qmp, what=f"the guest state to be written to {path}", timeout_s=timeout_s,
                 abort=abort)  # fmt: skip


def load_state(
    qmp: MigrationQmp,
    path: Path,
    *,
    timeout_s: float,
    abort: Callable[[], BaseException | None] = _never,
) -> dict[str, Any]:
    """Load ``path`` into a QEMU started with ``-incoming defer``, then run the guest.

    Blocks ≤ ``timeout_s`` for the load. Returns the final ``query-migrate`` reply.

    :raise SnapshotError: QEMU refused the stream, or the load failed or timed out.
    """
    try:
        qmp.execute("migrate-incoming", {"uri": load_uri(path)})
    except TransportError as exc:
        raise SnapshotError(f"QEMU refused to load {path}", str(exc)) from exc
    reply = _wait(qmp, what=f"the guest state to be loaded from {path}", timeout_s=timeout_s,
                  abort=abort)  # fmt: skip
    try:
        qmp.execute("cont")  # saved stopped, so loaded paused
    except TransportError as exc:
        raise SnapshotError("the loaded guest would not run", str(exc)) from exc
    return reply


def _wait(
    qmp: MigrationQmp,
    *,
    what: str,
    timeout_s: float,
    abort: Callable[[], BaseException | None],
) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def probe() -> dict[str, Any] | None:
        nonlocal last
        last = dict(qmp.execute("query-migrate"))
        state = migration_state(last)
        if state is MigrationState.FAILED:
            raise SnapshotError(f"migration failed while waiting for {what}",
                                migration_summary(last))  # fmt: skip
        return last if state is MigrationState.DONE else None

    try:
        return wait_until(probe, timeout_s=timeout_s, what=what, interval_s=POLL_S, abort=abort)
    except HarnessTimeout as exc:
        raise SnapshotError(f"timed out waiting for {what}", migration_summary(last)) from exc
    except TransportError as exc:
        raise SnapshotError(f"QMP broke while waiting for {what}",
                            f"{exc}; last {migration_summary(last)}") from exc  # fmt: skip
