r"""Content oracles: each sample's mode, owner, place and call chain, against ground truth.

Pure. The ground truth is the workload the harness launched (`harness.agent.truth.program`:
its pid and tid as it printed them, its functions from its own symbol table) and the
agent's own functions at their kernel addresses (``/proc/kallsyms``), never a number
the agent derived::

    view = ContentView(samples, workloads, image, chain_depth=None)
    violations = check_content(view)           # MODE, WHO, WHERE (CHAIN: not applicable)
    content_numbers(view)["content.chain.leaf"]

**MODE** (exact, every sample): the user/kernel flag agrees with the PC's half of the
address space (arm64: top 16 bits clear for user, set for kernel).

Every oracle says what it compared (`judge_content`, `harness.agent.oracles.results.Judged`):
``PASS`` only with n > 0; a half that compared nothing is ``UNJUDGED`` with the reason.
Each population below is chosen by evidence the agent does not write, or does not
have judged by the oracle that selects with it: the CPU and pid the workload printed,
the time span it read on the guest clock, the isolation's task lists.

**WHO** (exact): *text half*: a user sample whose PC lies in the workload's text
(linked at `harness.agent.truth.build.TEXT_BASE`, where nothing else in the guest maps code)
carries the pid and the tid of a thread of a workload pinned to that CPU (main's, tid
= pid, or its worker's). *Thread half* (flavours that record a tid): a sample of the
workload's pid in code only its working thread runs (`truth.WORKER_ONLY`: mix runs in
a second thread, tid ≠ pid) carries that thread's tid, as the workload printed it
(population: pid and PC, never the tid judged). *Lanes half* (three CPUs or more): a
sample of the lanes workload's pid in ``lane{k}``, the function only its thread k runs,
was taken on the CPU that thread was pinned to and carries its tid, as the thread
printed them (population: pid and PC; kprof records no tid: its CPU is still judged).
*Exclusive half*: on a CPU the harness
kept for its own tasks (`harness.agent.truth.isolation`: every other user task moved off it
before the run, profctl included, and every live user task's Cpus_allowed_list read
after it), every user sample carries the pid (and tid, where recorded) of a task the
harness pinned there: the workload's threads, or a busy loop the flavour's standard
run spins beside it (population: the CPU). A CPU where a task could not be moved, or
where one that is not the harness's was allowed after the run, is not exclusive: the
half is not applicable there, and the report says why. With one CPU nothing is
isolated.

**WHERE**: (exact) a user sample of the workload's pid lies in its text, or in
profctl's (the child between fork and exec); (bound) of the workload's `population`
(every user sample with its pid on its CPU inside the span of its phase that the
workload read on the guest clock, or its whole life where the flavour's records carry
no time: a wrong PC cannot leave the count it is judged in), ``leaf`` holds at least
as many as this model allows:

* *Instruction mix.* Per leaf call, leaf runs ``LEAF_ITERATIONS × LEAF_LOOP_INSNS``
  (2^22 × 6) instructions, everything else of the workload's user code at most
  ``OUT_OF_LEAF_INSNS`` (400); over a whole life add ``LIFE_INSNS`` (start-up, the
  thread, exit; measured under qemu-aarch64). A timer-delivered overflow is noticed at
  a translation block boundary, with probability proportional to host time; let one
  instruction outside leaf cost up to ``COST_RATIO`` (100) times one of leaf's (cold
  code, block lookups). So a timer-delivered sample lies outside leaf with probability
  at most p = 100 × (400 × calls + life) / (calls × 2^22 × 6) ≈ 0.0016 in the phase.
* *When TCG delivers.* QEMU 7.2 also notices a pending overflow at an exception-level
  change or a PMU register access. The workload touches no PMU register; its EL changes
  that can put a sample outside leaf are its system calls and page faults, two each
  (entry and return): in the phase at most 2 × (calls + 2 + faults) samples, with
  calls and faults as the workload reported them (getrusage: the kernel's count); over
  a whole life add ``LIFE_SYSCALLS`` and every fault of its life. Interrupts of leaf
  itself put a sample in leaf or in the kernel, never elsewhere in user code.
* So of the n samples of the population, leaf holds at least n - (EL changes) - Q,
  where Q is the upper ``1 - ALPHA`` quantile of Binomial(n, p): a false alarm at most
  ``ALPHA`` = 1e-6 per run, under the model.

Mix mode, the same model (`mix_bound`): of its population's m samples, hot and cold
hold at least m - (EL changes) - Q, with ``MIX_OUT_INSNS`` per round outside them
against ``MIX_ROUND_INSNS`` inside. Hot and cold run the same body, hot 3 parts, cold
1, each round's slice drawn at random (2048 to 6143 iterations), so a sampling clock as
regular as TCG's cannot alias with a fixed round length and consecutive samples fall
at independent phases; of the samples in either, hot's count lies within the
two-sided ``ALPHA`` interval of Binomial(·, 3/4), widened by 2 on each side for the
page faults of the first call of each.

**CHAIN** (flavours that record chains; ``chain_depth`` frames at most, the PC
included): no chain is longer than that; a chain says truncated only when it is that
long; a user sample of the chain workload where leaf's frame record is set up
(`Function.framed`: a PC in the prologue or epilogue has the caller's record in x29,
and a frame-pointer walk skips one frame there, as Linux perf's does) carries
``middle, outer, work, main`` next (as far as the depth allows, truncated when it cuts
them); a kernel sample inside ``pa_probe_spin``'s framed body carries
``pa_probe_middle, pa_probe_outer`` next. Return addresses are looked up at
address - 1 (the call instruction's function). Every frame of every chain whose code
is known (`harness.agent.oracles.frames`: user samples of the workloads' pids against the
workload, kernel samples against the module and vmlinux): each return address follows
a call, a direct one to the frame below's function. Where the record holds the walk's
frame count and stop cause (dt, hwpmc), those decide "longer than the depth" and
"truncated", and the records' stop causes stay within the core's per-CPU counts
(`harness.agent.oracles.walks`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.agent.oracles.frames import FrameVerdict, judge_frames
from harness.agent.oracles.laws import at_least, zero
from harness.agent.oracles.report import verdict_lines
from harness.agent.oracles.results import Judged, Violation
from harness.agent.oracles.samples import Sample, kernel_address, user_address
from harness.agent.oracles.walks import WALKED, CoreWalks, check_walks, length_of, walk_numbers
from harness.agent.truth import program
from harness.agent.truth.elfsyms import FunctionTable
from harness.agent.truth.isolation import Isolation

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
ALPHA = 1e-6
COST_RATIO = 100
PROBE_PATH = ("pa_probe_spin", "pa_probe_middle", "pa_probe_outer")
_FAULT_SLACK = 2  # mix: the page faults of hot's and cold's first calls


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


def oracles_for(chains: bool) -> tuple[tuple[str, str], ...]:
    """The content oracles of a flavour that records call chains or not."""
    return tuple(o for o in CONTENT_ORACLES if chains or o[0] != "CHAIN")


def applicable_content(view: ContentView) -> frozenset[str]:
    """The content oracles ``view`` can be judged by."""
    names = {"MODE"}
    if view.image is not None and view.workloads:
        names |= {"WHO", "WHERE"}
    if view.chain_depth is not None:
        names.add("CHAIN")
    return frozenset(names)


def check_content(view: ContentView) -> list[Violation]:
    """Every content law ``view`` breaks (empty: all applicable ones held)."""
    applicable = applicable_content(view)
    out = check_mode(view.samples)
    if "WHO" in applicable:
        out += check_who(view)
        out += check_where(view)
    if "CHAIN" in applicable:
        out += check_chain(view)
    return out


def check_mode(samples: Sequence[Sample]) -> list[Violation]:
    """MODE: the flag of every sample matches its PC's half of the address space."""
    bad = Counter(s.cpu for s in samples
                  if not (user_address(s.pc) if s.user else kernel_address(s.pc)))  # fmt: skip
    return [v for cpu, n in sorted(bad.items()) for v in zero(
        "MODE", cpu, "samples whose mode flag disagrees with their PC", got=n,
        detail=_example(samples, cpu, lambda s: not (user_address(s.pc) if s.user
                                                     else kernel_address(s.pc))))]  # fmt: skip


def _example(samples: Sequence[Sample], cpu: int, wrong: Callable[[Sample], bool]) -> str:
    first = next(s for s in samples if s.cpu == cpu and wrong(s))
    mode = "user" if first.user else "kernel"
    return f"first: pc {first.pc:#x} flagged {mode}, pid {first.pid} tid {first.tid}"


def _in_text(view: ContentView, sample: Sample) -> bool:
    assert view.image is not None
    low, high = view.image.text
    return sample.user and low <= sample.pc < high


def _owned(view: ContentView, sample: Sample) -> bool:
    """Whether a thread of a workload pinned to the sample's CPU has its pid (and tid)."""
    return any(_harness_owned(w.threads_on(sample.cpu), sample) for w in view.workloads)


def worker_samples(view: ContentView, workload: program.WorkloadRun) -> list[Sample]:
    """WHO's thread half: samples of ``workload``'s pid in code only its working thread runs.

    Its population is chosen by the pid and the PC, never by the tid it judges.
    """
    assert view.image is not None
    only = [view.image.functions.named(name) for name in program.WORKER_ONLY[workload.mode]]
    return [s for s in view.samples if s.user and s.pid == workload.pid and s.tid is not None
            and any(f.holds(s.pc) for f in only)]  # fmt: skip


def check_who(view: ContentView) -> list[Violation]:
    """WHO: text samples carry a workload thread's ids, worker-only code the worker's tid.

    Exclusive CPUs: `check_exclusive`.
    """
    bad = Counter(s.cpu for s in view.samples if _in_text(view, s) and not _owned(view, s))
    out = [v for cpu, n in sorted(bad.items()) for v in zero(
        "WHO", cpu, "samples in the workload's text with another pid/tid", got=n,
        detail=_example(view.samples, cpu, lambda s: _in_text(view, s)
                        and not _owned(view, s)))]  # fmt: skip
    for w in view.workloads:
        wrong = [s for s in worker_samples(view, w) if s.tid != w.tid]
        if wrong:
            first = wrong[0]
            out += zero("WHO", w.cpu, f"samples in {w.mode}'s worker code with another tid than "
                        f"{w.tid}", got=len(wrong),
                        detail=f"first: pid {first.pid} tid {first.tid} pc {first.pc:#x}; "
                        f"the worker printed tid {w.tid}, its process pid {w.pid}")  # fmt: skip
    return out + check_lanes(view) + check_exclusive(view)


def lane_samples(view: ContentView, workload: program.WorkloadRun) -> list[tuple[int, Sample]]:
    """WHO's lanes half: (k, sample) for each user sample of the pid in ``lane{k}``.

    Chosen by pid and PC (the function only thread k runs), never by the tid or CPU
    it judges.
    """
    assert view.image is not None
    found = []
    for k in range(len(workload.lanes)):
        lane = view.image.functions.named(f"lane{k}")
        found += [(k, s) for s in view.samples
                  if s.user and s.pid == workload.pid and lane.holds(s.pc)]  # fmt: skip
    return found


def check_lanes(view: ContentView) -> list[Violation]:
    """WHO's lanes half: a sample in ``lane{k}`` ran on lane k's CPU, in lane k's thread.

    Where the flavour records no tid (kprof), its CPU (and, by the population, its
    pid) is still judged.
    """
    out: list[Violation] = []
    for w in view.workloads:
        wrong = [
            (k, s)
            for k, s in lane_samples(view, w)
            if s.cpu != w.lanes[k][0] or (s.tid is not None and s.tid != w.lanes[k][1])
        ]
        if wrong:
            k, first = wrong[0]
            cpu, tid = w.lanes[k]
            out += zero("WHO", first.cpu, "samples in a lane's function off its thread or CPU",
                        got=len(wrong), detail=f"first: lane{k} sampled on CPU {first.cpu} "
                        f"tid {first.tid}; lane {k} printed CPU {cpu} tid {tid}")  # fmt: skip
    return out


def harness_tasks(view: ContentView, cpu: int) -> frozenset[tuple[int, int]]:
    """(pid, tid) of each task the harness pinned to ``cpu``: workloads' threads, busy loops."""
    return frozenset(
        (p, t)
        for w in view.workloads
        for p, t in (*w.threads_on(cpu), *((n, n) for n in (w.neighbours if w.cpu == cpu else ())))
    )


def _harness_owned(tasks: frozenset[tuple[int, int]], sample: Sample) -> bool:
    return any(p == sample.pid and (sample.tid is None or t == sample.tid) for p, t in tasks)


def exclusive_samples(view: ContentView, cpu: int) -> tuple[list[Sample], list[Sample]]:
    """The user samples on ``cpu``, and those of them no harness task there carries."""
    tasks = harness_tasks(view, cpu)
    user = [s for s in view.samples if s.user and s.cpu == cpu]
    return user, [s for s in user if not _harness_owned(tasks, s)]


def check_exclusive(view: ContentView) -> list[Violation]:
    """WHO's exclusive half: on a CPU kept for the harness's tasks, every user sample is theirs.

    Exact: only those tasks could run user code there (the isolation's evidence, not
    the agent's); a CPU that is not exclusive is not judged.
    """
    out: list[Violation] = []
    for iso in view.isolation:
        if not iso.exclusive:
            continue
        _, foreign = exclusive_samples(view, iso.cpu)
        first = f"first: pid {foreign[0].pid} tid {foreign[0].tid} pc {foreign[0].pc:#x}; " \
            if foreign else ""  # fmt: skip
        out += zero("WHO", iso.cpu, "user samples on the isolated CPU not the harness's tasks'",
                    got=len(foreign), detail=f"{first}{iso.describe()}")  # fmt: skip
    return out


def binomial_upper(n: int, p: float, alpha: float) -> int:
    """The smallest k with P[Binomial(n, p) > k] ≤ ``alpha``."""
    if p <= 0 or n == 0:
        return 0
    if p >= 1:
        return n
    log_p, log_q = math.log(p), math.log1p(-p)
    tail, k = 1.0, 0
    for k in range(n + 1):
        tail -= math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                         + k * log_p + (n - k) * log_q)  # fmt: skip
        if tail <= alpha:
            return k
    return n


def mix_interval(m: int) -> tuple[int, int]:
    """WHERE's two-sided interval for hot's samples of ``m`` in hot or cold."""
    share = program.MIX_HOT_PARTS / (program.MIX_HOT_PARTS + program.MIX_COLD_PARTS)
    high = binomial_upper(m, share, ALPHA / 2)
    low = m - binomial_upper(m, 1 - share, ALPHA / 2)
    return (max(0, low - _FAULT_SLACK), min(m, high + _FAULT_SLACK))


def timed(view: ContentView) -> bool:
    """Whether the run's samples carry a time (dt, kprof, hwpmc; tprof's records have none)."""
    return any(s.time_ns is not None for s in view.samples)


def population(view: ContentView, workload: program.WorkloadRun) -> list[Sample]:
    """WHERE's population for ``workload``: its user samples, chosen by pid, CPU and time.

    Every user sample with the workload's pid on its CPU, inside its phase's span on
    the guest clock (`WorkloadRun.span`, the workload's own reading) where samples
    carry a time, over its whole life where they do not. Never by PC: a wrong PC
    cannot take its sample out of the count it is judged in.
    """
    return [s for s in view.samples
            if s.user and s.pid == workload.pid and s.cpu == workload.cpu
            and (s.time_ns is None or workload.during(s.time_ns))]  # fmt: skip


def kernel_population(view: ContentView, workload: program.WorkloadRun) -> list[Sample] | None:
    """WHERE's kernel half for a zero workload: its kernel samples, by pid, CPU and time.

    Every kernel sample with its pid on its CPU inside its phase (its whole life where
    samples carry no time); None where it cannot be chosen so: the kernel's functions
    were not read, the flavour's kernel samples carry no pid (kprof), or the model does
    not hold in this guest (``view.unmodelled``: a sanitizer kernel).
    """
    if (workload.mode != "zero" or view.zeroing is None or not view.kernel_pids
            or view.unmodelled):  # fmt: skip
        return None
    return [s for s in view.samples
            if not s.user and s.pid == workload.pid and s.cpu == workload.cpu
            and (s.time_ns is None or workload.during(s.time_ns))]  # fmt: skip


def zero_bound(n: int) -> int:
    """WHERE's lower bound on zero's kernel samples in `truth.KERNEL_ZERO`, of ``n``."""
    return max(0, n - binomial_upper(n, program.KERNEL_OUT_SHARE, ALPHA))


def _in_zero(view: ContentView, samples: Sequence[Sample]) -> int:
    assert view.zeroing is not None
    loop = view.zeroing.named(program.KERNEL_ZERO)
    return sum(1 for s in samples if loop.holds(s.pc))


def _life(view: ContentView, workload: program.WorkloadRun) -> tuple[int, int]:
    """(instructions, exceptions) of a workload's life outside its phase, where untimed.

    Exceptions: its system calls outside the phase and every page fault of its life.
    """
    if timed(view):
        return (0, 0)
    return (program.LIFE_INSNS, program.LIFE_SYSCALLS + workload.life_faults)


def leaf_bound(n: int, workload: program.WorkloadRun, life: tuple[int, int] = (0, 0)) -> int:
    """WHERE's lower bound on samples in leaf, of ``n`` in the chain workload's population.

    ``life``: (instructions, syscalls) outside the phase that the population also
    covers (its whole life, where samples carry no time); (0, 0) for the phase alone.
    """
    calls = max(workload.calls, 1)
    out_insns = program.OUT_OF_LEAF_INSNS * calls + life[0]
    p_out = COST_RATIO * out_insns / (calls * program.LEAF_ITERATIONS * program.LEAF_LOOP_INSNS)
    el_changes = 2 * (workload.calls + 2 + workload.faults + life[1])
    return max(0, n - el_changes - binomial_upper(n, min(p_out, 1.0), ALPHA))


def mix_bound(m: int, workload: program.WorkloadRun, life: tuple[int, int] = (0, 0)) -> int:
    """WHERE's lower bound on samples in hot or cold, of ``m`` in the mix population."""
    rounds = max(workload.rounds, 1)
    out_insns = program.MIX_OUT_INSNS * rounds + life[0]
    p_out = COST_RATIO * out_insns / (rounds * program.MIX_ROUND_INSNS)
    clocks = workload.rounds // program.MIX_ROUNDS_PER_CLOCK + 2
    el_changes = 2 * (clocks + workload.faults + life[1])
    return max(0, m - el_changes - binomial_upper(m, min(p_out, 1.0), ALPHA))


def _counts(view: ContentView, samples: Sequence[Sample]) -> Counter[str]:
    assert view.image is not None
    names: Counter[str] = Counter()
    for s in samples:
        found = view.image.functions.at(s.pc) if _in_text(view, s) else None
        names[found.name if found else "?"] += 1
    return names


def check_where(view: ContentView) -> list[Violation]:
    """WHERE: the workload's user samples lie in its text, and in leaf / hot as modelled.

    The modelled halves judge `population` (pid, CPU and time, never the PC).
    """
    assert view.image is not None
    pids = {w.pid for w in view.workloads}
    text, profctl_text = view.image.text, view.image.profctl_text
    stray = Counter(s.cpu for s in view.samples if s.user and s.pid in pids
                    and not any(lo <= s.pc < hi for lo, hi in (text, profctl_text)))  # fmt: skip
    out = [v for cpu, n in sorted(stray.items()) for v in zero(
        "WHERE", cpu, "workload user samples outside its text", got=n,
        detail="neither the workload's text nor profctl's (before exec)")]  # fmt: skip
    span = "its whole life" if not timed(view) else "its phase"
    for w in view.workloads:
        if w.mode == "zero":  # its kernel half only: its user code runs a few calls a read
            kernel = kernel_population(view, w)
            if kernel is not None:
                out += at_least("WHERE", w.cpu, f"kernel samples in {program.KERNEL_ZERO} (of "
                                f"{len(kernel)} of pid {w.pid} in {span})",
                                bound=zero_bound(len(kernel)), got=_in_zero(view, kernel),
                                detail=f"model: at most {program.KERNEL_OUT_SHARE:.0%} outside "
                                f"the kernel's zeroing loop; {w.calls} reads")  # fmt: skip
            continue
        if w.mode == "lanes":  # judged by WHO's lanes half: who ran there, not how much
            continue
        chosen, life = population(view, w), _life(view, w)
        names, n = _counts(view, chosen), len(chosen)
        if w.mode == "chain":
            out += at_least("WHERE", w.cpu, f"samples in leaf (of {n} of pid {w.pid} in {span})",
                            bound=leaf_bound(n, w, life), got=names["leaf"],
                            detail=f"model: {w.calls} leaf calls, {w.faults} faults")  # fmt: skip
            continue
        m = names["hot"] + names["cold"]
        out += at_least("WHERE", w.cpu, f"samples in hot or cold (of {n} of pid {w.pid} in "
                        f"{span})", bound=mix_bound(n, w, life), got=m,
                        detail=f"model: {w.rounds} rounds, {w.faults} faults")  # fmt: skip
        low, high = mix_interval(m)
        for name, bound in (("hot", low), ("cold", m - high)):
            what = f"samples in {name} (of {m} in hot or cold)"
            out += at_least("WHERE", w.cpu, what, bound=bound, got=names[name],
                            detail="3:1 mix, two-sided")  # fmt: skip
    return out


def judge_content(view: ContentView) -> list[Judged]:
    """What each applicable content oracle compared (`Judged`; n = 0: UNJUDGED, with why).

    MODE: every sample. WHO: the samples in the workload's text, those in code only a
    worker thread runs (where the flavour records a tid), every user sample on each
    CPU kept for the harness. WHERE: each workload's `population`. CHAIN: every
    chain (depth), and the leaf and probe samples whose callers are known.
    """
    applicable = applicable_content(view)
    found = [Judged("MODE", len(view.samples), "samples", why="the run recorded no sample")]
    if "WHO" in applicable:
        found += _judge_who(view)
        span = "its phase" if timed(view) else "its whole life"
        found += [Judged("WHERE", len(population(view, w)), f"user samples of pid {w.pid} on "
                         f"CPU {w.cpu} in {span}", why="none recorded", part=w.mode)
                  for w in view.workloads if w.mode in ("chain", "mix")]  # fmt: skip
        for w in view.workloads:
            kernel = kernel_population(view, w)
            if kernel is not None:
                found.append(Judged("WHERE", len(kernel), f"kernel samples of pid {w.pid} on "
                                    f"CPU {w.cpu} in {span}", why="none recorded",
                                    part="zero"))  # fmt: skip
            elif w.mode == "zero" and view.unmodelled and view.kernel_pids:
                found.append(Judged("WHERE", 0, "kernel samples", why=view.unmodelled,
                                    part="zero"))  # fmt: skip
    if "CHAIN" in applicable:
        leaf, probe = chain_checked(view)
        found.append(Judged("CHAIN", len(view.samples), "chains (depth)", part="depth",
                            why="the run recorded no chain"))  # fmt: skip
        found.append(Judged("CHAIN", len(leaf) + len(probe), "leaf and probe samples (callers)",
                            part="callers", why="no sample in leaf's or pa_probe_spin's "
                            "framed body"))  # fmt: skip
    return found


def _judge_who(view: ContentView) -> list[Judged]:
    text = sum(1 for s in view.samples if _in_text(view, s))
    found = [Judged("WHO", text, "samples in the workload's text", part="text",
                    why="no sample in the workload's text")]  # fmt: skip
    if any(s.tid is not None for s in view.samples):
        workers = sum(len(worker_samples(view, w)) for w in view.workloads)
        found.append(Judged("WHO", workers, "samples in worker-only code (tid)", part="threads",
                            why="no sample where only a worker thread runs"))  # fmt: skip
    if any(w.lanes for w in view.workloads):
        lanes = sum(len(lane_samples(view, w)) for w in view.workloads)
        what = "samples in a lane's own function (" + (
            "tid, CPU)" if any(s.tid is not None for s in view.samples) else "CPU; no tid)"
        )
        found.append(Judged("WHO", lanes, what, part="lanes",
                            why="no sample in any lane's function"))  # fmt: skip
    for iso in view.isolation:
        if iso.exclusive:
            user, _ = exclusive_samples(view, iso.cpu)
            found.append(Judged("WHO", len(user), f"user samples on isolated CPU {iso.cpu}",
                                part="exclusive", why="no user sample there"))  # fmt: skip
    return found


def _names(table: FunctionTable, chain: Sequence[int]) -> tuple[str, ...]:
    found = (table.at(address - 1) for address in chain)
    return tuple(f.name if f else f"{a:#x}" for f, a in zip(found, chain, strict=True))


def _chain_wrong(sample: Sample, table: FunctionTable, want: tuple[str, ...], depth: int) -> bool:
    room = depth - 1
    expected = want[:room]
    cut = room < len(want)
    if cut and not sample.truncated:
        return True
    return _names(table, sample.chain[: len(expected)]) != expected


def chain_checked(view: ContentView) -> tuple[list[Sample], list[Sample]]:
    """The leaf samples and the probe samples CHAIN judges by their next frames."""
    leaf: list[Sample] = []
    probe: list[Sample] = []
    chain_pids = {w.pid for w in view.workloads if w.mode == "chain"}
    if view.image is not None:
        framed = view.image.functions.named("leaf")
        leaf = [s for s in view.samples
                if s.user and s.pid in chain_pids and framed.holds_framed(s.pc)]  # fmt: skip
    if view.module is not None:
        spin = view.module.named(PROBE_PATH[0])
        probe = [s for s in view.samples if not s.user and spin.holds_framed(s.pc)]
    return leaf, probe


def frame_verdict(view: ContentView) -> FrameVerdict:
    """CHAIN's general law (`harness.agent.oracles.frames`) on every chain whose code is known.

    Kernel samples against the module's functions at their kernel addresses and the
    kernel's own (vmlinux, where known: without it the exception entries are not
    known, and no address after an unknown frame is judged); user samples of the
    workloads' pids (picked by pid, which the harness knows) against the workload's
    image. Frames elsewhere are counted as not judged.
    """
    pids = {w.pid for w in view.workloads}
    user: tuple[FunctionTable, ...] = (view.image.functions,) if view.image else ()
    kernel = tuple(t for t in (view.module, view.kernel) if t is not None)
    judged = [s for s in view.samples if s.chain
              and ((s.user and s.pid in pids and user) or (not s.user and kernel))]  # fmt: skip
    # a kernel sample's user stack (dt): the task's user PC at its kernel entry, callers
    judged += [Sample(s.cpu, s.user_walk[0], s.pid, s.tid, True, s.user_walk[1:])
               for s in view.samples
               if len(s.user_walk) > 1 and s.pid in pids and user]  # fmt: skip
    return judge_frames(judged, lambda s: user if s.user else kernel,
                        entry_known=lambda s: s.user or view.kernel is not None)  # fmt: skip


def check_frames(view: ContentView) -> list[Violation]:
    """CHAIN's general law: every judged return address follows a call to the frame below."""
    faults = frame_verdict(view).faults
    out = []
    for cpu, n in sorted(Counter(f.sample.cpu for f in faults).items()):
        first = next(f for f in faults if f.sample.cpu == cpu)
        mode = "user" if first.sample.user else "kernel"
        out += zero("CHAIN", cpu, "return addresses not after a call to the frame below", got=n,
                    detail=f"first: {mode} pc {first.sample.pc:#x}, caller {first.index + 1}: "
                    f"{first.why}")  # fmt: skip
    return out


def check_chain(view: ContentView) -> list[Violation]:
    """CHAIN: depth and truncation honest; every frame a call; leaf and probe paths."""
    depth = view.chain_depth
    assert depth is not None
    too_long = Counter(s.cpu for s in view.samples if length_of(s) > depth)
    false_cut = Counter(s.cpu for s in view.samples if s.truncated and length_of(s) != depth)
    # a walk that wrote depth frames stopped there (pa_chain_walk checks the depth first)
    false_end = Counter(s.cpu for s in view.samples if s.stop in WALKED
                        and not s.truncated and length_of(s) == depth)  # fmt: skip
    out = [v for cpu, n in sorted(too_long.items()) for v in zero(
        "CHAIN", cpu, f"chains longer than {depth} frames", got=n, detail="")]  # fmt: skip
    out += [v for cpu, n in sorted(false_cut.items()) for v in zero(
        "CHAIN", cpu, "chains marked truncated below the depth", got=n, detail="")]  # fmt: skip
    out += [v for cpu, n in sorted(false_end.items()) for v in zero(
        "CHAIN", cpu, "chains of the depth whose walk says it ended", got=n,
        detail="the record's stop cause")]  # fmt: skip
    out += check_walks(view.samples, view.walks)
    leaf, probe = chain_checked(view)
    for samples, table, want in ((leaf, view.image.functions if view.image else None,
                                  program.CHAIN_PATH[1:]),
                                 (probe, view.module, PROBE_PATH[1:])):  # fmt: skip
        if table is None:
            continue
        wrong = [s for s in samples if _chain_wrong(s, table, want, depth)]
        for cpu, n in sorted(Counter(s.cpu for s in wrong).items()):
            first = next(s for s in wrong if s.cpu == cpu)
            out += zero("CHAIN", cpu, f"samples in {want[0]}'s callee without {', '.join(want)}",
                        got=n, detail=f"first: {', '.join(_names(table, first.chain))}"
                        f"{' (truncated)' if first.truncated else ''}")  # fmt: skip
    return out + check_frames(view)


def content_numbers(view: ContentView) -> dict[str, int]:
    """The content oracles' counts under flat names (``content.…``), for summary.json.

    Per workload (``content.<mode>.cpu<N>.``): ``population`` (WHERE's: `population`),
    ``in_text``, ``worker`` (WHO's thread half) and the modelled counts and bounds.
    """
    numbers = {"content.samples": len(view.samples),
               "content.user": sum(1 for s in view.samples if s.user),
               "content.timed": int(timed(view))}  # fmt: skip
    for iso in view.isolation:
        user, foreign = exclusive_samples(view, iso.cpu)
        own = frozenset(t for w in view.workloads for t in w.threads_on(iso.cpu))
        key = f"content.exclusive.cpu{iso.cpu}"
        numbers |= {f"{key}.exclusive": int(iso.exclusive), f"{key}.user": len(user),
                    f"{key}.harness": len(user) - len(foreign),
                    f"{key}.workload": sum(_harness_owned(own, s) for s in user)}  # fmt: skip
    for w in view.workloads if view.image is not None else ():
        chosen, life = population(view, w), _life(view, w)
        names = _counts(view, chosen)
        key = f"content.{w.mode}.cpu{w.cpu}"
        numbers |= {f"{key}.population": len(chosen),
                    f"{key}.in_text": sum(1 for s in chosen if _in_text(view, s)),
                    f"{key}.worker": len(worker_samples(view, w))}  # fmt: skip
        if w.mode == "zero":
            kernel = kernel_population(view, w)
            if kernel is not None:
                numbers[f"{key}.kernel_population"] = len(kernel)
                numbers[f"{key}.in_zeroing"] = _in_zero(view, kernel)
                numbers[f"{key}.zeroing_bound"] = zero_bound(len(kernel))
        elif w.mode == "chain":
            numbers[f"{key}.leaf"] = names["leaf"]
            numbers[f"{key}.leaf_bound"] = leaf_bound(len(chosen), w, life)
        elif w.mode == "lanes":
            found = Counter(k for k, _ in lane_samples(view, w))
            numbers |= {f"content.lanes.lane{k}.cpu{cpu}": found[k]
                        for k, (cpu, _) in enumerate(w.lanes)}  # fmt: skip
        else:
            numbers[f"{key}.hot"], numbers[f"{key}.cold"] = names["hot"], names["cold"]
            numbers[f"{key}.hot_or_cold_bound"] = mix_bound(len(chosen), w, life)
    if view.chain_depth is not None:
        leaf, probe = chain_checked(view)
        cut = sum(1 for s in view.samples if s.truncated)
        frames = frame_verdict(view)
        numbers |= {"content.chain.leaf_checked": len(leaf),
                    "content.chain.probe_checked": len(probe),
                    "content.chain.truncated": cut,
                    "content.chain.frames_samples": frames.samples,
                    "content.chain.frames": frames.frames,
                    "content.chain.frames_targets": frames.targets,
                    "content.chain.frames_unknown": frames.unknown}  # fmt: skip
        numbers |= walk_numbers(view.samples, view.walks)
    return numbers


def content_report(view: ContentView, violations: Sequence[Violation]) -> str:
    """Where the workloads' samples fell, then one verdict line per content oracle."""
    names = {name for name, _ in CONTENT_ORACLES}
    own = [v for v in violations if v.oracle in names]
    oracles = oracles_for(view.chain_depth is not None)
    verdicts = verdict_lines(own, oracles, applicable_content(view), judged=judge_content(view))
    return f"{format_content(view)}\n{verdicts}"


def format_content(view: ContentView) -> str:
    """One line per workload: where its samples fell against the model."""
    numbers = content_numbers(view)
    span = "its phase" if timed(view) else "its whole life (tprof's samples carry no time)"
    lines = []
    for w in view.workloads if view.image is not None else ():
        key = f"content.{w.mode}.cpu{w.cpu}"
        n, worker = numbers[f"{key}.population"], numbers[f"{key}.worker"]
        head = (f"truth {w.mode} on CPU {w.cpu} (pid {w.pid}, worker tid {w.tid}): {n} user "
                f"samples of its pid there in {span}, {numbers[f'{key}.in_text']} in its text, "
                f"{worker} in worker-only code")  # fmt: skip
        if w.mode == "zero":
            if f"{key}.kernel_population" not in numbers:
                why = "kernel samples carry no pid" if not view.kernel_pids else "not read"
                lines.append(f"{head}; kernel half not applicable: {why}")
                continue
            k, z = numbers[f"{key}.kernel_population"], numbers[f"{key}.in_zeroing"]
            lines.append(f"{head}; {w.calls} reads; {k} kernel samples of its pid there, {z} in "
                         f"{program.KERNEL_ZERO} ({100 * z / max(k, 1):.1f} %), model bound "
                         f"{numbers[f'{key}.zeroing_bound']}")  # fmt: skip
        elif w.mode == "chain":
            leaf = numbers[f"{key}.leaf"]
            lines.append(f"{head}, {leaf} in leaf ({100 * leaf / max(n, 1):.1f} %), model "
                         f"bound {numbers[f'{key}.leaf_bound']}")  # fmt: skip
        elif w.mode == "lanes":
            each = ", ".join(f"lane{k} (CPU {cpu}, tid {tid}) "
                             f"{numbers[f'content.lanes.lane{k}.cpu{cpu}']}"
                             for k, (cpu, tid) in enumerate(w.lanes))  # fmt: skip
            lines.append(f"truth lanes (pid {w.pid}, main on CPU {w.cpu}): samples in each "
                         f"lane's function: {each}")  # fmt: skip
        else:
            hot, cold = numbers[f"{key}.hot"], numbers[f"{key}.cold"]
            low, high = mix_interval(hot + cold)
            lines.append(
                f"{head}, hot {hot} + cold {cold} (model bound "
                f"{numbers[f'{key}.hot_or_cold_bound']}; hot allowed {low}..{high})"
            )
    if view.samples and all(s.tid is None for s in view.samples):
        lines.append("tids: not recorded by this flavour (WHO judges pids only)")
    lines += [_exclusive_line(view, iso, numbers) for iso in view.isolation]
    if not view.isolation:
        lines.append("no CPU isolated for the workload (one CPU): WHO's exclusive half "
                     "not applicable")  # fmt: skip
    if view.chain_depth is not None:
        lines.append(f"chains (depth {view.chain_depth}): "
                     f"{numbers['content.chain.leaf_checked']} leaf samples checked, "
                     f"{numbers['content.chain.probe_checked']} probe samples checked, "
                     f"{numbers['content.chain.truncated']} truncated; "
                     f"{numbers['content.chain.frames']} return addresses of "
                     f"{numbers['content.chain.frames_samples']} samples judged as calls, "
                     f"{numbers['content.chain.frames_targets']} of them direct calls to the "
                     f"frame below, {numbers['content.chain.frames_unknown']} in unknown "
                     f"code not judged; {_walks_text(view, numbers)}")  # fmt: skip
    else:
        lines.append("chains: not recorded by this flavour (CHAIN not applicable)")
    return "\n".join(lines)


def _walks_text(view: ContentView, numbers: dict[str, int]) -> str:
    if not view.walks:
        return "the records carry no stop cause (stop causes not judged)"
    return (f"{numbers['content.chain.walks.records']} records' stop causes against "
            f"{numbers['content.chain.walks.core']} walks the core counted")  # fmt: skip


def _exclusive_line(view: ContentView, iso: Isolation, numbers: dict[str, int]) -> str:
    key = f"content.exclusive.cpu{iso.cpu}"
    if not iso.exclusive:
        return f"CPU {iso.cpu} {iso.describe()}: WHO's exclusive half not applicable"
    return (f"CPU {iso.cpu} {iso.describe()}: {numbers[f'{key}.user']} user samples, "
            f"{numbers[f'{key}.harness']} the harness's tasks' "
            f"({numbers[f'{key}.workload']} the workload's)")  # fmt: skip
