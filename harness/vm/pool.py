"""Boot guests lazily and keep them for reuse within one process (one xdist worker).

A test suite asks for a topology; the first ask boots the guest, later asks
reuse it, and `close` stops them all (it runs in a session finaliser, so it
runs on failure and Ctrl-C too)::

    pool = GuestPool(base_spec, images, workdir_root, prefix="gw0", timeouts=t)
    guest = pool.get(CpuTopology.parse("2s2cl1c2t"))
    ...
    pool.close()

A guest whose boot failed is remembered as failed, so every test of that
topology reports the same boot error instead of booting again and again.

Before a guest is handed out again it is checked against its state at start
(`harness.vm.baseline`: online CPUs, perf sysctls, loaded modules), and what differs
is put back and read back, all in one SSH round trip (each write guarded in the guest).
A guest that cannot be checked or put back (QEMU gone, SSH broken, a CPU that will
not come back) is stopped and a fresh one started: with a `SnapshotStore` (the
test tier's default) restored from the topology's snapshot (1.4-2.4 s to SSH on
8 vCPUs here, against 5-10 s to boot), without (``--no-snapshot``) booted cold.

Why not restore for every test: on this 2-core shared host a restore plus
deploying the agent again costs 2-5 s per test against 0.2-0.5 s for the check,
and nearly every agent test leaves a perf sysctl changed; restoring per test made
``invoke test --cpus 8`` 382 s against 252 s booting cold (README, "Snapshots").
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
from pathlib import Path

from harness.builder.images import GuestImages
from harness.errors import HarnessError
from harness.timeouts import Timeouts
from harness.timing import BOOT, timed
from harness.vm.argv import MachineSpec
from harness.vm.baseline import GuestState, read_state, reset
from harness.vm.guest import Guest
from harness.vm.snapstore import SnapshotStore
from harness.vm.topology import CpuTopology

LOG = logging.getLogger(__name__)


class GuestPool:
    """Booted guests of one worker, keyed by topology name; one runs at a time."""

    def __init__(
        self,
        base: MachineSpec,
        images: GuestImages,
        workdir_root: Path,
        *,
        prefix: str,
        timeouts: Timeouts,
        snapshots: SnapshotStore | None = None,
    ) -> None:
        self._base = base
        self._images = images
        self._root = workdir_root
        self._prefix = prefix
        self._timeouts = timeouts
        self._guests: dict[str, Guest] = {}
        self._baselines: dict[str, GuestState] = {}
        self._failures: dict[str, HarnessError] = {}
        self._snapshots = snapshots
        self._restores: dict[str, list[float]] = {}  # topology -> restore-to-SSH seconds
        #: Every guest this pool ever booted, in order (for summaries).
        self.booted: list[Guest] = []

    @timed(BOOT)
    def get(self, topology: CpuTopology) -> Guest:
        """The running guest for ``topology``, as it was at start; starts it on first use.

        A reused guest is checked and put back first (≤ two SSH round trips); one that
        cannot be is stopped and replaced by a fresh restore (or boot, without snapshots).

        :raise HarnessError: the boot or restore failed (now or on an earlier ask).
        """
        key = topology.name
        if key in self._failures:
            raise self._failures[key]
        guest = self._guests.get(key)
        if guest is not None and self._restored(guest, self._baselines[key]):
            return guest
        if guest is not None:
            self._drop(key)
        if self._snapshots is not None:
            return self._restore(topology, self._snapshots)
        return self._boot(topology)

    def _boot(self, topology: CpuTopology) -> Guest:
        # One live guest per worker: tests come sorted by topology, and the host
        # has two cores, so an idle guest of another layout only steals time.
        self.close()
        key = topology.name
        spec = dataclasses.replace(self._base, topology=topology)
        name = f"{self._prefix}-{spec.name}"
        guest = Guest(spec, self._images, self._root / name, timeouts=self._timeouts, name=name)
        try:
            self._guests[key] = guest.__enter__()
            self.booted.append(guest)
            self._baselines[key] = read_state(guest.shell)
        except HarnessError as exc:
            self._failures[key] = exc
            self._drop(key)
            raise
        return guest

    def _restore(self, topology: CpuTopology, snapshots: SnapshotStore) -> Guest:
        self.close()  # one live guest per worker, as in `_boot`
        key = topology.name
        spec = dataclasses.replace(self._base, topology=topology)
        name = f"{self._prefix}-{spec.name}"
        times = self._restores.setdefault(key, [])
        workdir = self._root / name / f"restore-{len(times) + 1:03d}"
        try:
            guest = snapshots.start(spec, self._images, workdir, name=name)
            self._guests[key] = guest
            self._baselines[key] = read_state(guest.shell)
        except HarnessError as exc:
            self._failures[key] = exc
            self._drop(key)
            raise
        times.append(guest.boot_s)
        if len(times) == 1:
            self.booted.append(guest)
        return guest

    def _restored(self, guest: Guest, baseline: GuestState) -> bool:
        """Whether ``guest`` is (again) as it was at boot; logs what was restored."""
        if (status := guest.vm.exitcode()) is not None:
            LOG.warning("%s: QEMU exited (status %s); starting a fresh guest", guest.name, status)
            return False
        mark = len(guest.vm.console_text().splitlines())
        try:
            outcome = reset(guest.shell, baseline)
            # Restoring must not splat either (e.g. a CPU coming back online).
            guest.vm.check_console(since_line=mark, what=f"{guest.name} while restoring it")
        except HarnessError as exc:
            LOG.warning("%s: state not checked or restored (%s); starting a fresh guest",
                        guest.name, exc)  # fmt: skip
            return False
        if outcome.found:
            LOG.warning("%s: the last test left %s", guest.name, "; ".join(outcome.found))
        if outcome.left:
            LOG.warning("%s: still %s after restoring; starting a fresh guest",
                        guest.name, "; ".join(outcome.left))  # fmt: skip
            return False
        return True

    def summary_lines(self) -> list[str]:
        """One line per booted guest: layout, boot time, PMU, NMI, artifacts."""
        lines = []
        for guest in self.booted:
            facts = guest.facts
            pmu = (
                f"{facts.pmu_driver} ({facts.pmu_counters} counters)"
                if facts.pmu_driver
                else ("none (software events only)")
            )
            reconnects, retired = guest.shell.reconnects, guest.shell.retired
            lines.append(
                f"{guest.spec.topology.name:>10}  {facts.cpus_online} CPUs  "
                f"{self._start_summary(guest)}  PMU {pmu}  pseudo-NMI "
                f"{'on' if facts.pseudo_nmi else 'off'}  {guest.workdir}"
                + (f"  SSH reconnected {reconnects}x" if reconnects else "")
                + (f"  SSH logins set aside {retired}x" if retired else "")
            )
        for name, error in self._failures.items():
            lines.append(f"{name:>10}  boot failed: {type(error).__name__}")
        return lines

    def _start_summary(self, guest: Guest) -> str:
        times = self._restores.get(guest.spec.topology.name)
        if not times:
            return f"SSH after {guest.boot_s:4.1f}s"
        return (f"{len(times)} restores, SSH after {statistics.median(times):.2f}s median "
                f"({max(times):.2f}s max)")  # fmt: skip

    def discard(self, topology: CpuTopology) -> None:
        """Stop and forget the guest of ``topology`` (after a test spoiled it)."""
        self._baselines.pop(topology.name, None)
        if (guest := self._guests.pop(topology.name, None)) is not None:
            guest.__exit__(None, None, None)

    def _drop(self, key: str) -> None:
        """Stop and forget the guest under ``key``, if any; errors are logged, not raised."""
        self._baselines.pop(key, None)
        if (guest := self._guests.pop(key, None)) is None:
            return
        try:
            guest.__exit__(None, None, None)
        except HarnessError:  # e.g. a WARNING found on the console at the end
            LOG.exception("%s failed while stopping", guest.name)

    def close(self) -> None:
        """Stop every guest; errors are logged, never raised, so all get stopped."""
        for key in list(self._guests):
            self._drop(key)
