"""The peer run of any flavour: its run with Linux perf beside the agent (PEER, PROFILE).

perf records the same CPUs, event and period with frame-pointer call chains
(``perf record -g``), started before the agent's run loads and arms the agent and
stopped after it disarmed. Its samples are counted in the window where every
CPU's agent event counted (PEER), and folded by symbol against the agent's own
samples (PROFILE), both profiles named by one `harness.agent.peer.symbols.Symboliser`
over the guest's ``/proc/kallsyms`` and the ground-truth workload's ELF symbols
(user PCs elsewhere are ``[user]``). A flavour says only what differs, in
`PeerHooks`: how its records become samples, and its window where the agent's
``info`` does not give it::

    hooks = PeerHooks(samples=lambda run: run.content().samples)
    FLAVOUR = Flavour(..., peer_run=beside_perf(_standard, DtRun, hooks))
    run = FLAVOUR.peer_run(agent, spec, cpus)      # run.peer: PeerEvidence

Each run writes both profiles as folded stacks beside its other evidence:
``profile-NN-agent.folded`` and ``profile-NN-perf.folded`` in the agent's workdir, with
the same as speedscope's JSON and pprof's proto (`harness.agent.peer.export`).

A flavour that gives ``sized`` (its run for a given workload length), ``usual_ms``
and ``check`` in its hooks records in rounds, each as long as
`harness.agent.peer.sizing` says PROFILE and PEER need: short on a quiet host,
longer where the first round fell short (that module's docstring states the model
and why the stopping rule cannot bias a verdict).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from harness.agent.module.spec import AgentSpec
from harness.agent.peer.counts import PeerEvidence, PeerWindow, info_window
from harness.agent.peer.export import pprof, speedscope
from harness.agent.peer.pairing import ProfilePair, profile_pair
from harness.agent.peer.sizing import PeerSize, shortfall
from harness.agent.peer.symbols import Symboliser, UserSymbols, parse_kallsyms
from harness.agent.runner import AgentLike, AgentRun, narrow
from harness.agent.steps import DEBUGFS, parse_pairs
from harness.agent.truth.build import TEXT_BASE, TRUTH_BINARY
from harness.agent.values.results import Violation
from harness.agent.values.samples import Sample
from harness.errors import InfraError
from harness.hostshell import HostShell
from harness.timing import ANALYSIS, PERF, stage
from harness.vm.perf import (
    PerfCounts,
    PerfSession,
    start_perf,
    stop_command,
    stop_perf,
    switch_perf,
)
from harness.vm.perfread import PerfRead, read_perf_data

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    _R = TypeVar("_R", bound=DataclassInstance)
else:
    _R = TypeVar("_R")

LOG = logging.getLogger(__name__)

Runner = Callable[[AgentLike, AgentSpec, tuple[int, ...]], AgentRun]


@dataclass(frozen=True, slots=True)
class PeerHooks(Generic[_R]):
    """What a flavour's peer run needs to know of its own run type.

    ``samples``: its records as samples (`harness.agent.values.samples.Sample`, as the
    content oracles see them: a flavour whose records carry call chains folds them into
    its flame graph). ``window``: where its agent
    events counted, given the period (None: from the agent's debugfs ``info``,
    read after the run: `harness.agent.peer.counts.info_window`). ``drops``: per CPU, the
    samples the agent counted as lost in the run (None: it counts none); PROFILE
    leaves those CPUs out (`harness.agent.peer.pairing`'s docstring says why; no
    flavour passes it today).
    ``recording``: the guest-clock span in which the agent recorded samples, where
    that is narrower than its window's outer span (kprof records only between its
    ``start`` and ``stop``, while its counters run from load to unload); PROFILE folds
    perf's samples there (None: each CPU's armed span, else the window's outer span:
    `PeerWindow.profile_span`). ``pair_within_ns``: PROFILE
    compares only the samples of the interrupts both profilers took, paired within
    this many ns (`harness.agent.peer.pairing.paired`; ``samples`` must then give each its
    time), for a flavour whose own overflow sets work going that perf then samples.
    ``sized``: the run with its workload lasting the given ms (``usual_ms`` its length
    before sizing), and ``check``: its violations; with all three the run records in
    rounds (`harness.agent.peer.sizing`), else once, as ``run``.
    """

    samples: Callable[[_R], Iterable[Sample]]
    window: Callable[[_R, int], PeerWindow] | None = None
    drops: Callable[[_R], Mapping[int, int]] | None = None
    recording: Callable[[_R], tuple[int, int]] | None = None
    pair_within_ns: int | None = None
    sized: Callable[[AgentLike, AgentSpec, tuple[int, ...], int], _R] | None = None
    usual_ms: int = 0
    check: Callable[[_R], Sequence[Violation]] | None = None


def beside_perf(run: Runner, kind: type[_R], hooks: PeerHooks[_R]) -> Runner:
    """A `Flavour.peer_run`: ``run`` (whose runs are ``kind``) with Linux perf beside it.

    :raise TypeError: ``run`` returned another type of run.
    """

    def own(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> _R:
        return narrow(run(agent, spec, cpus), kind)

    def peer(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
        found: AgentRun = run_beside_perf(agent, spec, cpus, own, hooks)  # type: ignore[assignment]
        return found

    return peer


def run_beside_perf(
    agent: AgentLike,
    spec: AgentSpec,
    cpus: tuple[int, ...],
    run: Callable[[AgentLike, AgentSpec, tuple[int, ...]], _R],
    hooks: PeerHooks[_R],
) -> _R:
    """``run`` with perf recording beside it; the run with ``peer`` and a shared PMU set.

    The run type must be a dataclass with fields ``peer`` (`PeerEvidence`) and
    ``kernel`` (`harness.agent.oracles.evidence.KernelEvidence`, marked ``pmu_shared``:
    perf's interrupts are in the kernel's counts too). Blocks for the run plus
    perf's start and stop in the guest, the copy of its file and the host's read.

    :raise GuestError: perf did not start, stop or read back.
    """
    sized, check = hooks.sized, hooks.check
    if sized is None or check is None or hooks.usual_ms <= 0:
        return _once(agent, spec, cpus, run, hooks)
    size = PeerSize.of(cpus=len(agent.online_cpus()), period=spec.period,
                       usual_ms=hooks.usual_ms)  # fmt: skip
    ms = size.first_ms
    while True:
        result = _once(agent, spec, cpus, _lasting(sized, ms), hooks)
        peer: PeerEvidence | None = getattr(result, "peer", None)
        short = shortfall(peer)
        longer = size.next_ms(ms, peer) if short else 0
        if not longer or check(result):  # a round with a violation is the run: never hidden
            return result
        LOG.info("peer round of %d ms fell short (%s): another of %d ms", ms, short, longer)
        ms = longer


def _lasting(
    sized: Callable[[AgentLike, AgentSpec, tuple[int, ...], int], _R], ms: int
) -> Callable[[AgentLike, AgentSpec, tuple[int, ...]], _R]:
    return lambda agent, spec, cpus: sized(agent, spec, cpus, ms)


def _once(
    agent: AgentLike,
    spec: AgentSpec,
    cpus: tuple[int, ...],
    run: Callable[[AgentLike, AgentSpec, tuple[int, ...]], _R],
    hooks: PeerHooks[_R],
) -> _R:
    """One round: ``run`` with perf recording beside it (`run_beside_perf`)."""
    session = PerfSession(cpus=agent.online_cpus(), period=spec.period, event=spec.event,
                          stacks=True)  # fmt: skip
    budget = int(agent.timeouts.command_s)
    # Before perf runs: the sysctl writes must not meet a live PMU event (set_throttling);
    # the run's own load then finds them as they must be and writes nothing.
    agent.set_throttling(disabled=True)
    start_perf(agent.shell, session, timeout_s=budget, enable=False)
    recording = RecordingAgent(agent, session)
    try:
        result = run(recording, spec, cpus)
        window = (hooks.window(result, spec.period) if hooks.window is not None
                  else info_window(_info(agent), spec.period))  # fmt: skip
        kallsyms = agent.shell.run("cat /proc/kallsyms", timeout_s=budget).stdout
    except BaseException:
        # perf must not outlive a failed run; stopping it never hides why the run failed
        agent.shell.run(stop_command(session, timeout_s=budget), check=False,
                        timeout_s=budget + 30)  # fmt: skip
        raise
    stop_perf(agent.shell, session, timeout_s=budget)
    with stage(ANALYSIS):
        recorded = hooks.recording(result) if hooks.recording is not None else None
        outer = window.outer
        folded = outer if recorded is None else (min(outer[0], recorded[0]),
                                                 max(outer[1], recorded[1]))  # fmt: skip
        counts = _read_perf(agent, session, (window.inner, folded), kallsyms)
        require_recorded(counts, window.outer)
        symbols = Symboliser(parse_kallsyms(kallsyms), _workload_symbols(agent))
        drops = hooks.drops(result) if hooks.drops is not None else {}
        spans = {c: recorded or window.profile_span(c) for c in {s.cpu for s in counts.stacks}}
        in_window = (s for s in counts.stacks if spans[s.cpu][0] <= s.time_ns <= spans[s.cpu][1])
        pair = profile_pair(hooks.samples(result), in_window, symbols, drops,
                            pair_within_ns=hooks.pair_within_ns)  # fmt: skip
        _keep(agent, pair)
    evidence = PeerEvidence(dataclasses.replace(counts, stacks=()), window, pair)
    kernel = getattr(result, "kernel", None)
    shared = dataclasses.replace(kernel, pmu_shared=True) if kernel is not None else None
    return dataclasses.replace(result, peer=evidence, kernel=shared)


class RecordingAgent:
    """The agent as the run beside perf uses it: perf's events on only while the agent counts.

    perf records from just before the agent loads (every flavour arms its counters
    after that) to the run's first copy of its records out of the guest (every
    flavour's run has disarmed by then: its profctl sequence stops and closes the
    agent before the harness reads what it recorded). perf started with its events
    off (`harness.vm.perf.start_perf` without ``enable``). Why: idle vCPUs count
    cycles too under TCG, so perf samples every CPU at its period for as long as its
    events are on, and around the agent's window the run spends most of its wall
    time (isolating a CPU, reading the records back, the host's decoding): on 8 vCPUs,
    15 % of a tprof peer run's 35 481 samples were in the agent's window, and dt's
    run recorded 260 522 samples in about 100 s of guest time. Everything else is
    the agent's own (`__getattr__`); `require_recorded` checks afterwards, from perf's
    own samples, that the span covered the window.
    """

    def __init__(self, agent: AgentLike, session: PerfSession) -> None:
        self._agent = agent
        self._session = session
        self._state = "off"  # off (not yet on), on, done (off again for good)

    def __getattr__(self, name: str) -> Any:  # the agent's own members, as they are typed there
        return getattr(self._agent, name)

    def load(
        self,
        spec: AgentSpec,
        *,
        throttling_disabled: bool = True,
        max_sample_rate: int | None = None,
        burst_wait_ms: int | None = None,
    ) -> None:
        """Switch perf's events on (the first time), then the agent's ``load``."""
        if self._state == "off":
            switch_perf(self._agent.shell, self._session, on=True, timeout_s=self._budget)
            self._state = "on"
        self._agent.load(spec, throttling_disabled=throttling_disabled,
                         max_sample_rate=max_sample_rate, burst_wait_ms=burst_wait_ms)  # fmt: skip

    def fetch(self, remote: str, name: str) -> bytes:
        """Switch perf's events off (once, after they went on), then the agent's ``fetch``."""
        if self._state == "on":
            switch_perf(self._agent.shell, self._session, on=False, timeout_s=self._budget)
            self._state = "done"
        return self._agent.fetch(remote, name)

    @property
    def _budget(self) -> int:
        return int(self._agent.timeouts.command_s)


def require_recorded(counts: PerfCounts, span: tuple[int, int]) -> None:
    """Check that perf recorded on every CPU before ``span`` began and after it ended.

    `RecordingAgent` switches perf on and off around the agent's run; a CPU whose
    first sample came after the agent's window opened, or whose last came before
    it closed, means perf's events were off for part of it, and its counts there
    would be short.

    :raise InfraError: a CPU perf watched has no sample before or after ``span``.
    """
    times: dict[int, list[int]] = {cpu: [] for cpu in counts.watched}
    for sample in counts.stacks:
        times.setdefault(sample.cpu, []).append(sample.time_ns)
    for cpu, found in sorted(times.items()):
        if not found or min(found) >= span[0] or max(found) <= span[1]:
            seen = f"{min(found)}..{max(found)} ns" if found else "none"
            raise InfraError(
                f"perf did not record across the agent's window on CPU {cpu}: its samples "
                f"{seen}, the window {span[0]}..{span[1]} ns (perf's events must be on "
                "from before the agent loads to after it disarms)"
            )


def _workload_symbols(agent: AgentLike) -> UserSymbols | None:
    """The ground-truth workload's functions (`harness.agent.truth.program`), if it was built."""
    try:
        functions = agent.truth_image().functions.functions
    except InfraError:  # no workload beside profctl: user PCs are "[user]"
        return None
    return UserSymbols(TRUTH_BINARY, tuple((f.start, f.end, f.name) for f in functions),
                       base=TEXT_BASE)  # fmt: skip


def _info(agent: AgentLike) -> dict[str, str]:
    text = agent.shell.run(f"cat {DEBUGFS}/info", timeout_s=agent.timeouts.command_s).stdout
    return parse_pairs(text.splitlines())


def _read_perf(
    agent: AgentLike,
    session: PerfSession,
    spans: tuple[tuple[int, int], tuple[int, int]],
    kallsyms: str,
) -> PerfCounts:
    """The guest perf's file, copied to the workdir and read there by the host's perf.

    ``spans``: where perf's counts are cut (PEER's window) and where its samples'
    frames are read (every span PROFILE folds lies inside). Kept beside the run's
    evidence: ``perf-NN.data`` (what perf recorded), ``perf-NN.txt`` (what host perf
    printed of it) and ``kallsyms.txt`` (the guest kernel's symbols it named kernel
    frames with).
    """
    stem = f"perf-{agent.run_count:02d}"
    names = agent.workdir / "kallsyms.txt"
    names.write_text(kallsyms)
    with stage(PERF):  # the copy out of the guest is perf's cost too
        agent.fetch(session.path("data"), f"{stem}.data")
    read = PerfRead(agent.workdir / f"{stem}.data", kallsyms=names, window=spans[0],
                    keep=agent.workdir / f"{stem}.txt", stacks_within=spans[1])  # fmt: skip
    return read_perf_data(HostShell(), session, read)


def _keep(agent: AgentLike, pair: ProfilePair) -> None:
    """Both profiles in the workdir: folded stacks, speedscope's JSON, pprof's proto.

    ``profile-NN-{agent,perf}.folded``, ``profile-NN.speedscope.json`` (both, side by
    side: open it at speedscope.app or with ``speedscope FILE``) and
    ``profile-NN-{agent,perf}.pb.gz`` (``go tool pprof -http : FILE``;
    `harness.agent.peer.export`).
    """
    stem = agent.workdir / f"profile-{agent.run_count:02d}"
    for name, profile in (("agent", pair.agent), ("perf", pair.perf)):
        stem.with_name(f"{stem.name}-{name}.folded").write_text(profile.folded())
        stem.with_name(f"{stem.name}-{name}.pb.gz").write_bytes(pprof(profile))
    both = speedscope({"agent": pair.agent, "perf": pair.perf}, name=stem.name)
    stem.with_name(f"{stem.name}.speedscope.json").write_text(both)
