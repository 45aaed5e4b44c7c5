"""What the content oracles judge: a run's samples and the ground truth beside them.

Pure. `view_of` builds one `ContentView` from a run's samples and the truth the
harness kept; the oracle families (`harness.agent.oracles.who`, ``where``, ``chain``
and MODE in `harness.agent.oracles.content`) read it::

    view = view_of(samples, run.truth, chain_depth=None)
    applicable_content(view)            # frozenset({'MODE', 'WHO', 'WHERE'})
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.agent.oracles.walks import CoreWalks
from harness.agent.truth import program
from harness.agent.truth.elfsyms import FunctionTable
from harness.agent.truth.isolation import Isolation
from harness.agent.values.info import FlavourInfo
from harness.agent.values.samples import Sample

CONTENT_ORACLES: tuple[tuple[str, str], ...] = (
    ("MODE", "every sample's user/kernel flag matches its PC's address space"),
    (
        "WHO",
        "user samples in the workload's text carry its pid, worker code its worker's tid, "
        "each lane's code its thread's tid and CPU",
    ),
    ("WHERE", "workload samples lie in its text; in leaf at least as the model allows"),
    ("CHAIN", "leaf samples carry middle, outer, work, main; probe samples its frames; depth"),
)


@dataclass(frozen=True, slots=True)
class ContentView:
    """What the content oracles judge: samples, and the ground truth beside them.

    ``chain_depth`` None: the flavour records no call chain (CHAIN not applicable).
    ``module``: the agent's functions at their kernel addresses (None: not read).
    ``isolation``: the CPUs the harness kept for its own tasks (WHO's exclusive half).
    ``kernel``: the guest kernel's functions (vmlinux; None: not known).
    ``walks``: the core's per-CPU walk counters (CHAIN's stop-cause law,
    `harness.agent.oracles.walks`; empty: the flavour's records carry no stop cause).
    ``zeroing``: the core kernel functions the zero workload's kernel time lies in;
    ``kernel_pids``: the flavour's kernel samples carry the task's pid (kprof's do not:
    WHERE's kernel half is then not applicable).
    """

    samples: tuple[Sample, ...]
    workloads: tuple[program.WorkloadRun, ...]
    image: program.TruthImage | None
    chain_depth: int | None = None
    module: FunctionTable | None = None
    isolation: tuple[Isolation, ...] = ()
    walks: tuple[CoreWalks, ...] = ()
    kernel: FunctionTable | None = None
    zeroing: FunctionTable | None = None
    kernel_pids: bool = True
    unmodelled: str = ""  # why the zero workload's kernel model does not hold ("": it does)


def view_of(
    samples: Sequence[Sample],
    evidence: program.TruthEvidence | None,
    chain_depth: int | None,
    *,
    walks: tuple[CoreWalks, ...] = (),
    kernel_pids: bool = True,
) -> ContentView:
    """The content view of a run's samples and the ground truth it kept (None: none)."""
    if evidence is None:
        return ContentView(tuple(samples), (), None, chain_depth, walks=walks,
                           kernel_pids=kernel_pids)  # fmt: skip
    return ContentView(tuple(samples), evidence.workloads, evidence.image, chain_depth,
                       evidence.module, evidence.isolation, walks, evidence.kernel,
                       evidence.zeroing, kernel_pids, evidence.unmodelled)  # fmt: skip


def oracles_for(info: FlavourInfo) -> tuple[tuple[str, str], ...]:
    """The content oracles of flavour ``info``: CHAIN only where it records call chains."""
    return tuple(o for o in CONTENT_ORACLES if info.records_chains or o[0] != "CHAIN")


def applicable_content(view: ContentView) -> frozenset[str]:
    """The content oracles ``view`` can be judged by."""
    names = {"MODE"}
    if view.image is not None and view.workloads:
        names |= {"WHO", "WHERE"}
    if view.chain_depth is not None:
        names.add("CHAIN")
    return frozenset(names)


def first_wrong(samples: Sequence[Sample], cpu: int, wrong: Callable[[Sample], bool]) -> str:
    """The first of ``cpu``'s samples that is ``wrong``, described for a violation."""
    first = next(s for s in samples if s.cpu == cpu and wrong(s))
    mode = "user" if first.user else "kernel"
    return f"first: pc {first.pc:#x} flagged {mode}, pid {first.pid} tid {first.tid}"


def in_text(view: ContentView, sample: Sample) -> bool:
    """Whether ``sample`` is a user sample whose PC lies in the workload's text."""
    assert view.image is not None
    low, high = view.image.text
    return sample.user and low <= sample.pc < high


def timed(view: ContentView) -> bool:
    """Whether the run's samples carry a time (dt, kprof, hwpmc; tprof's records have none)."""
    return any(s.time_ns is not None for s in view.samples)
