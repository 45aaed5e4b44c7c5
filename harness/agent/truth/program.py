"""The ground-truth workload: its model, how it is launched, and what a run of it was.

``guest/workloads/truth.c`` is a static arm64 program whose functions and call path
the harness reads from its own symbol table (`harness.agent.truth.elfsyms`). It is built
with profctl, into the same cache entry (`harness.agent.profctl_build.build_profctl`), and
deployed beside it; the host keeps the unstripped binary::

    launch = TruthLaunch("chain", cpu=1, ms=1000)
    steps = (*launch_steps((launch,)), wait_step(), *output_steps((launch,)))
    runs = workloads_of(steps, results)      # (WorkloadRun(kind='chain', pid=..., ...),)
    image = read_image(profctl_binary)       # TruthImage: its functions and profctl's text

It is linked at `harness.agent.truth.build.TEXT_BASE`, far from profctl's and any
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
from harness.agent.steps import GUEST_DIR
from harness.agent.truth.build import TRUTH_BINARY
from harness.agent.truth.elfsyms import FunctionTable, executable_span, read_functions
from harness.agent.truth.isolation import Isolation
from harness.errors import InfraError

GUEST_PATH = f"{GUEST_DIR}/truth"
#: The call path of the chain workload, innermost first (work: the thread's body, truth.c).
CHAIN_PATH = ("leaf", "middle", "outer", "work", "main")
#: Iterations of leaf's loop per call (truth.c LEAF_ITERATIONS) and its instructions
#: per iteration (ldr, add, add, str, cmp, b.ne in the disassembly).
LEAF_ITERATIONS = 1 << 22
LEAF_LOOP_INSNS = 6
#: User instructions between two leaf calls, an upper bound: leaf's prologue and
#: epilogue, middle's loop, now_ns and libc's syscall() add up to about 40.
OUT_OF_LEAF_INSNS = 400
#: The code the chain workload runs once it is in outer, until outer returns: leaf, its
#: callers, the clock read and libc's syscall() (WHERE's leaf bound counts samples
#: there; start-up and exit run once, elsewhere, before and after).
CHAIN_PHASE = ("leaf", "middle", "outer", "now_ns", "syscall")
#: hot's iterations per cold's in the mix workload (truth.c: hot(3 * SLICE), cold(SLICE)).
MIX_HOT_PARTS, MIX_COLD_PARTS = 3, 1
#: The code the mix workload runs in its phase: mix, hot, cold, the clock read and syscall().
MIX_PHASE = ("mix", "hot", "cold", "now_ns", "syscall")


class TruthIncomplete(InfraError):
    """A workload's output lacks its closing lines: it had not finished its phase when read.

    Its phase is guest time; a guest starved of host time (a loaded host, or the witness
    stopping it at every overflow) may not reach its end before the run reads it.
    """


#: Functions only the thread that does a kind's work runs (WHO judges its tid there).
WORKER_ONLY = {"chain": ("leaf", "middle", "outer"), "mix": ("mix", "hot", "cold"),
               "zero": ("zero",), "lanes": ()}  # fmt: skip
#: Where the zero workload's kernel time lies: the kernel's loop that zeroes a user buffer
#: (arm64 6.1 and 6.12: ``__arch_clear_user``, 4 instructions per 8 bytes, called by
#: read_zero once a 4 KiB page), read from ``/proc/kallsyms`` with the symbol after it.
KERNEL_ZERO = "__arch_clear_user"
#: The core kernel functions the truth names, read from /proc/kallsyms at every load.
KERNEL_NAMES = (KERNEL_ZERO,)
#: WHERE's kernel half: the share of the zero workload's kernel samples outside KERNEL_ZERO is
#: at most this. Per 4 KiB page the loop runs 2048 instructions; read_zero's page
#: loop, clear_user's user-access toggles, the syscall's entry and exit and vfs_read
#: add about 60 per page (15 000 per 1 MiB read, 256 pages): 3 % of the loop's. But
#: the vCPU's timer ticks (HZ 250), IPIs and rescheduling are paced by the host's
#: clock: a vCPU that gets a quarter of a host core (8 vCPUs on 2) spends a larger
#: share of its instructions there. Measured outside the loop: 18-34 % on 1 and 2
#: vCPUs, 35-51 % on 8 (2s2cl1c2t, this host quiet); so a bound of 3/4, which leaves
#: the 8-vCPU runs' bound near 0 (their 65-94 samples): the half bites on 1 and 2 vCPUs.
#: kprof's population is every task's kernel samples on that CPU (its kernel traces carry
#: no pid): 55 % outside on 2 vCPUs (76 samples) and 30 % on 8 (30), on a host loaded
#: about four times its cores, so the same bound holds it.
KERNEL_OUT_SHARE = 0.75
#: Kernel options that lengthen the read path beyond that model (their instrumentation,
#: their runtimes): on a kernel built with one, WHERE's kernel half is not judged.
KERNEL_SANITIZERS = ("CONFIG_KASAN", "CONFIG_UBSAN", "CONFIG_KCSAN")


def sanitizers_of(vmlinux: Path | None) -> tuple[str, ...]:
    """`KERNEL_SANITIZERS` in the ``.config`` beside ``vmlinux`` (none known without one)."""
    config = vmlinux.parent / ".config" if vmlinux is not None else None
    if config is None or not config.is_file():
        return ()
    lines = set(config.read_text().splitlines())
    return tuple(name for name in KERNEL_SANITIZERS if f"{name}=y" in lines)


#: The mix workload's user instructions per round outside hot and cold, an upper bound: the
#: xorshift step, the slice and two calls (about 20), and one clock read (now_ns and
#: syscall(), about 40) every MIX_ROUNDS_PER_CLOCK rounds.
MIX_OUT_INSNS = 64
#: The mix workload's fewest instructions in hot and cold per round: 4 × the smallest slice
#: (MIX_SLICE / 2 = 2048) iterations of the 6-instruction loop leaf also has.
MIX_ROUND_INSNS = 4 * 2048 * LEAF_LOOP_INSNS
#: Rounds per clock read in the mix workload (truth.c MIX_ROUNDS_PER_CLOCK).
MIX_ROUNDS_PER_CLOCK = 256
#: A workload's life outside its phase, upper bounds: the user instructions of
#: profctl's child between fork and exec, static glibc's start-up, main, the worker
#: thread's start and exit (``LIFE_INSNS``), and the system calls among them, per kind
#: (``LIFE_SYSCALLS``; its page faults it counts itself, ``life_faults``). Where
#: samples carry no time (tprof) WHERE's population is the workload's whole life, and
#: these widen its bound. Measured on the host under qemu-aarch64 (-singlestep, one
#: trace line an instruction; -strace): chain 27 362 instructions and 25 system calls
#: with no phase, mix 31 554 and 46 (its thread); profctl's child adds a few hundred
#: and 4 (`tests/unit/agent/test_truth_model.py` measures them on every build). One
#: bound of 64 for both left a chain population of 196 whole-life samples (tprof, 8
#: vCPUs) a bound of 0: 2 x 64 of its samples might have been system calls it never made.
#: Zero's and lanes' lives are not WHERE's whole-life populations: they keep mix's 64.
LIFE_INSNS = 100_000
LIFE_SYSCALLS: dict[str, int] = {"chain": 32, "mix": 64, "zero": 64, "lanes": 64}

Kind = Literal["chain", "mix", "zero", "lanes"]
KINDS: tuple[Kind, ...] = ("chain", "mix", "zero", "lanes")
#: The lanes workload's threads, at most (truth.c LANES_MAX): thread k spins in ``lane{k}``.
LANES_MAX = 8


@dataclass(frozen=True, slots=True)
class TruthLaunch:
    """One run of the workload: its kind, pinned to ``cpu``, for ``ms``.

    ``lanes``: the lanes workload's CPUs, one thread each (main waits on ``cpu``).
    """

    kind: Kind
    cpu: int
    ms: int
    lanes: tuple[int, ...] = ()

    @property
    def argv(self) -> tuple[str, ...]:
        """The workload's command line."""
        lanes = (",".join(map(str, self.lanes)),) if self.kind == "lanes" else ()
        return (GUEST_PATH, self.kind, str(self.cpu), str(self.ms), *lanes)

    @property
    def output(self) -> str:
        """The guest file its lines go to."""
        return f"{GUEST_DIR}/truth-{self.kind}-{self.cpu}.out"


@dataclass(frozen=True, slots=True)
class WorkloadRun:
    """What one launched workload said about itself: who it was and how much it did."""

    kind: Kind
    cpu: int
    pid: int
    tid: int
    calls: int  # leaf calls (chain): each one return to middle and one clock syscall
    rounds: int  # hot+cold rounds (mix)
    faults: int  # its page faults in outer's or mix's call, as the kernel counted (getrusage)
    neighbours: tuple[int, ...] = ()  # pids of the busy loops the steps pinned to its CPU
    #: CLOCK_MONOTONIC just before its phase (outer's or mix's call) and just after it, as
    #: the workload read it: the clock the agents stamp samples with (ktime_get_mono_fast_ns).
    span: tuple[int, int] = (0, 0)
    #: Page faults of the whole process since profctl forked it (exec keeps the count).
    life_faults: int = 0
    #: The lanes workload: (CPU, tid) of thread k at index k, each spinning in ``lane{k}``.
    lanes: tuple[tuple[int, int], ...] = ()

    @property
    def threads(self) -> frozenset[tuple[int, int]]:
        """(pid, tid) of its threads on its CPU: main's (tid = pid), the worker's."""
        return frozenset({(self.pid, self.pid), (self.pid, self.tid)})

    def threads_on(self, cpu: int) -> frozenset[tuple[int, int]]:
        """(pid, tid) of its threads that run on ``cpu``.

        `threads` on its own CPU; a lane's on its CPU, where main runs too, to create
        it from there (truth.c).
        """
        lanes = frozenset((self.pid, tid) for at, tid in self.lanes if at == cpu)
        main = frozenset({(self.pid, self.pid)}) if lanes else frozenset()
        return (self.threads if cpu == self.cpu else frozenset()) | lanes | main

    def during(self, time_ns: int) -> bool:
        """Whether ``time_ns`` (guest CLOCK_MONOTONIC) lies in its phase."""
        return self.span[0] <= time_ns <= self.span[1]


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
    harness kept for its own tasks (`harness.agent.truth.isolation.isolated`). ``kernel``:
    the guest kernel's functions from its vmlinux (None: not known; the guest kernel
    does not randomize its base, so link addresses are run addresses). ``zeroing``:
    the core kernel's functions the zero workload's kernel time lies in (`KERNEL_ZERO`).
    """

    workloads: tuple[WorkloadRun, ...] = ()
    image: TruthImage | None = None
    module: FunctionTable | None = None
    isolation: tuple[Isolation, ...] = ()
    kernel: FunctionTable | None = None
    #: Core kernel functions a workload's kernel time lies in (the zero workload: `KERNEL_ZERO`),
    #: where ``/proc/kallsyms`` puts them; None: no such workload ran.
    zeroing: FunctionTable | None = None
    #: Why the zero workload's kernel model does not hold in this guest ("": it holds).
    unmodelled: str = ""


def read_image(profctl_binary: Path) -> TruthImage:
    """The workload built beside ``profctl_binary``, and profctl's own text.

    :raise InfraError: a binary is missing or has no symbol table.
    """
    truth = profctl_binary.parent / TRUTH_BINARY
    if not truth.is_file():
        raise InfraError(f"no ground-truth workload beside {profctl_binary}: a stale build?")
    data = truth.read_bytes()
    return TruthImage(read_functions(data), executable_span(data),
                      executable_span(profctl_binary.read_bytes()))  # fmt: skip


def standard_launches(cpus: Sequence[int], ms: int) -> tuple[TruthLaunch, ...]:
    """The standard runs' workloads: chain and zero on the last CPU, mix on the first.

    With three CPUs or more, lanes on the CPUs between (at most `LANES_MAX`): a thread
    each, so WHO judges the tid and CPU of several threads of one process at once.
    """
    middle = tuple(cpus[1:-1])[:LANES_MAX]
    lanes = (TruthLaunch("lanes", middle[0], ms, middle),) if middle else ()
    return (TruthLaunch("chain", cpus[-1], ms), TruthLaunch("mix", cpus[0], ms),
            TruthLaunch("zero", cpus[-1], ms), *lanes)  # fmt: skip


def launch_steps(launches: Sequence[TruthLaunch]) -> tuple[str, ...]:
    """One ``exec`` step per launch (forked from its CPU, output to its file)."""
    return tuple(profctl.exec_step(w.cpu, w.output, w.argv) for w in launches)


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
        if not {"pid", "calls", "begin_ns", "end_ns", "life_faults"} <= pairs.keys():
            raise TruthIncomplete(f"the ground-truth workload said {result.lines!r} in {step}")
        kind = next((m for m in KINDS if m == pairs["kind"]), None)
        if kind is None:
            raise InfraError(f"the ground-truth workload ran kind {pairs['kind']!r} in {step}")
        cpu = int(pairs["cpu"])
        runs.append(WorkloadRun(kind, cpu, int(pairs["pid"]), int(pairs["tid"]),
                                int(pairs["calls"]), int(pairs["rounds"]), int(pairs["faults"]),
                                busy.get(cpu, ()),
                                (int(pairs["begin_ns"]), int(pairs["end_ns"])),
                                int(pairs["life_faults"]), _lanes(result.lines, step)))  # fmt: skip
    return tuple(runs)


def _lanes(lines: Sequence[str], step: str) -> tuple[tuple[int, int], ...]:
    """The lanes workload's ``lane=k lane_tid=N lane_cpu=N`` lines: (CPU, tid) by k.

    :raise InfraError: the lanes are not numbered 0, 1, ... (one did not start).
    """
    found = {}
    for line in lines:
        if line.startswith("lane="):
            pairs = _pairs([line])
            found[int(pairs["lane"])] = (int(pairs["lane_cpu"]), int(pairs["lane_tid"]))
    if sorted(found) != list(range(len(found))):
        raise InfraError(f"the lanes of {step} said {sorted(found)}: one did not start")
    return tuple(found[k] for k in range(len(found)))


class _Launcher(Protocol):
    """What `evidence_of` asks of the agent (`harness.agent.driver.Agent`)."""

    def truth_image(self) -> TruthImage: ...

    def module_functions(self) -> FunctionTable: ...

    def kallsyms_functions(self, names: Sequence[str]) -> FunctionTable: ...

    def kernel_functions(self) -> FunctionTable | None: ...

    def kernel_sanitizers(self) -> tuple[str, ...]: ...


def evidence_of(
    agent: _Launcher,
    steps: Sequence[str],
    results: Sequence[profctl.StepResult],
    *,
    chains: bool,
) -> TruthEvidence | None:
    """The ground-truth evidence of a run: None when ``steps`` launched no workload.

    The workloads, their image and, for a flavour that records call chains
    (``chains``: its `FlavourInfo.records_chains`), the module's functions at their
    kernel addresses.
    """
    workloads = workloads_of(steps, results)
    if not workloads:
        return None
    module = agent.module_functions() if chains else None
    kernel = agent.kernel_functions() if chains else None
    zero = any(w.kind == "zero" for w in workloads)
    zeroing = agent.kallsyms_functions((KERNEL_ZERO,)) if zero else None
    sanitizers = agent.kernel_sanitizers() if zero else ()
    unmodelled = (f"the guest kernel is built with {', '.join(sanitizers)}: its read path is "
                  "not the one KERNEL_OUT_SHARE models") if sanitizers else ""  # fmt: skip
    return TruthEvidence(workloads, agent.truth_image(), module, kernel=kernel, zeroing=zeroing,
                         unmodelled=unmodelled)  # fmt: skip
