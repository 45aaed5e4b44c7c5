r"""WHERE: where the workload's samples lie, against its text and a model of its instruction mix.

Pure. Judges a `harness.agent.oracles.content_view.ContentView`; the binomial
bounds come from `harness.agent.values.stats`.

**WHERE**: (no bound) a user sample of the workload's pid lies in its text, or in
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
  a whole life add its mode's ``LIFE_SYSCALLS`` and every fault of its life. Interrupts of leaf
  itself put a sample in leaf or in the kernel, never elsewhere in user code.
* So of the n samples of the population, leaf holds at least n - (EL changes) - Q,
  where Q is the upper ``1 - ALPHA`` quantile of Binomial(n, p): a false alarm at most
  ``ALPHA`` = 1e-6 per run, under the model.

The mix workload, the same model (`mix_bound`): of its population's m samples, hot and cold
hold at least m - (EL changes) - Q, with ``MIX_OUT_INSNS`` per round outside them
against ``MIX_ROUND_INSNS`` inside. Hot and cold run the same body, hot 3 parts, cold
1, each round's slice drawn at random (2048 to 6143 iterations), so a sampling clock as
regular as TCG's cannot alias with a fixed round length and consecutive samples fall
at independent phases; of the samples in either, hot's count lies within the
two-sided ``ALPHA`` interval of Binomial(·, 3/4), widened by 2 on each side for the
page faults of the first call of each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from harness.agent.oracles.content_view import ContentView, in_text, timed
from harness.agent.oracles.laws import at_least, zero
from harness.agent.truth import program
from harness.agent.values.results import Judged, Violation
from harness.agent.values.samples import Sample
from harness.agent.values.stats import binomial_upper

ALPHA = 1e-6
COST_RATIO = 100
_FAULT_SLACK = 2  # mix: the page faults of hot's and cold's first calls


def mix_interval(m: int) -> tuple[int, int]:
    """WHERE's two-sided interval for hot's samples of ``m`` in hot or cold."""
    share = program.MIX_HOT_PARTS / (program.MIX_HOT_PARTS + program.MIX_COLD_PARTS)
    high = binomial_upper(m, share, ALPHA / 2)
    low = m - binomial_upper(m, 1 - share, ALPHA / 2)
    return (max(0, low - _FAULT_SLACK), min(m, high + _FAULT_SLACK))


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
    samples carry no time). Where kernel samples carry no pid (kprof's), every kernel
    sample on its CPU inside its phase: the CPU is the workload's alone for the phase
    (`harness.agent.truth.isolation` moves every other user task off it), so what else
    the kernel does there is interrupts and kernel threads, paced by the host's clock
    as the ticks already in `program.KERNEL_OUT_SHARE` are. None where it cannot be
    chosen so: the kernel's functions were not read, the samples carry neither pid nor
    time, or the model does not hold in this guest (``view.unmodelled``: a sanitizer
    kernel). Never by PC: a shifted PC stays in the count it is judged in.
    """
    if workload.kind != "zero" or view.zeroing is None or view.unmodelled:
        return None
    if not view.kernel_pids and not timed(view):
        return None
    return [s for s in view.samples
            if not s.user and s.cpu == workload.cpu
            and (not view.kernel_pids or s.pid == workload.pid)
            and (s.time_ns is None or workload.during(s.time_ns))]  # fmt: skip


def kernel_whose(view: ContentView, workload: program.WorkloadRun) -> str:
    """Whose kernel samples `kernel_population` holds, in words."""
    return f"of pid {workload.pid}" if view.kernel_pids else "of any task (no pid recorded)"


def zero_bound(n: int) -> int:
    """WHERE's lower bound on zero's kernel samples in `program.KERNEL_ZERO`, of ``n``."""
    return max(0, n - binomial_upper(n, program.KERNEL_OUT_SHARE, ALPHA))


def in_zeroing(view: ContentView, samples: Sequence[Sample]) -> int:
    """How many of ``samples`` lie in the kernel's zeroing loop (`program.KERNEL_ZERO`)."""
    assert view.zeroing is not None
    loop = view.zeroing.named(program.KERNEL_ZERO)
    return sum(1 for s in samples if loop.holds(s.pc))


def life_outside(view: ContentView, workload: program.WorkloadRun) -> tuple[int, int]:
    """(instructions, exceptions) of a workload's life outside its phase, where untimed.

    Exceptions: its system calls outside the phase and every page fault of its life.
    """
    if timed(view):
        return (0, 0)
    return (program.LIFE_INSNS, program.LIFE_SYSCALLS[workload.kind] + workload.life_faults)


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


def modelled_bound(view: ContentView, workload: program.WorkloadRun, n: int) -> int:
    """WHERE's lower bound for a chain or mix ``workload``, of ``n`` in its `population`."""
    life = life_outside(view, workload)
    if workload.kind == "chain":
        return leaf_bound(n, workload, life)
    return mix_bound(n, workload, life)


#: Why a modelled half with samples compared nothing: its bound allows every one outside.
TOO_FEW = "recorded, too few for its model: the lower bound is 0, so no count could fail it"


def judge_where(view: ContentView) -> list[Judged]:
    """What WHERE's modelled halves compared: a half whose bound is 0 compared nothing.

    Chain and mix: their `population`, unless the model's bound is 0 there (and, in
    mix, the 3:1 interval cannot fail either): a population that small cannot fail the
    law, so the half is UNJUDGED, with its size. Zero: its `kernel_population` likewise,
    or why it has none (a sanitizer kernel). Each is one phase on one vCPU
    (`Judged.shares_cpu`): on 8 vCPUs sharing 2 host cores, with two such guests at
    once (CI's tier), populations of 22 to 350 were measured against 80 to 970 on 1 and
    2 vCPUs, and bounds of 0 (dt's zero half: 22 kernel samples, 16 in the loop).
    """
    span = "its phase" if timed(view) else "its whole life"
    found = []
    for w in view.workloads:
        if w.kind in ("chain", "mix"):
            chosen = population(view, w)
            n, can_fail = len(chosen), modelled_bound(view, w, len(chosen)) > 0
            if w.kind == "mix" and not can_fail:
                names = function_counts(view, chosen)
                m = names["hot"] + names["cold"]
                low, high = mix_interval(m)
                can_fail = low > 0 or m - high > 0
            what = f"user samples of pid {w.pid} on CPU {w.cpu} in {span}"
            why = f"{n} {TOO_FEW}" if n else "none recorded"
            found.append(Judged("WHERE", n if can_fail else 0, what, why=why, part=w.kind,
                                shares_cpu=True))  # fmt: skip
        kernel = kernel_population(view, w)
        if kernel is not None:
            what = f"kernel samples {kernel_whose(view, w)} on CPU {w.cpu} in {span}"
            n = len(kernel)
            why = f"{n} {TOO_FEW}" if n else "none recorded"
            found.append(Judged("WHERE", n if zero_bound(n) > 0 else 0, what, why=why,
                                part="zero", shares_cpu=True))  # fmt: skip
        elif w.kind == "zero" and view.unmodelled:
            found.append(Judged("WHERE", 0, "kernel samples", why=view.unmodelled, part="zero",
                                unmodelled=True))  # fmt: skip
    return found


def function_counts(view: ContentView, samples: Sequence[Sample]) -> Counter[str]:
    """``samples`` per workload function their PC lies in (``?``: outside its text)."""
    assert view.image is not None
    names: Counter[str] = Counter()
    for s in samples:
        found = view.image.functions.at(s.pc) if in_text(view, s) else None
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
        if w.kind == "zero":  # its kernel half only: its user code runs a few calls a read
            kernel = kernel_population(view, w)
            if kernel is not None:
                out += at_least("WHERE", w.cpu, f"kernel samples in {program.KERNEL_ZERO} (of "
                                f"{len(kernel)} {kernel_whose(view, w)} in {span})",
                                bound=zero_bound(len(kernel)), got=in_zeroing(view, kernel),
                                detail=f"model: at most {program.KERNEL_OUT_SHARE:.0%} outside "
                                f"the kernel's zeroing loop; {w.calls} reads")  # fmt: skip
            continue
        if w.kind == "lanes":  # judged by WHO's lanes half: who ran there, not how much
            continue
        chosen = population(view, w)
        names, n = function_counts(view, chosen), len(chosen)
        if w.kind == "chain":
            out += at_least("WHERE", w.cpu, f"samples in leaf (of {n} of pid {w.pid} in {span})",
                            bound=modelled_bound(view, w, n), got=names["leaf"],
                            detail=f"model: {w.calls} leaf calls, {w.faults} faults")  # fmt: skip
            continue
        m = names["hot"] + names["cold"]
        out += at_least("WHERE", w.cpu, f"samples in hot or cold (of {n} of pid {w.pid} in "
                        f"{span})", bound=modelled_bound(view, w, n), got=m,
                        detail=f"model: {w.rounds} rounds, {w.faults} faults")  # fmt: skip
        low, high = mix_interval(m)
        for name, bound in (("hot", low), ("cold", m - high)):
            what = f"samples in {name} (of {m} in hot or cold)"
            out += at_least("WHERE", w.cpu, what, bound=bound, got=names[name],
                            detail="3:1 mix, two-sided")  # fmt: skip
    return out
