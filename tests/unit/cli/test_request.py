"""One request a run: resolved once by the CLI, handed to pytest and its workers as JSON.

`resolve_request` is the one place the guest options are resolved; `request_json` and
`request_from_json` carry the result unchanged; `run_guest_tier` resolves once and gives
pytest the file, not options. The last tests run a real pytest (collection only, no
guest) with ``parse_kernel`` counted in every process, xdist workers included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from harness import arches
from harness.builder.images import GuestImages
from harness.builder.kernel import KernelChoice
from harness.cli import ci, session, testrun
from harness.cli.session import (
    FULL_SET_CPUS,
    REQUEST_ENV,
    GuestRequest,
    ResolvedRequest,
    request_from_json,
    request_json,
    resolve_request,
    tier_topologies,
)
from harness.errors import ConfigError
from harness.paths import REPO_ROOT
from harness.vm.argv import MachineSpec
from harness.vm.topology import CpuTopology, default_topology

REAL_POPEN = subprocess.Popen  # `Pytest` replaces the module's, in the test
EIGHT = GuestRequest(cpus=8, kernel="6.12", nmi=False, kernel_args=("nokaslr", "loglevel=8"))


def kernel_tree(root: Path) -> Path:
    """A directory `parse_kernel` takes for a kernel tree (a Makefile and a Kconfig)."""
    root.mkdir()
    (root / "Makefile").write_text("")
    (root / "Kconfig").write_text("")
    return root


@pytest.mark.parametrize(
    "asked",
    [GuestRequest(), EIGHT, GuestRequest(topology="2s2cl1c2t", variant="debug", memory_mib=512),
     GuestRequest(arch="x86_64", accel="tcg", cpus=3)],
    ids=["full-set", "eight", "topology", "x86"],
)  # fmt: skip
@pytest.mark.parametrize("flavours", [(), ("dt", "tprof")])
def test_a_request_comes_back_from_its_json_unchanged(
    asked: GuestRequest, flavours: tuple[str, ...]
) -> None:
    request = resolve_request(asked, flavours=flavours)
    assert request_from_json(request_json(request)) == request


def test_a_kernel_tree_and_a_list_of_guests_come_back_too(tmp_path: Path) -> None:
    tree = kernel_tree(tmp_path / "linux")
    tier = tier_topologies([2, 4], ["1s2cl2c2t"])
    request = resolve_request(GuestRequest(kernel_src=str(tree)), tier=tier)
    back = request_from_json(request_json(request))
    assert back == request
    assert back.kernel == KernelChoice(tree=tree.resolve())
    assert [t.name for t in back.topologies] == ["1s1cl2c1t", "2s1cl1c2t", "1s2cl2c2t"]


@pytest.mark.parametrize("text", ["", "{}", '{"asked": {}}', '{"asked": {"cpus": 8}, "x": 1}'])
def test_anything_else_is_not_a_request(text: str) -> None:
    with pytest.raises(ConfigError, match="not a request written by request_json"):
        request_from_json(text)


def test_a_request_that_names_no_guest_is_the_full_set() -> None:
    names = [t.name for t in resolve_request(GuestRequest()).topologies]
    assert names == [*(default_topology(n).name for n in FULL_SET_CPUS), "1s2cl2c2t"]


def test_cpus_and_topology_are_one_guest_and_must_agree() -> None:
    assert resolve_request(GuestRequest(cpus=8)).topologies == (default_topology(8),)
    agreed = resolve_request(GuestRequest(cpus=8, topology="2s2cl1c2t"))
    assert agreed.topologies == (CpuTopology.parse("2s2cl1c2t"),)
    with pytest.raises(ConfigError, match="drop --cpus or make them agree"):
        resolve_request(GuestRequest(cpus=4, topology="2s2cl1c2t"))


@pytest.mark.parametrize(
    ("asked", "says"),
    [(GuestRequest(arch="sparc"), "sparc"), (GuestRequest(variant="fast"), "fast"),
     (GuestRequest(kernel="5.10"), "5.10"), (GuestRequest(cpus=0), "at least 1")],
)  # fmt: skip
def test_bad_words_fail_where_they_are_resolved(asked: GuestRequest, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        resolve_request(asked)


def count_parse_kernel(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str | None]]:
    """Every call of `parse_kernel` from now on (the real one still answers)."""
    calls: list[tuple[str, str | None]] = []
    real = session.parse_kernel

    def counted(version: str, tree: str | None) -> KernelChoice:
        calls.append((version, tree))
        return real(version, tree)

    monkeypatch.setattr(session, "parse_kernel", counted)
    return calls


class Pytest:
    """`subprocess.Popen` where `testrun` starts pytest: records argv and environment.

    The child is a real, trivial process (``true``), so `testrun`'s waiting is the real one.
    """

    def __init__(self) -> None:
        self.runs: list[tuple[list[str], dict[str, str]]] = []

    def __call__(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        self.runs.append((list(argv), dict(kwargs["env"])))
        return REAL_POPEN(["true"])


@pytest.fixture
def tier(
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[GuestRequest, testrun.TierOptions], tuple[int, Pytest]]:
    """`run_guest_tier` with the host, image and process seams replaced (no QEMU, no build)."""

    def prepared(request: ResolvedRequest, cache: object) -> tuple[MachineSpec, GuestImages]:
        spec = MachineSpec(arch=arches.get(request.asked.arch), topology=request.topologies[0])
        return spec, cast(GuestImages, None)

    started = Pytest()
    monkeypatch.setattr(testrun, "prepare", prepared)
    monkeypatch.setattr(testrun, "prepare_images", lambda *args, **kwargs: None)
    monkeypatch.setattr(testrun, "find_kernel", lambda *args: None)
    monkeypatch.setattr("harness.cli.testrun.subprocess.Popen", started)

    def run(asked: GuestRequest, options: testrun.TierOptions) -> tuple[int, Pytest]:
        return testrun.run_guest_tier(asked, cast(Any, None), options), started

    return run


@pytest.mark.parametrize("complete", [False, True])
def test_invoke_test_resolves_the_kernel_once_and_pytest_gets_the_object(
    tier: Callable[[GuestRequest, testrun.TierOptions], tuple[int, Pytest]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    complete: bool,
) -> None:
    calls = count_parse_kernel(monkeypatch)
    junit = tmp_path / "run" / "junit.xml"
    status, started = tier(EIGHT, testrun.TierOptions(workers=2, complete=complete, junit=junit))
    assert status == 0
    assert calls == [("6.12", None)]  # once, --complete too (it was twice)
    [(argv, env)] = started.runs
    assert not {"--cpus", "--topology", "--kernel", "--arch", "--nmi"} & set(argv)
    assert env[REQUEST_ENV] == str(junit.with_name(testrun.REQUEST_FILE))
    assert request_from_json(Path(env[REQUEST_ENV]).read_text()) == resolve_request(EIGHT)


def test_the_flavours_are_checked_once_and_travel_in_the_file_not_as_options(
    tier: Callable[[GuestRequest, testrun.TierOptions], tuple[int, Pytest]], tmp_path: Path
) -> None:
    junit = tmp_path / "run" / "junit.xml"
    options = testrun.TierOptions(workers=1, flavours=("dt", "kprof"), junit=junit)
    _, started = tier(EIGHT, options)
    [(argv, env)] = started.runs
    assert not [word for word in argv if word.startswith("--flavour")]
    assert request_from_json(Path(env[REQUEST_ENV]).read_text()).flavours == ("dt", "kprof")


def test_an_unknown_flavour_fails_where_it_is_resolved() -> None:
    with pytest.raises(ConfigError, match="--flavour: unknown agent flavour 'nope'"):
        resolve_request(GuestRequest(), flavours=("tprof", "nope"))


def test_a_run_given_no_request_inherits_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    started = Pytest()
    monkeypatch.setattr("harness.cli.testrun.subprocess.Popen", started)
    monkeypatch.setenv(REQUEST_ENV, str(tmp_path / "stale.json"))
    assert testrun._run(testrun.pytest_argv(["tests/unit"], [], workers=1)) == 0
    [(_, env)] = started.runs
    assert REQUEST_ENV not in env


def test_a_ci_stage_hands_pytest_its_request_resolved_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    started = Pytest()
    monkeypatch.setattr("harness.cli.testrun.subprocess.Popen", started)
    monkeypatch.setattr(ci, "_prepare_for", lambda request, cache: None)  # no build
    monkeypatch.setattr(ci, "new_run_dir", lambda *parts: tmp_path)
    stage = next(s for s in ci.CI_STAGES if s.request.kernel == "6.12")
    ci.run_stage(stage, cast(Any, None))
    [(argv, env)] = started.runs
    saved = request_from_json(Path(env[REQUEST_ENV]).read_text())
    assert saved == resolve_request(stage.request)
    assert [t.cpus for t in saved.topologies] == [stage.request.cpus]
    assert not {"--kernel", "--cpus", "--variant"} & set(argv)  # nothing to parse again


#: Put in front of a child pytest's path: every process it starts, xdist workers too,
#: logs each call of parse_kernel (pid and caller) to $COUNT_LOG.
COUNTER = """\
import os
import harness.cli.session as session
_real = session.parse_kernel
def _counted(version, tree):
    with open(os.environ["COUNT_LOG"], "a") as log:
        log.write(f"{os.getpid()} {os.environ.get('PYTEST_XDIST_WORKER', 'controller')}\\n")
    return _real(version, tree)
session.parse_kernel = _counted
"""


def collect(tmp_path: Path, *args: str, request: Path | None = None) -> tuple[str, list[str]]:
    """A real pytest's collection of tests/guest (no guest boots): its output and the
    processes (controller, gw0...) where parse_kernel ran."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(COUNTER)
    log = tmp_path / "count.log"
    log.write_text("")
    env = {key: value for key, value in os.environ.items()  # as if started from a shell
           if key != REQUEST_ENV and not key.startswith("PYTEST_")}  # fmt: skip
    env |= {"PYTHONPATH": os.pathsep.join([str(site), str(REPO_ROOT)]), "COUNT_LOG": str(log)}
    if request is not None:
        env[REQUEST_ENV] = str(request)
    argv = [sys.executable, "-m", "pytest", "tests/guest", "--collect-only", "-q", *args]
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    return proc.stdout + proc.stderr, [line.split()[1] for line in log.read_text().splitlines()]


def test_pytest_given_the_file_resolves_nothing_again(tmp_path: Path) -> None:
    request = resolve_request(GuestRequest(topology="3s1cl1c1t", kernel="6.12"))
    saved = tmp_path / "request.json"
    saved.write_text(request_json(request))
    out, calls = collect(tmp_path, "-k", "test_boot", request=saved)
    assert calls == []  # not in pytest, not in a worker
    assert "test_boot.py::test_guest_kernel_sees_the_requested_topology[3s1cl1c1t]" in out
    assert "[1s1cl1c1t]" not in out


def test_pytest_run_directly_resolves_its_options_once_for_every_worker(tmp_path: Path) -> None:
    out, calls = collect(tmp_path, "-k", "test_boot", "--cpus", "3", "-n", "2")
    assert "[1s1cl3c1t]" in out, out
    assert calls == ["controller"]  # the workers are given the controller's request


def test_a_request_file_beside_guest_options_is_refused(tmp_path: Path) -> None:
    saved = tmp_path / "request.json"
    saved.write_text(request_json(resolve_request(EIGHT)))
    out, _ = collect(tmp_path, "--cpus", "2", request=saved)
    assert f"${REQUEST_ENV} names this run's guests" in out
