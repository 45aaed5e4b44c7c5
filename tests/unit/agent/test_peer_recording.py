"""perf beside the agent records only while the agent counts: switched at load and first fetch."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from harness.agent.module.spec import AgentSpec
from harness.agent.peer.run import RecordingAgent, require_recorded
from harness.errors import InfraError
from harness.timeouts import Timeouts
from harness.vm.perf import PerfCounts, PerfCpu, PerfSample, PerfSession


@dataclass(frozen=True)
class Ran:
    stdout: str = ""
    stderr: str = ""
    exit_status: int = 0


@dataclass
class Calls:
    """What the guest was asked, in order: shell commands as their perf word, agent calls."""

    seen: list[str] = field(default_factory=list)

    def run(self, command: str, *, timeout_s: float | None = None, check: bool = True) -> Ran:
        word = "enable" if "echo enable" in command else "disable"
        self.seen.append(f"perf {word}")
        return Ran()


class FakeAgent:
    def __init__(self, calls: Calls) -> None:
        self.shell = calls
        self.timeouts = Timeouts()
        self.workdir = "/nowhere"

    def load(
        self,
        spec: AgentSpec,
        *,
        throttling_disabled: bool = True,
        max_sample_rate: int | None = None,
        burst_wait_ms: int | None = None,
    ) -> None:
        self.shell.seen.append(f"load {spec.flavour} {throttling_disabled}")

    def fetch(self, remote: str, name: str) -> bytes:
        self.shell.seen.append(f"fetch {remote}")
        return b"records"


def test_perf_goes_on_before_the_first_load_and_off_before_the_first_fetch() -> None:
    calls = Calls()
    agent = RecordingAgent(FakeAgent(calls), PerfSession(cpus=(0,), period=1_000_000))  # type: ignore[arg-type]
    agent.load(AgentSpec(flavour="dt"), throttling_disabled=False)
    agent.load(AgentSpec(flavour="dt"))  # a second load: perf is on already
    assert agent.fetch("/tmp/a", "a.bin") == b"records"
    agent.fetch("/tmp/b", "b.bin")
    agent.load(AgentSpec(flavour="dt"))  # after the records were read: perf stays off
    assert calls.seen == ["perf enable", "load dt False", "load dt True", "perf disable",
                          "fetch /tmp/a", "fetch /tmp/b", "load dt True"]  # fmt: skip
    assert agent.workdir == "/nowhere"  # everything else is the agent's own


def test_a_fetch_before_any_load_leaves_perf_off() -> None:
    calls = Calls()
    agent = RecordingAgent(FakeAgent(calls), PerfSession(cpus=(0,), period=1_000_000))  # type: ignore[arg-type]
    agent.fetch("/tmp/a", "a.bin")
    assert calls.seen == ["fetch /tmp/a"]


def counts(*samples: tuple[int, int]) -> PerfCounts:
    cpus = tuple(PerfCpu(c, 0, 0, 0, 0, 0, None, None) for c in (0, 1))
    return PerfCounts(cpus, 1_000_000, None, "perf", (),
                      tuple(PerfSample(cpu, t, ()) for cpu, t in samples))  # fmt: skip


def test_perf_recorded_across_the_window_on_every_cpu_passes() -> None:
    require_recorded(counts((0, 90), (0, 210), (1, 99), (1, 201)), (100, 200))


@pytest.mark.parametrize(
    ("samples", "seen"),
    [
        (((0, 90), (0, 210), (1, 150), (1, 210)), "CPU 1: its samples 150..210 ns"),  # late on
        (((0, 90), (0, 199), (1, 90), (1, 210)), "CPU 0: its samples 90..199 ns"),  # early off
        (((0, 90), (0, 210)), "CPU 1: its samples none"),
    ],
)
def test_a_cpu_perf_did_not_record_across_the_window_is_an_infra_error(
    samples: tuple[tuple[int, int], ...], seen: str
) -> None:
    with pytest.raises(InfraError, match=f"on {seen}, the window 100..200 ns"):
        require_recorded(counts(*samples), (100, 200))
