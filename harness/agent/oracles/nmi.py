"""NMI, the law every flavour shares on the context its producer ran in.

`check_nmi` holds a flavour's run to `harness.agent.oracles.core.check_nmi_context`
(with pseudo-NMI on every overflow handled in NMI, no producer call in hard-IRQ
context; with it off nothing in NMI); `judge_nmi` says what it compared, in contexts
checked, never CPUs alone::

    check_nmi(run)          # [] when the law holds
    judge_nmi(run)          # Judged("NMI", 312, "contexts checked (150 overflows, ...)")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from harness.agent.oracles.core import check_nmi_context
from harness.agent.values.results import Judged, Violation


class NmiRun(Protocol):
    """What `check_nmi` reads of a flavour's run."""

    @property
    def core(self) -> Mapping[int, Mapping[str, int]]:
        """CPU → the core's per-CPU counters (``core_percpu``)."""

    @property
    def nmi_expected(self) -> bool:
        """Whether the guest was booted with pseudo-NMI on."""


def check_nmi(run: NmiRun) -> list[Violation]:
    """NMI of a flavour's run: `check_nmi_context` on its core counters."""
    return check_nmi_context(run.core, run.nmi_expected)


def judge_nmi(run: NmiRun) -> Judged:
    """What NMI compared in a flavour's run: the context of each overflow and producer call.

    n counts contexts checked: every overflow the handler took (in NMI or not) and every
    producer call (by the context it ran in), over every CPU.
    """
    core = run.core
    overflows = sum(int(core[cpu].get("x_nmi_total", 0)) for cpu in core)
    calls = sum(int(core[cpu].get(name, 0)) for cpu in core
                for name in ("x_producer_calls_nmi", "x_producer_calls_irq",
                             "x_producer_calls_task"))  # fmt: skip
    mode = "pseudo-NMI on" if run.nmi_expected else "pseudo-NMI off"
    return Judged("NMI", overflows + calls, f"contexts checked ({overflows} overflows, {calls} "
                  f"producer calls on {len(core)} CPUs, {mode})",
                  why="no overflow and no producer call on any CPU")  # fmt: skip
