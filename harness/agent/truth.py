"""The ground-truth workload: how it is built and launched, and what a run of it was.

``guest/workloads/truth.c`` is a static arm64 program whose functions and call path
the harness reads from its own symbol table (`harness.agent.elfsyms`). It is built
with profctl, into the same cache entry (`harness.agent.profctl.build_profctl`), and
deployed beside it; the host keeps the unstripped binary::

    launch = TruthLaunch("chain", cpu=1, ms=1000)
    steps = (*launch_steps((launch,)), wait_step(), *output_steps((launch,)))
    runs = workloads_of(steps, results)      # (WorkloadRun(mode='chain', pid=..., ...),)
    image = read_image(profctl_binary)       # TruthImage: its functions and profctl's text

It is linked at `harness.agent.truth_build.TEXT_BASE`, far from profctl's and any
PIE's addresses, so a user PC in its text is its own whatever process ran it. The
model numbers the WHERE oracle uses (`LEAF_ITERATIONS`, `LEAF_LOOP_INSNS`,
`OUT_OF_LEAF_INSNS`) are read off the C and its disassembly;
`tests/unit/agent/test_truth.py` checks them against a fresh build.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from harness.agent import profctl
from harness.agent.elfsyms import FunctionTable, executable_span, read_functions
from harness.agent.isolation import Isolation
from harness.agent.steps import GUEST_DIR
from harness.agent.truth_build import BINARY_NAME
from harness.errors import InfraError

GUEST_PATH = f"{GUEST_DIR}/truth"
#: The call path of chain mode, innermost first.
CHAIN_PATH = ("leaf", "middle", "outer", "main")
#: Iterations of leaf's loop per call (truth.c LEAF_ITERATIONS) and its instructions
#: per iteration (ldr, add, add, str, cmp, b.ne in the disassembly).
LEAF_ITERATIONS = 1 << 22
LEAF_LOOP_INSNS = 6
#: User instructions between two leaf calls, an upper bound: leaf's prologue and
#: epilogue, middle's loop, now_ns and libc's syscall() add up to about 40.
OUT_OF_LEAF_INSNS = 400
#: The code chain mode runs once it is in outer, until outer returns: leaf, its
#: callers, the clock read and libc's syscall() (WHERE's leaf bound counts samples
#: there; start-up and exit run once, elsewhere, before and after).
CHAIN_PHASE = ("leaf", "middle", "outer", "now_ns", "syscall")
#: hot's iterations per cold's in mix mode (truth.c: hot(3 * SLICE), cold(SLICE)).
MIX_HOT_PARTS, MIX_COLD_PARTS = 3, 1

Mode = Literal["chain", "mix"]


@dataclass(frozen=True, slots=True)
class TruthLaunch:
    """One run of the workload: its mode, pinned to ``cpu``, for ``ms``."""

    mode: Mode
    cpu: int
    ms: int

    @property
    def output(self) -> str:
        """The guest file its lines go to."""
        return f"{GUEST_DIR}/truth-{self.mode}-{self.cpu}.out"


@dataclass(frozen=True, slots=True)
class WorkloadRun:
    """What one launched workload said about itself: who it was and how much it did."""

    mode: Mode
    cpu: int
    pid: int
    tid: int
    calls: int  # leaf calls (chain): each one return to middle and one clock syscall
    rounds: int  # hot+cold rounds (mix)
    faults: int  # its page faults in outer's or mix's call, as the kernel counted (getrusage)
    neighbours: tuple[int, ...] = ()  # pids of the busy loops the steps pinned to its CPU


@dataclass(frozen=True, slots=True)
class TruthImage:
    """The workload's functions and code, and profctl's code (its process before exec).

    ``text`` and ``profctl_text`` are each binary's executable segments: every function
    and the stubs between them (a static binary calls IFUNCs through .iplt).
    """

    functions: FunctionTable
    text: tuple[int, int]
    profctl_text: tuple[int, int]


@dataclass(frozen=True, slots=True)
class TruthEvidence:
    """What a run knows independently of the agent: the workloads, their image, the module.

    ``module``: the agent's functions at their kernel addresses (None: not read; only
    flavours that record kernel call chains need them). ``isolation``: the CPUs the
    harness kept for its own tasks (`harness.agent.isolation.isolated`). ``kernel``:
    the guest kernel's functions from its vmlinux (None: not known; the guest kernel
    does not randomize its base, so link addresses are run addresses).
    """

    workloads: tuple[WorkloadRun, ...] = ()
    image: TruthImage | None = None
    module: FunctionTable | None = None
    isolation: tuple[Isolation, ...] = ()
    kernel: FunctionTable | None = None


def read_image(profctl_binary: Path) -> TruthImage:
    """The workload built beside ``profctl_binary``, and profctl's own text.

    :raise InfraError: a binary is missing or has no symbol table.
    """
    truth = profctl_binary.parent / BINARY_NAME
    if not truth.is_file():
        raise InfraError(f"no ground-truth workload beside {profctl_binary}: a stale build?")
    data = truth.read_bytes()
    return TruthImage(read_functions(data), executable_span(data),
                      executable_span(profctl_binary.read_bytes()))  # fmt: skip


def launch_steps(launches: Sequence[TruthLaunch]) -> tuple[str, ...]:
    """One ``exec`` step per launch (forked from its CPU, output to its file)."""
    return tuple(
        profctl.exec_step(w.cpu, w.output, (GUEST_PATH, w.mode, str(w.cpu), str(w.ms)))
        for w in launches
    )


def output_steps(launches: Sequence[TruthLaunch]) -> tuple[str, ...]:
    """A ``cat`` of each launch's output (after ``wait``)."""
    return tuple(profctl.cat_step(w.output) for w in launches)


def _pairs(lines: Sequence[str]) -> dict[str, str]:
    return dict(word.split("=", 1) for line in lines for word in line.split() if "=" in word)


def workloads_of(
    steps: Sequence[str], results: Sequence[profctl.StepResult]
) -> tuple[WorkloadRun, ...]:
    """The workloads the steps launched, from their output files' lines.

    Each carries the pids of the busy loops (``spin`` steps) pinned to its CPU.

    :raise InfraError: a workload's output lacks its ``pid=`` or ``calls=`` line (it
        did not start or did not finish).
    """
    runs = []
    busy: dict[int, tuple[int, ...]] = {}
    for step, result in zip(steps, results, strict=True):
        if step.startswith("spin:") and result.ok:
            cpu = result.int_value("cpu")
            busy[cpu] = (*busy.get(cpu, ()), result.int_value("pid"))
    for step, result in zip(steps, results, strict=True):
        if not (step.startswith("cat:") and step.endswith(".out") and "/truth-" in step):
            continue
        pairs = _pairs(result.lines)
        if "pid" not in pairs or "calls" not in pairs:
            raise InfraError(f"the ground-truth workload said {result.lines!r} in {step}")
        mode: Mode = "chain" if pairs["mode"] == "chain" else "mix"
        cpu = int(pairs["cpu"])
        runs.append(WorkloadRun(mode, cpu, int(pairs["pid"]), int(pairs["tid"]),
                                int(pairs["calls"]), int(pairs["rounds"]), int(pairs["faults"]),
                                busy.get(cpu, ())))  # fmt: skip
    return tuple(runs)


def place_module(module: FunctionTable, kallsyms: Sequence[str]) -> FunctionTable:
    """The module's functions moved to the addresses ``kallsyms`` lines give them.

    ``kallsyms`` are ``/proc/kallsyms`` lines of the module (``ADDR t NAME [profagent]``);
    a function the kernel does not list (discarded init code) is left out.

    :raise InfraError: no line names a function of the module, or every address is 0
        (``kptr_restrict`` hides them).
    """
    where: dict[str, int] = {}
    for line in kallsyms:
        fields = line.split()
        if len(fields) >= 3 and fields[1] in "tT":
            where[fields[2]] = int(fields[0], 16)
    placed = [f.moved(where[f.name]) for f in module.functions if where.get(f.name)]
    if not placed:
        raise InfraError(f"/proc/kallsyms places no function of the module ({len(kallsyms)} lines)")
    return FunctionTable(tuple(sorted(placed, key=lambda f: f.start)))


class _Launcher(Protocol):
    """What `evidence_of` asks of the agent (`harness.agent.driver.Agent`)."""

    def truth_image(self) -> TruthImage: ...

    def module_functions(self) -> FunctionTable: ...

    def kernel_functions(self) -> FunctionTable | None: ...


def evidence_of(
    agent: _Launcher,
    steps: Sequence[str],
    results: Sequence[profctl.StepResult],
    *,
    chains: bool = True,
) -> TruthEvidence | None:
    """The ground-truth evidence of a run: None when ``steps`` launched no workload.

    The workloads, their image and, for a flavour that records call chains
    (``chains``), the module's functions at their kernel addresses.
    """
    workloads = workloads_of(steps, results)
    if not workloads:
        return None
    module = agent.module_functions() if chains else None
    kernel = agent.kernel_functions() if chains else None
    return TruthEvidence(workloads, agent.truth_image(), module, kernel=kernel)
