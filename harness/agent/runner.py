"""What a flavour's runner is handed and what it hands back: the agent, and one run.

A runner (``harness/agent/flavours/<name>/run.py``) drives the agent as `AgentLike`
(what `harness.agent.driver.Agent` offers) and returns its own run type, which the
shared machinery (the peer, the oracles, the scenario runner) reads as `AgentRun`;
`narrow` turns it back into the flavour's own type. The peer runs any flavour beside
Linux perf through these alone, so it sits below `harness.agent.flavour`::

    def standard_run(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> TprofRun: ...
    own = narrow(run, TprofRun)       # TypeError when another flavour's run is handed over
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from harness.agent import profctl
from harness.agent.module.spec import AgentSpec
from harness.agent.truth.elfsyms import FunctionTable
from harness.agent.truth.nmigraph import NmiGraph
from harness.agent.truth.program import TruthImage
from harness.timeouts import Timeouts
from harness.vm.shell import CommandShell

_R = TypeVar("_R")


class AgentLike(Protocol):
    """The agent in one guest, as a flavour's runner uses it (`harness.agent.driver.Agent`)."""

    @property
    def workdir(self) -> Path:
        """Where a run's evidence is kept on the host."""

    @property
    def shell(self) -> CommandShell:
        """The guest's shell, for tools that run beside the agent (the perf peer)."""

    @property
    def timeouts(self) -> Timeouts:
        """The run's (scaled) time budgets."""

    def load(
        self,
        spec: AgentSpec,
        *,
        throttling_disabled: bool = True,
        max_sample_rate: int | None = None,
        burst_wait_ms: int | None = None,
    ) -> None:
        """Load the module with ``spec``'s parameters, the perf core's throttling as told."""

    def set_throttling(self, *, disabled: bool, max_sample_rate: int | None = None) -> None:
        """Switch the perf core's interrupt throttling off or on (nothing if it already is)."""

    def online_cpus(self) -> tuple[int, ...]:
        """CPUs online in the guest now."""

    def run_steps(
        self,
        steps: Sequence[str],
        *,
        actions: Mapping[str, Callable[[], None]] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[profctl.StepResult, ...]:
        """Run ``steps`` in one profctl process (the host acting at marked points)."""

    @property
    def pmu_irq_label(self) -> str:
        """How the guest's ``/proc/interrupts`` names the PMU overflow interrupt."""

    @property
    def run_count(self) -> int:
        """Profctl sequences run so far (names the files a run keeps)."""

    def fetch(self, remote: str, name: str) -> bytes:
        """Copy guest file ``remote`` into the workdir as ``name``; its bytes."""

    def decode(self, layout: str, data: bytes) -> list[dict[str, int]]:
        """Records of ``layout`` (a C struct name) in ``data``, by the rendered decoder."""

    def decode_framed(self, data: bytes) -> tuple[list[dict[str, object]], int]:
        """Whole varint-framed records in ``data`` and the bytes they took (rendered decoder)."""

    def nmi_expected_for(self, spec: AgentSpec) -> bool:
        """Whether overflows arrive as NMIs for ``spec``."""

    def events_per_ns(self, spec: AgentSpec) -> float | None:
        """Events the PMU counts per enabled nanosecond for ``spec``, if fixed."""

    def save_run(self, record: Mapping[str, object]) -> Path:
        """Write one run's record as JSON into the workdir; its path."""

    def truth_image(self) -> TruthImage:
        """The ground-truth workload's functions and profctl's text (`harness.agent.truth`)."""

    def spin_loop(self) -> tuple[int, int]:
        """Where profctl's busy loop runs once pinned: ``spin_loop``'s link addresses."""

    def module_functions(self) -> FunctionTable:
        """The loaded module's functions at their kernel addresses (``/proc/kallsyms``)."""

    def kallsyms_functions(self, names: Sequence[str]) -> FunctionTable:
        """Core kernel functions by name at their addresses (``/proc/kallsyms``)."""

    def kernel_functions(self) -> FunctionTable | None:
        """The guest kernel's functions from its vmlinux (None: not known)."""

    def nmi_graph(self, flavour: str) -> NmiGraph:
        """What the built module's NMI entry reaches for a run of ``flavour`` (C-2)."""

    def kernel_sanitizers(self) -> tuple[str, ...]:
        """The sanitizers the guest kernel was built with (``CONFIG_KASAN``, ...)."""


class AgentRun(Protocol):
    """One run of any flavour, as the shared machinery reads it."""

    @property
    def spec(self) -> AgentSpec:
        """The spec the module was loaded with."""

    def numbers(self) -> dict[str, int]:
        """Every counter under one flat name, as scenario values name them.

        ``stats.x``, ``percpu.<cpu>.x``, ``core.<cpu>.x``, ``samples``, ``samples.cpu.<cpu>``.
        """

    def records(self) -> Sequence[object]:
        """The decoded records the run read (dataclasses with slots), in stream order."""


def narrow(run: AgentRun, kind: type[_R]) -> _R:
    """``run`` as the flavour's own run type ``kind``.

    :raise TypeError: another flavour's run was handed over.
    """
    if not isinstance(run, kind):
        raise TypeError(f"expected a {kind.__name__}, got a {type(run).__name__}")
    return run
