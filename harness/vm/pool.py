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
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from harness.build.images import GuestImages
from harness.errors import HarnessError
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
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
    ) -> None:
        self._base = base
        self._images = images
        self._root = workdir_root
        self._prefix = prefix
        self._timeouts = timeouts
        self._guests: dict[str, Guest] = {}
        self._failures: dict[str, HarnessError] = {}
        #: Every guest this pool ever booted, in order (for summaries).
        self.booted: list[Guest] = []

    def get(self, topology: CpuTopology) -> Guest:
        """The running guest for ``topology``, booting it on first use.

        :raise HarnessError: the boot failed (now or on an earlier ask).
        """
        key = topology.name
        if key in self._failures:
            raise self._failures[key]
        if key not in self._guests:
            # One live guest per worker: tests come sorted by topology, and the host
            # has two cores, so an idle guest of another layout only steals time.
            self.close()
            spec = dataclasses.replace(self._base, topology=topology)
            name = f"{self._prefix}-{spec.name}"
            guest = Guest(spec, self._images, self._root / name, timeouts=self._timeouts,
                          name=name)  # fmt: skip
            try:
                self._guests[key] = guest.__enter__()
                self.booted.append(guest)
            except HarnessError as exc:
                self._failures[key] = exc
                raise
        return self._guests[key]

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
            reconnects = guest.shell.reconnects
            lines.append(
                f"{guest.spec.topology.name:>10}  {facts.cpus_online} CPUs  "
                f"SSH after {guest.boot_s:4.1f}s  PMU {pmu}  pseudo-NMI "
                f"{'on' if facts.pseudo_nmi else 'off'}  {guest.workdir}"
                + (f"  SSH reconnected {reconnects}x" if reconnects else "")
            )
        for name, error in self._failures.items():
            lines.append(f"{name:>10}  boot failed: {type(error).__name__}")
        return lines

    def discard(self, topology: CpuTopology) -> None:
        """Stop and forget the guest of ``topology`` (after a test spoiled it)."""
        if (guest := self._guests.pop(topology.name, None)) is not None:
            guest.__exit__(None, None, None)

    def close(self) -> None:
        """Stop every guest; errors are logged, never raised, so all get stopped."""
        while self._guests:
            _, guest = self._guests.popitem()
            try:
                guest.__exit__(None, None, None)
            except HarnessError:  # e.g. a WARNING found on the console at the end
                LOG.exception("%s failed while stopping", guest.name)
