"""This run's one request: the `ResolvedRequest` every test module reads, never an option.

``invoke test`` resolves its options once (`harness.cli.session.resolve_request`) and
names the JSON file it wrote with ``$PROFBENCH_REQUEST``; a pytest run given none
resolves its own guest options (`add_options`: ``--arch``, ``--cpus N`` and
``--topology T``, both repeatable, with neither the full set; ``--variant``,
``--accel``, ``--nmi on|off``, ``--kernel``..., ``--flavour NAME``) through the same
function, once, in its controller. `settle` does either in ``pytest_configure``; an
xdist worker is given the controller's object (`hand_to_worker`) and resolves
nothing. Every reader asks `of`, or takes tests/conftest.py's ``run_request``
fixture::

    variant = runrequest.of(config).variant   # a hook, a plugin (tests/limits.py)
    def test_x(run_request: ResolvedRequest) -> None: ...   # a test

Nothing is written back into pytest's options: with a request file, ``--kernel`` is
pytest's default, not this run's kernel, so no test module reads those options.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

import pytest

from harness.cli import session
from harness.cli.session import GuestRequest, ResolvedRequest
from harness.errors import HarnessError
from harness.vm.topology import CpuTopology

KEY = pytest.StashKey[ResolvedRequest]()
WORKER_INPUT = "profbench-request"  # the controller's request, as JSON, in a worker's input
ASKED = GuestRequest()  # the options' defaults
FLAVOUR_OPTION = "--flavour"


def add_options(parser: pytest.Parser) -> None:
    """The guest options of a pytest run given no request file (read by `_options` only)."""
    group = parser.getgroup("profbench", "profbench guest selection")
    group.addoption("--arch", default=ASKED.arch, help="guest architecture")
    group.addoption("--cpus", type=int, action="append", default=[], help="vCPU count")
    group.addoption("--topology", action="append", default=[], help="explicit layout")
    group.addoption("--variant", default=ASKED.variant, help="kernel variant")
    group.addoption("--accel", default=ASKED.accel, help="auto, kvm or tcg")
    group.addoption("--nmi", default="on" if ASKED.nmi else "off", help="on or off")
    group.addoption("--memory-mib", type=int, default=ASKED.memory_mib, help="guest memory")
    group.addoption("--append", action="append", default=[], help="extra kernel argument")
    group.addoption("--kernel", default=ASKED.kernel, help="Debian kernel version (6.1, 6.12)")
    group.addoption("--kernel-src", default=None, help="a kernel source tree to build instead")
    group.addoption(FLAVOUR_OPTION, action="append", default=[], help="only this flavour's "
                    "tests (repeatable; one outside the tree too)")  # fmt: skip


def settle(config: pytest.Config) -> ResolvedRequest:
    """Resolve this run's request once (`_resolve`) and keep it for `of`.

    :raise pytest.UsageError: a request that does not hold (an unknown flavour, kernel...),
        or both a file and options; before any test is collected.
    """
    config.stash[KEY] = _resolve(config)
    return config.stash[KEY]


def of(config: pytest.Config) -> ResolvedRequest:
    """This run's request, as `settle` resolved it (or the controller, in a worker)."""
    return config.stash[KEY]


class WorkerNode(Protocol):  # an xdist WorkerController, as far as this file uses one
    config: pytest.Config
    workerinput: dict[str, object]


def hand_to_worker(node: WorkerNode) -> None:
    """Give an xdist worker the controller's request: it resolves nothing again."""
    node.workerinput[WORKER_INPUT] = session.request_json(of(node.config))


def _resolve(config: pytest.Config) -> ResolvedRequest:
    """The controller's (in an xdist worker), ``invoke test``'s (the file
    ``$PROFBENCH_REQUEST`` names, beside no guest option) or the options' (`_options`).

    :raise pytest.UsageError: a request that does not hold, or both a file and options.
    """
    text = getattr(config, "workerinput", {}).get(WORKER_INPUT)
    try:
        if text is None and (path := os.environ.get(session.REQUEST_ENV)):
            if _options(config) != (ASKED, None, ()):
                raise pytest.UsageError(f"${session.REQUEST_ENV} names this run's guests ({path}): "
                                        "give no guest options beside it")  # fmt: skip
            text = Path(path).read_text()
        if text is None:
            asked, tier, flavours = _options(config)
            return session.resolve_request(asked, tier=tier, flavours=flavours)  # as the CLI
        return session.request_from_json(str(text))
    except (HarnessError, OSError) as exc:
        raise pytest.UsageError(str(exc)) from exc


def _options(
    config: pytest.Config,
) -> tuple[GuestRequest, tuple[CpuTopology, ...] | None, tuple[str, ...]]:
    """The guest options as words (a rerun's), the guests they list (None: no list) and
    the flavours they name: the only place these options are read."""
    cpus: list[int] = config.getoption("--cpus")
    texts: list[str] = config.getoption("--topology")
    asked = GuestRequest(
        arch=config.getoption("--arch"), variant=config.getoption("--variant"),
        accel=config.getoption("--accel"), nmi=session.parse_nmi(config.getoption("--nmi")),
        memory_mib=config.getoption("--memory-mib"),
        kernel_args=tuple(config.getoption("--append")),
        kernel=config.getoption("--kernel"), kernel_src=config.getoption("--kernel-src"),
        cpus=cpus[0] if len(cpus) == 1 else None, topology=texts[0] if len(texts) == 1 else None,
    )  # fmt: skip
    tier = session.tier_topologies(cpus, texts) if cpus or texts else None
    return asked, tier, tuple(config.getoption(FLAVOUR_OPTION))
