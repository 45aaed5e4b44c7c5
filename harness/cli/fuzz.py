"""``invoke fuzz``: the request from the task's options, the result as lines; CI's stage.

A request from the options, the fuzz run, its summary; CI fuzzes every flavour's
fixed agent with seed 1 and fails on a finding::

    request = fuzz_request(FuzzOptions(flavour="dt", quirk=("DT-D2",), budget_min=5.0))
    result = fuzzlib.fuzz(request, Cache.default(), announce=print)
    print(format_result(result))
    run_fuzz_stage(Cache.default())     # 0, or 1 when a fixed agent had a finding
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from harness.agent import flavours
from harness.agent.external import use_flavours
from harness.agent.scaffold import new_flavour
from harness.builder.cache import Cache
from harness.builder.kernels import check_variant
from harness.errors import ConfigError
from harness.fuzz.search import fuzz
from harness.fuzz.session import FuzzRequest, FuzzResult
from harness.vm.record import new_run_dir

LOG = logging.getLogger(__name__)

MAX_CPUS = 2  # one guest at a time on a 2-core host: ≤ 2 vCPUs


@dataclass(frozen=True, slots=True)
class FuzzOptions:
    """The task's options, as given."""

    flavour: str
    variant: str = "default"
    cpus: int = 2
    budget_min: float = 5.0
    shrink_min: float = 2.0
    seed: int = 0
    quirk: tuple[str, ...] = ()
    max_steps: int = 24


def fuzz_request(options: FuzzOptions) -> FuzzRequest:
    """The validated request.

    :raise ConfigError: a CPU count, budget or variant out of range.
    """
    if not 1 <= options.cpus <= MAX_CPUS:
        raise ConfigError(f"--cpus {options.cpus}: 1..{MAX_CPUS}")
    if options.budget_min <= 0 or options.shrink_min < 0:
        raise ConfigError("--budget must be > 0 minutes and --shrink ≥ 0")
    if not 1 <= options.max_steps <= 100:
        raise ConfigError(f"--max-steps {options.max_steps}: 1..100")
    return FuzzRequest(
        flavour=options.flavour,
        quirks=options.quirk,
        variant=check_variant(options.variant),
        cpus=options.cpus,
        budget_s=options.budget_min * 60,
        shrink_s=options.shrink_min * 60,
        seed=options.seed,
        max_steps=options.max_steps,
    )


def format_result(result: FuzzResult) -> str:
    """The run's summary: counts, then each finding and its scenario, or none."""
    lines = [
        f"{result.sequences} sequences, {result.calls} calls in {result.elapsed_s:.0f} s; "
        f"artifacts: {result.run_dir}",
        format_injected(result.injected),
    ]
    if result.scenario is None:
        lines.append("no finding")
        return "\n".join(lines)
    lines.append(
        f"first finding after {result.first_found_s:.0f} s, sequence "
        f"{result.first_found_sequence}; shrunk to {result.shrunk_steps} steps"
    )
    lines += [f"  {f.kind}: {f.what}" for f in result.findings]
    lines.append(f"scenario: {result.scenario} (replay: invoke repro {result.scenario.stem})")
    return "\n".join(lines)


def format_injected(injected: dict[str, tuple[int, int]] | None) -> str:
    """The fault-injection line: failures forced and steps refused per capability."""
    if injected is None:
        return "fault injection: not in this kernel (the debug variant has it)"
    shown = [f"{name} forced {forced} failure(s), {failed} step(s) refused"
             for name, (forced, failed) in sorted(injected.items())]  # fmt: skip
    return "fault injection: " + ("; ".join(shown) or "no fault op ran")


#: CI's fuzz stage: each flavour's fixed agent, the in-tree four and a port scaffolded
#: outside the tree, for this long each with seed 1 on the default kernel and 2 vCPUs
#: (a sequence takes 1-3 s there; a finding's shrinking gets `CI_FUZZ_SHRINK_S` more).
CI_FUZZ_BUDGET_S = 75.0
CI_FUZZ_SHRINK_S = 60.0
CI_FUZZ_SEED = 1
#: The scaffolded port's name in CI's fuzz stage (`invoke new-flavour`'s output, unchanged).
CI_SCAFFOLD = "fuzzport"


def run_fuzz_stage(cache: Cache, budget_s: float = CI_FUZZ_BUDGET_S) -> int:
    """Fuzz every in-tree flavour and a fresh scaffold's port; 1 if any run found something.

    A finding's scenario is written under the stage's run directory, not into
    ``scenarios/``; each run logs its summary line and its artifacts' folder.
    """
    out = new_run_dir("ci", "fuzz")
    scaffold = new_flavour(CI_SCAFFOLD, out / CI_SCAFFOLD).out
    names = (*flavours.names(), *use_flavours([scaffold]))
    found = []
    for number, name in enumerate(names, 1):
        LOG.info("fuzz %d/%d: %s, fixed agent, seed %d, %.0f s", number, len(names), name,
                 CI_FUZZ_SEED, budget_s)  # fmt: skip
        request = FuzzRequest(flavour=name, budget_s=budget_s, shrink_s=CI_FUZZ_SHRINK_S,
                              seed=CI_FUZZ_SEED, scenario_dir=out)  # fmt: skip
        result = fuzz(request, cache, announce=LOG.debug)
        for line in format_result(result).splitlines():
            (LOG.error if result.scenario else LOG.info)("fuzz %s: %s", name, line)
        if result.scenario is not None:
            found.append(name)
    if found:
        LOG.error("fuzz: findings on the fixed agent of %s", ", ".join(found))
    return 1 if found else 0
