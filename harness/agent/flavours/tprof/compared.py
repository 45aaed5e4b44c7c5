"""What each of tprof's own laws compared in a run: one `Judged` a law, never CPUs alone.

`harness.agent.oracles.core.judge_flavour` counts the shared oracles itself and asks a
flavour for its own (`harness.agent.flavours.tprof.oracles.TPROF_ORACLES` past the
core's). Each count here is read from the same numbers the law's check reads, and is 0
exactly when the check had nothing to hold to its equation (the law then prints
UNJUDGED, with why)::

    {j.oracle: j.n for j in compared_tprof(run)}
    # {"TP-O1": 400, "TP-O2": 10, "TP-O5": 350, "PLACE": 250, "NMI": 400, ...}

TP-O1 and ONLINE count producer calls (each ends in one outcome; none may find its CPU
without a buffer), TP-O2 the swaps the module counted, TP-O5 the records read to EOF,
PLACE the pinned loops' samples held to their CPUs, NMI the contexts of overflows and
producer calls (the core's `judge_nmi`, as for every flavour),
PROBE the IRQ-off windows it judges, TP-O10 the STOP it timed and STOPPED the counters
read after STOP.
"""

from __future__ import annotations

import math

from harness.agent.flavours.tprof.budgets import stop_budget_ns
from harness.agent.flavours.tprof.results import TprofRun
from harness.agent.oracles.nmi import judge_nmi
from harness.agent.oracles.report import format_cpus
from harness.agent.values.results import Judged


def compared_tprof(run: TprofRun) -> list[Judged]:
    """What each of tprof's own laws compared in ``run`` (n = 0: UNJUDGED, with why)."""
    return [
        *_calls(run),
        _swaps(run),
        _records(run),
        _placed(run),
        judge_nmi(run),
        _windows(run),
        _stop(run),
        _stopped(run),
    ]


def _on(run: TprofRun) -> str:
    return f"on {len(run.counters.core)} CPUs"


def _core_sum(run: TprofRun, name: str) -> int:
    return sum(values.get(name, 0) for values in run.counters.core.values())


def _calls(run: TprofRun) -> list[Judged]:
    """TP-O1 and ONLINE: the core's producer calls, each held to one outcome / a buffer."""
    calls, on, why = _core_sum(run, "x_producer_calls"), _on(run), "no producer call on any CPU"
    injected = "" if run.injected is None else f", {sum(run.injected.values())} of them injected"
    return [
        Judged("TP-O1", calls, f"producer calls {on} held to conservation (recorded, "
                               f"dropped with a cause or current){injected}", why=why),
        Judged("ONLINE", calls, f"producer calls {on}, each held to finding its CPU's buffer",
               why=why),
    ]  # fmt: skip


def _swaps(run: TprofRun) -> Judged:
    """TP-O2: the swaps the module counted, each classified once, held to the drain's count."""
    swaps, ncpu = run.counters.stats.get("x_swaps", 0), len(run.online_cpus)
    if run.kicks is not None:
        held = f"{ncpu} × ({run.kicks} kicks + 2)"
    elif run.runtime_s > 0:
        periods = math.ceil(run.runtime_s * 1000 / run.spec.drain_ms)
        held = f"the auto-drain ceiling {ncpu} × (2 + {periods})"
    else:
        return Judged("TP-O2", 0, "swaps", why="no kick count and no run time to hold them to")
    return Judged("TP-O2", swaps, f"swaps, each classified once, held to {held}",
                  why="the module counted no swap")  # fmt: skip


def _records(run: TprofRun) -> Judged:
    """TP-O5: the records read to EOF, each checked whole against its CPU's recorded count."""
    return Judged("TP-O5", len(run.samples), f"records read to EOF ({run.bytes_read} bytes), "
                  "each checked filled and against its CPU's x_sample",
                  why="no record read: nothing was recorded")  # fmt: skip


def _placed(run: TprofRun) -> Judged:
    """PLACE: the samples of the pinned loops' pids (in the loop, where known) it placed."""
    pids = {pid for loops in run.busy.values() for pid in loops}
    low, high = run.spin_loop
    judged = sum(1 for s in run.samples if s.pid in pids
                 and (high == 0 or (not s.in_kernel and low <= s.pc < high)))  # fmt: skip
    where = "in the loop" if high else "any PC"
    return Judged("PLACE", judged, f"samples of the {len(pids)} pinned loops ({where}) on "
                  f"{len(run.busy)} busy CPUs, each held to the CPUs its loop was pinned to",
                  why="no sample of a pinned loop")  # fmt: skip


def _windows(run: TprofRun) -> Judged:
    """PROBE: the IRQ-off windows judged (probe CPUs' with pseudo-NMI on, every CPU's off)."""
    if run.nmi_expected:
        cpus = run.probe_cpus
        where = f"probe CPUs {format_cpus(cpus)}"
        held = "held to catching overflows (pseudo-NMI on)"
    else:
        cpus, where = tuple(run.counters.core), f"{len(run.counters.core)} CPUs"
        held = "each held to catching none (pseudo-NMI off)"
    windows, hits = (sum(run.counters.core.get(cpu, {}).get(name, 0) for cpu in cpus)
                     for name in ("x_probe_runs", "x_probe_hits"))  # fmt: skip
    what = f"IRQ-off probe windows on {where} ({hits} overflows inside), {held}"
    why = "the probe ran no window" if run.probe_cpus else "no probe CPU in this run"
    return Judged("PROBE", windows, what, why=why)


def _stop(run: TprofRun) -> Judged:
    """TP-O10: the STOP the module timed (x_stop_ns), held to its budget."""
    took = run.counters.stats.get("x_stop_ns", 0)
    what = f"STOP timed in guest time ({took} ns), held to {stop_budget_ns(run.spec)} ns"
    return Judged("TP-O10", 1 if took > 0 else 0, what, why="the module timed no STOP")


def _stopped(run: TprofRun) -> Judged:
    """STOPPED: the counters read after STOP, whose current buffers it counts."""
    read = "cur_buffers" in run.counters.state
    return Judged("STOPPED", 1 if read else 0, "counters read after STOP, its current "
                  "buffers counted", why="the module prints no cur_buffers")  # fmt: skip
