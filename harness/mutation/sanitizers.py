"""The sanitizer cases: the ``kasan`` and ``kcsan`` mutants, each group on its own kernel.

A `SanitizerKernel` says which kernel a case boots and how its guest is set up; the
group runs the control and each of the case's mutants through every run of their
flavour, and what failed is the oracles plus each sanitizer report the runs caused::

    rows = sanitizer_group(bench, request.kernel, chosen=("tprof",), only=())
    SANITIZER_KERNELS["kcsan"].overlap            # True: runs beside a spinner per CPU
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from harness.agent.flavour import Flavour, behaviour
from harness.agent.mutants import MutantRow
from harness.agent.overlap import OVERLAP_RUN, WatchSetup, overlap_watch
from harness.agent.values.info import Mutant
from harness.builder.images import GuestImages, prepare_images
from harness.builder.kernel import KernelChoice, Variant
from harness.errors import GuestError
from harness.mutation.cases import (
    Bench,
    deploy_agent,
    mutant_row,
    mutation_guest,
    name_of,
    run_case,
)
from harness.mutation.plan import CASES, planned
from harness.vm.guest import Guest
from harness.vm.sanitizer import parse_reports

LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SanitizerKernel:
    """The kernel a sanitizer case runs on, and how its guest is set up.

    ``setup``: shell commands after boot, before the first run. ``overlap``: the runs
    go with a spinner on every CPU and KCSAN's own counters judged (`harness.agent.overlap`).
    Every report is a finding: with an agent frame anywhere ``<tool>``, else
    ``<tool>-KERNEL``; nothing is filtered, in the guest or here. The kcsan kernel
    instruments none of its own code (`harness.vm.sanitizer`), so a KCSAN report there
    has the agent's access on one side even when no agent frame is printed.
    """

    variant: Variant
    boot_args: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    overlap: bool = False


#: The sanitizer cases. KASAN reports only its first bug unless told to go on (a
#: control and several mutants share one guest). KCSAN's watch rate and stalls are set
#: by the overlap watch (`harness.vm.kcsan.OVERLAP`, from its model).
SANITIZER_KERNELS: dict[str, SanitizerKernel] = {
    "kasan": SanitizerKernel("debug", boot_args=("kasan_multi_shot",)),
    "kcsan": SanitizerKernel("kcsan", overlap=True),
}


def sanitizer_group(bench: Bench, kernel: KernelChoice, *, chosen: tuple[str, ...],
                    only: tuple[str, ...]) -> list[MutantRow]:  # fmt: skip
    """The control and the ``kasan``/``kcsan`` mutants of each chosen flavour on their kernel.

    Each runs all the flavour's runs (`_sanitizer_case`); what failed is the oracles,
    plus each sanitizer report after the run began: its tool (``KASAN``, ``KCSAN``,
    ``UBSAN``) when an agent frame is in it, ``<tool>-KERNEL`` when none is.
    """
    rows: list[MutantRow] = []
    for case, sanitizer in SANITIZER_KERNELS.items():
        plans = {name: planned(name, full=True, case=case, only=only) for name in chosen}
        plans = {name: found for name, found in plans.items() if found}
        if not plans:
            continue
        images = prepare_images(bench.arch, sanitizer.variant, bench.cache, kernel=kernel)
        mine: list[MutantRow] = []  # this case's rows
        try:
            with mutation_guest(bench, images, case, timeout_scale=3,
                                kernel_args=sanitizer.boot_args) as guest:  # fmt: skip
                for command in sanitizer.setup:
                    guest.shell.run(command, timeout_s=bench.timeouts.command_s)
                for name, found in plans.items():
                    flavour = behaviour(name)
                    for mutant in (None, *found):
                        failed, notes, unjudged = _sanitizer_case(bench, guest, images, flavour,
                                                                  mutant, sanitizer)  # fmt: skip
                        mine.append(mutant_row(flavour, mutant, [(case, failed)], notes,
                                               unjudged=unjudged))  # fmt: skip
        except GuestError as exc:  # leaving it: the console holds the mutants' reports
            mine = _after_guest_error(mine, plans, case, f"the {case} guest: {exc.reason[:300]}")
        rows += mine
    return rows


def _after_guest_error(rows: list[MutantRow], plans: dict[str, tuple[Mutant, ...]], case: str,
                       what: str) -> list[MutantRow]:  # fmt: skip
    """A guest's rows after it failed: the judged ones, then one per planned build left.

    A build the guest did not live to judge is a row all the same (``RUN-ERROR``: a
    mutant is then not caught, a control is broken), never left out of the table. When
    every build was judged, the failure (leaving the guest) is a note on the last row.
    """
    judged = {(row.flavour, row.mutant) for row in rows}
    left = [(name, mutant) for name, found in plans.items() for mutant in (None, *found)
            if (name, name_of(mutant)) not in judged]  # fmt: skip
    if not left:
        last = rows[-1]
        return [*rows[:-1], dataclasses.replace(last, notes=(*last.notes, f"leaving {what}"))]
    return [*rows, *(mutant_row(behaviour(name), mutant, [(case, {"RUN-ERROR"})],
                                [f"not judged: {what}"]) for name, mutant in left)]  # fmt: skip


def _sanitizer_case(bench: Bench, guest: Guest, images: GuestImages, flavour: Flavour,
                    mutant: Mutant | None,
                    sanitizer: SanitizerKernel) -> tuple[set[str], list[str], bool]:  # fmt: skip
    """Every run's failed oracles and the sanitizer reports the runs caused; notes; unjudged.

    The runs: standard, exact and the flavour's extra runs (kprof's offline run takes
    CPUs down, where the hotplug mutant shows). With ``sanitizer.overlap`` they run
    beside a spinner on every CPU (only the flavour's ``overlap`` run, where it has
    one), and KCSAN's counters over them are a note; a case that could not have seen a
    race (`harness.vm.kcsan.KcsanWatch`) is unjudged.
    """
    start = len(guest.vm.console_text().splitlines())
    failed, notes = set(), []

    # The kcsan case: the flavour's overlap run where it has one (every CPU sampling
    # fast beside the spinners: harness.agent.overlap), else every run.
    own = (OVERLAP_RUN,) if sanitizer.overlap and OVERLAP_RUN in flavour.runs else ()
    cases = own or (*CASES, *flavour.extra_runs)

    def runs() -> None:
        for case in cases:
            failed.update(run_case(bench, guest, images, flavour, mutant, case))

    unjudged = False
    if sanitizer.overlap:
        deploy_agent(bench, guest, images, flavour.name, mutant)  # deploys profctl for the spinners
        where = WatchSetup(guest.shell, bench.cpus, bench.timeouts.command_s)
        _, watch = overlap_watch(where, f"{flavour.name} {name_of(mutant)}", runs)
        notes.append(watch.describe())
        LOG.info("%s", watch.describe())
        unjudged = bool(watch.unjudged_reason())
        if watch.races:  # KCSAN's own count: a race it may not have printed
            failed.add("KCSAN")
    else:
        runs()
    for report in parse_reports(guest.vm.console_text(), start_line=start):
        LOG.info("mutant %s, %s: %s", name_of(mutant), flavour.name, report.describe())
        failed.add(report.tool if report.in_agent else f"{report.tool}-KERNEL")
    return failed, notes, unjudged
