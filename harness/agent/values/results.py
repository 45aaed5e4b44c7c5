"""What every flavour's run is made of: the debugfs counters and the oracles' verdicts.

Each flavour's own run type (``harness/agent/flavours/<name>/results.py``) is
built from these; everything that judges or shows a run only reads plain values,
so it can be tested on hand-written ones::

    counters = AgentCounters(info={...}, stats={...}, stats_percpu={0: {...}}, core={0: {...}})
    Violation("TP-O1", 0, "12", "11", "one sample lost")
    Judged("WHERE", 412, "chain-phase samples")         # what the oracle compared
    Judged("PROFILE", 0, "samples", why="perf sampled nothing in the window")   # UNJUDGED
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.agent.values.info import CORE_PERCPU


@dataclass(frozen=True, slots=True)
class AgentCounters:
    """The agent's debugfs files, parsed.

    ``core`` is the ``nmi`` file: per CPU, the ground truth the core keeps before any
    flavour code runs (`harness.agent.values.info.CORE_PERCPU`). ``stats`` and
    ``stats_percpu`` are the flavour's statistics (`FlavourInfo.stats`,
    `FlavourInfo.stats_percpu`). Every CPU that was ever online has an entry in
    ``core`` and ``stats_percpu``.
    """

    info: Mapping[str, str]
    stats: Mapping[str, int]
    stats_percpu: Mapping[int, Mapping[str, int]]
    core: Mapping[int, Mapping[str, int]]
    state: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Violation:
    """One oracle that did not hold: which, where, and the numbers."""

    oracle: str  # e.g. "TP-O1", "COUNT", "NMI"
    cpu: int | None  # None: a global law
    expected: str
    observed: str
    detail: str = ""

    def __str__(self) -> str:
        where = "all CPUs" if self.cpu is None else f"CPU {self.cpu}"
        text = f"{self.oracle} on {where}: expected {self.expected}, observed {self.observed}"
        return f"{text} ({self.detail})" if self.detail else text


#: The verdict of an oracle that held over nothing: it compared no sample, pair or CPU.
UNJUDGED = "UNJUDGED"


@dataclass(frozen=True, slots=True)
class Judged:
    """How much one oracle (or one ``part`` of it) compared in a run: ``n`` of ``what``.

    A verdict says ``PASS`` only after a comparison: ``n`` > 0 items (samples, pairs,
    CPUs) were held against the oracle's evidence. ``n`` = 0 is ``UNJUDGED``, and
    ``why`` says why nothing could be compared (no sample in the phase, every CPU
    left out). ``part`` names one half of an oracle judged on its own population
    (WHO's ``exclusive`` CPUs, WHERE's ``mix``); "" is the whole oracle. ``shares_cpu``:
    the part's population is one phase's samples on one vCPU, so it shrinks with that
    vCPU's share of a host core; a run whose vCPUs outnumber the host's cores does not
    rely on it (`harness.agent.oracles.report.unjudged`), and it still says PASS or
    UNJUDGED there. ``unmodelled``: the part has no model of this guest's kernel (WHERE's
    kernel half on a sanitizer kernel, whose read path its bound does not describe), so
    it compares nothing here, ``why`` says so, and no run relies on it: the oracle's
    other parts must still compare something for a PASS.
    """

    oracle: str
    n: int
    what: str
    why: str = ""
    part: str = ""
    shares_cpu: bool = False
    unmodelled: bool = False

    @property
    def judged(self) -> bool:
        """Whether anything was compared."""
        return self.n > 0

    def __str__(self) -> str:
        where = f"{self.part}: " if self.part else ""
        if self.judged:
            return f"{where}n={self.n} {self.what}"
        relied = " (not relied on: no model of this kernel)" if self.unmodelled else ""
        return f"{where}0 {self.what}: {self.why or 'nothing to compare'}{relied}"


def flat_numbers(
    stats: Mapping[str, int],
    percpu: Mapping[int, Mapping[str, int]],
    core: Mapping[int, Mapping[str, int]],
    record_cpus: Sequence[int],
) -> dict[str, int]:
    """Every counter under one flat name: what scenarios name as values.

    ``stats.x``, ``percpu.<cpu>.x``, ``core.<cpu>.x``, ``samples``, ``samples.cpu.<cpu>``.
    """
    flat = {"samples": len(record_cpus), **{f"stats.{k}": int(v) for k, v in stats.items()}}
    for kind, table in (("percpu", percpu), ("core", core)):
        for cpu, values in table.items():
            flat.update({f"{kind}.{cpu}.{name}": int(v) for name, v in values.items()})
    for cpu in core:
        flat[f"samples.cpu.{cpu}"] = sum(1 for c in record_cpus if c == cpu)
    return flat


CORE_NAMES: tuple[str, ...] = tuple(name for name, _ in CORE_PERCPU)
