"""``invoke fuzz``: the request from the task's options, the result as lines.

request = fuzz_request(FuzzOptions(flavour="dt", quirk=("DT-D2",), budget_min=5.0))
result = fuzzlib.fuzz(request, Cache.default(), announce=print)
print(format_result(result))
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.builder.kernels import check_variant
from harness.errors import ConfigError
from harness.fuzz.session import FuzzRequest, FuzzResult

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
        f"artifacts: {result.run_dir}"
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
