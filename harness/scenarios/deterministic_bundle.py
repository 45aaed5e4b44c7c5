"""Bundles of deterministic runs: ``invoke repro --deterministic``, ``--record``, ``--replay``.

Besides what every repro bundle holds (`harness.scenarios.repro`), a deterministic
bundle has ``deterministic.json``: the mode and seed, the kernel and rootfs (paths in
the content-addressed cache and their sha256), the extra cpio (``guest/extra.cpio``,
with ``guest/run.sh`` beside it to read), the agent module's hash, the timeout
scale (it sets a module parameter), the commands the guest ran, and per attempt
the full QEMU argv, the numbers, the wall time and the rr log
(``attempt-1/rr.bin`` when recorded). A replay checks every identity first::

    result = run_deterministic(scenario, Cache.default(), mode="deterministic", attempts=2)
    again = replay_deterministic(result.repro.bundle, Cache.default())   # rr replay or re-run
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from harness import arches
from harness.agent.module.build import export_agent
from harness.agent.mutants import NONE
from harness.agent.profctl_build import build_profctl
from harness.agent.truth.build import TRUTH_BINARY
from harness.builder.cache import Cache, file_sha256, write_json_atomic
from harness.builder.images import GuestImages, prepare_images
from harness.builder.kernel import KernelChoice
from harness.errors import ConfigError, InfraError
from harness.scenarios.deterministic import (
    SKIPPED_ACTIONS,
    DeterministicAttempt,
    DeterministicResult,
    DeterministicSetup,
    attempt,
    attempt_apart,
    deterministic_run,
    input_free_script,
    plan_guest,
    skipped_actions,
)
from harness.scenarios.identity import NOT_DETERMINISTIC, compare_attempts, summary_record
from harness.scenarios.inputfree import GuestPlan, extra_cpio, render_run_script
from harness.scenarios.load import (
    Scenario,
    find_scenario,
    load_scenario,
    scenario_record,
    scenario_source,
)
from harness.scenarios.repro import ReproResult, _as_named, _verdict_dict, write_bundle_ktap
from harness.scenarios.witnessing import (
    WITNESS_ASIDE,
    witness_logs_identical,
    witness_plan,
    witnessed_attempts,
)
from harness.timeouts import Timeouts
from harness.vm.argv import FIXED_RTC_BASE, DeterministicKind, DeterministicRun, MachineSpec
from harness.vm.record import host_facts, new_run_dir, spec_record

LOG = logging.getLogger(__name__)
MANIFEST = "deterministic.json"
EXTRA_CPIO = "guest/extra.cpio"


def run_deterministic(scenario: Scenario, cache: Cache, *, kind: DeterministicKind, attempts: int,
                      out: Path | None = None, mutant: str = NONE,
                      witness: bool = False) -> DeterministicResult:  # fmt: skip
    """Run ``scenario`` input-free ``attempts`` times under ``mode`` into a new bundle.

    ``record`` needs a 1-vCPU scenario; ``deterministic`` takes any. ``mutant`` builds
    a deliberate sabotage in (guest tests of budgets only make sense under ``-icount``).
    ``witness`` (``deterministic`` only) has the witness watch (`harness.scenarios.witnessing`)
    and judges what it saw: every attempt of a 1-vCPU guest, where witnessed runs repeat
    each other; with more vCPUs they do not (`WITNESS_ASIDE`), so the attempts compared
    run unwitnessed and one more attempt (``witnessed/``) is witnessed and judged apart.

    :raise ConfigError: the scenario cannot run deterministically (KVM, several vCPUs to record).
    :raise GuestError: a run crashed or hung.
    :raise InfraError: the host side failed.
    """
    if kind == "replay":
        raise ConfigError("a replay starts from a bundle: invoke repro --bundle DIR --replay")
    if witness and kind != "deterministic":
        raise ConfigError("the witness watches --deterministic runs only (not --record)")
    spec = _spec(scenario, kind)  # refuses what cannot run deterministically, before any bundle
    bundle = out or new_run_dir("repro", scenario.name)
    (bundle / "scenario.toml").write_text(scenario_source(scenario))
    (bundle / "scenario.json").write_text(json.dumps(scenario_record(scenario), indent=1) + "\n")
    images = prepare_images(spec.arch, scenario.guest.variant, cache,
                            kernel=KernelChoice(scenario.guest.kernel))  # fmt: skip
    setup = _setup(scenario, spec, images, cache, bundle, mutant=mutant, witness=witness)
    each, apart = witnessed_attempts(witness, spec.topology.cpus)
    try:
        done = [
            attempt(setup, _attempt_run(kind, scenario.seed, bundle / f"attempt-{n}",
                                        witness=each), bundle / f"attempt-{n}")
            for n in range(1, attempts + 1)
        ]  # fmt: skip
        aside = None
        if apart:
            run = _attempt_run(kind, scenario.seed, bundle / "witnessed", witness=True)
            aside = attempt_apart(setup, run, bundle / "witnessed")
    finally:
        setup.initrd.unlink(missing_ok=True)  # rootfs + extra cpio: rebuilt for a replay
    manifest = _manifest(kind, scenario, spec, images, setup, done)
    if aside is not None:
        manifest["witnessed_aside"] = _attempt_record(aside, kind)
    write_json_atomic(bundle / MANIFEST, manifest)
    result = _result(bundle, scenario, done, [f"attempt {n}" for n in range(1, attempts + 1)],
                     [a.numbers for a in done], aside=aside)  # fmt: skip
    skipped = skipped_actions(scenario) if kind == "deterministic" else ()
    notes = [f"{name}: {SKIPPED_ACTIONS}" for name in skipped]
    if aside is not None:
        notes.append(f"witness: {WITNESS_ASIDE}")
    return replace(result, notes=tuple(notes))


def _attempt_run(kind: DeterministicKind, seed: int, workdir: Path, *,
                 witness: bool) -> DeterministicRun:  # fmt: skip
    rr_file = workdir / "rr.bin" if kind == "record" else None
    return deterministic_run(kind, seed, rr_file, witness=witness)


def _spec(scenario: Scenario, kind: DeterministicKind) -> MachineSpec:
    guest = scenario.guest
    if guest.accel == "kvm":
        raise ConfigError(f"{scenario.name} asks for KVM; deterministic runs need TCG (-icount)")
    spec = MachineSpec(arch=arches.get(guest.arch), topology=guest.topology, nmi=guest.nmi,
                       accel="tcg", kernel_args=guest.kernel_args)  # fmt: skip
    # Checks the mode against the machine now (record: 1 vCPU), before anything is built.
    rr_file = None if kind == "deterministic" else Path("-")
    replace(spec, deterministic=DeterministicRun(kind=kind, seed=scenario.seed, rr_file=rr_file))
    return spec


def _setup(scenario: Scenario, spec: MachineSpec, images: GuestImages, cache: Cache,
           bundle: Path, *, timeouts: Timeouts | None = None, mutant: str = NONE,
           witness: bool = False) -> DeterministicSetup:  # fmt: skip
    """Build the agent and profctl, plan the guest's commands, write the extra cpio."""
    build = export_agent(scenario.agent, images, cache, bundle / "agent", mutant=mutant)
    draft = DeterministicSetup(scenario=scenario, spec=spec, kernel=images.files.kernel,
                               vmlinux=images.vmlinux,
                               initrd=bundle / "guest" / "initrd.cpio", plan=GuestPlan(()),
                               script=input_free_script(scenario), build=build,
                               profctl=build_profctl(spec.arch, cache),
                               timeouts=timeouts or Timeouts.from_env(),
                               witness=witness_plan(images, cache, nmi_on=spec.nmi)
                               if witness else None)  # fmt: skip
    (bundle / "plan").mkdir(exist_ok=True)
    setup = replace(draft, plan=plan_guest(draft, bundle / "plan"))
    extra = bundle / EXTRA_CPIO
    extra.parent.mkdir(exist_ok=True)
    truth = setup.profctl.parent / TRUTH_BINARY  # built beside profctl
    extra.write_bytes(extra_cpio(setup.plan, ko=build.ko.read_bytes(),
                                 profctl=setup.profctl.read_bytes(),
                                 truth=truth.read_bytes()))  # fmt: skip
    (bundle / "guest" / "run.sh").write_text(render_run_script(setup.plan))
    _concatenate(images.files.initrd, extra, setup.initrd)
    return setup


def _concatenate(rootfs: Path, extra: Path, target: Path) -> None:
    """The initramfs QEMU boots: the rootfs cpio, then the extra one (a later member wins)."""
    with target.open("wb") as out:
        for part in (rootfs, extra):
            with part.open("rb") as source:
                shutil.copyfileobj(source, out)


def _manifest(kind: DeterministicKind, scenario: Scenario, spec: MachineSpec,
              images: GuestImages, setup: DeterministicSetup,
              done: Sequence[DeterministicAttempt]) -> dict[str, object]:  # fmt: skip
    bundle = done[0].workdir.parent
    return {
        "kind": kind, "seed": scenario.seed, "rtc_base": FIXED_RTC_BASE,
        "machine": spec_record(spec),
        "kernel": {"path": str(images.files.kernel), "sha256": images.kernel_sha256},
        "rootfs": {"path": str(images.files.initrd), "sha256": images.rootfs_sha256},
        "extra_cpio": {"path": EXTRA_CPIO, "sha256": file_sha256(bundle / EXTRA_CPIO)},
        "agent_ko_sha256": file_sha256(setup.build.ko),
        "timeout_scale": setup.timeouts.scale,
        "commands": list(setup.plan.commands),
        "witness": any(a.witness is not None for a in done),
        "not_deterministic": dict(NOT_DETERMINISTIC),
        "host_actions_not_performed": {
            name: SKIPPED_ACTIONS for name in skipped_actions(scenario) if kind == "deterministic"
        },
        "attempts": [_attempt_record(a, kind) for a in done],
    }  # fmt: skip


def _attempt_record(a: DeterministicAttempt, kind: DeterministicKind) -> dict[str, object]:
    return {"dir": a.workdir.name, "argv": list(a.argv), "numbers": dict(a.numbers),
            "wall_s": round(a.wall_s, 3), "profagent_text": a.module_text,
            "rr_file": f"{a.workdir.name}/rr.bin" if kind == "record" else None,
            "witness": a.witness.status if a.witness else None}  # fmt: skip


def _result(bundle: Path, scenario: Scenario, done: Sequence[DeterministicAttempt],
            headers: Sequence[str], numbers: Sequence[Mapping[str, int]], *,
            aside: DeterministicAttempt | None = None) -> DeterministicResult:  # fmt: skip
    rows = compare_attempts(numbers)
    verdicts = tuple(a.verdicts for a in done)
    reproduced = sum(all(v.held for v in one) for one in verdicts)
    record = {"scenario": scenario.name, "seed": scenario.seed, "accel": "tcg",
              "host": host_facts(), "attempts": len(done), "reproduced": reproduced,
              "verdicts": [[_verdict_dict(v) for v in one] for one in verdicts],
              "deterministic": True, "manifest": MANIFEST,
              "wall_s": [round(a.wall_s, 3) for a in done],
              "across_attempts": summary_record(rows)}  # fmt: skip
    labelled = [(f"attempt {n}", a) for n, a in enumerate(done, 1)]
    if aside is not None:
        labelled.append((f"witnessed attempt ({aside.wall_s:.1f}s, not compared)", aside))
    seen = tuple(a.witness for _, a in labelled if a.witness is not None)
    labels = tuple(label for label, a in labelled if a.witness is not None)
    same = witness_logs_identical([a.workdir for a in done if a.witness is not None])
    if seen:
        record["witness"] = {"status": [w.status for w in seen], "logs_identical": same,
                             "aside": aside is not None,
                             "aside_verdicts": [_verdict_dict(v) for v in aside.verdicts]
                             if aside else []}  # fmt: skip
    write_json_atomic(bundle / "bundle.json", record)
    write_bundle_ktap(bundle, scenario.name, verdicts)
    return DeterministicResult(ReproResult(bundle, len(done), reproduced, verdicts), rows,
                               tuple(headers), tuple(a.wall_s for a in done), witnessed=seen,
                               witness_labels=labels, witness_logs_identical=same)  # fmt: skip


def is_deterministic_bundle(bundle: Path) -> bool:
    """Whether ``bundle`` was written by a deterministic run (it has ``deterministic.json``)."""
    return (bundle / MANIFEST).is_file()


def replay_deterministic(bundle: Path, cache: Cache, *, gdb: bool = False,
                  announce: Callable[[str], None] = lambda _: None,
                  ) -> DeterministicResult:  # fmt: skip
    """Replay a recorded bundle (rr), or re-run a deterministic one; compare every number.

    The kernel, rootfs, extra cpio and module must be those recorded; the QEMU
    command line must be the recorded one but for the mode and per-run paths.

    :raise ConfigError: not a deterministic bundle, or an identity changed (named).
    :raise InfraError: the replay's argv differs from the recording's.
    """
    bundle = bundle.resolve()
    if not is_deterministic_bundle(bundle):
        raise ConfigError(f"{bundle} has no {MANIFEST}: record it with --record or "
                          "--deterministic first")  # fmt: skip
    manifest = json.loads((bundle / MANIFEST).read_text())
    scenario = load_scenario(_as_named(bundle))
    kind: DeterministicKind = (
        "replay" if manifest.get("kind", manifest.get("mode")) == "record" else "deterministic"
    )
    spec = _spec(scenario, kind)
    images = prepare_images(spec.arch, scenario.guest.variant, cache,
                            kernel=KernelChoice(scenario.guest.kernel))  # fmt: skip
    _check_identities(bundle, manifest, images)
    out = new_run_dir("repro", f"{scenario.name}-replay")
    shutil.copy2(bundle / "scenario.toml", out / "scenario.toml")
    # A witnessed bundle is re-run witnessed: gdb's stops restart the round-robin slice
    # of vCPUs, so the witness is part of what the numbers were measured under.
    witness = bool(manifest.get("witness")) and kind == "deterministic" and not gdb
    setup = _replay_setup(bundle, manifest, scenario=scenario, spec=spec, images=images,
                          cache=cache, out=out, witness=witness)  # fmt: skip
    recorded = manifest["attempts"][0]
    rr_file = bundle / recorded["rr_file"] if recorded["rr_file"] else None
    workdir = out / "replay"
    try:
        workdir.mkdir()
        gdb_dir = workdir if gdb else None
        run = deterministic_run(kind, scenario.seed, rr_file, gdb_dir, witness=witness)
        again = attempt(setup, run, workdir,
                        lambda port: announce(gdb_hint(port, setup, bundle, recorded)))  # fmt: skip
    finally:
        setup.initrd.unlink(missing_ok=True)
    problems = argv_differences(recorded["argv"], again.argv,
                                (str(bundle / recorded["dir"]), str(workdir)))  # fmt: skip
    if problems:
        raise InfraError(f"the replay started QEMU otherwise than the recording: {problems}")
    return _result(out, scenario, [again], ("recorded", "replayed"),
                   [recorded["numbers"], dict(again.numbers)])  # fmt: skip


def gdb_hint(
    port: int, setup: DeterministicSetup, bundle: Path, recorded: Mapping[str, str]
) -> str:
    """How to attach gdb to a replay waiting on ``port`` (symbols, the module's address)."""
    text = recorded.get("profagent_text") or "<the module's .text; not recorded>"
    return "\n".join((
        f"QEMU's gdbstub waits on 127.0.0.1:{port}; the guest is stopped at its first "
        "instruction, with snapshot 'start' taken for reverse execution. Attach with:",
        f"  gdb-multiarch {setup.vmlinux} -ex 'target remote 127.0.0.1:{port}'",
        f"  (gdb) add-symbol-file {bundle / 'agent' / setup.build.ko.name} {text}",
        "then e.g. break pa_produce, continue, continue, reverse-continue (the previous "
        "hit), reverse-stepi. Quit gdb to let the replay run to its end and be compared.",
    ))  # fmt: skip


def _check_identities(bundle: Path, manifest: dict[str, object], images: GuestImages) -> None:
    now = {"kernel": (images.files.kernel, images.kernel_sha256),
           "rootfs": (images.files.initrd, images.rootfs_sha256)}  # fmt: skip
    for key, (path, sha) in now.items():
        recorded = manifest[key]
        assert isinstance(recorded, dict)
        if recorded["sha256"] != sha or recorded["path"] != str(path):
            raise ConfigError(f"the bundle's {key} was {recorded['path']} (sha256 "
                              f"{recorded['sha256']}); the tree builds {path} ({sha}) now: "
                              "replay needs the recorded image")  # fmt: skip
    extra = manifest["extra_cpio"]
    assert isinstance(extra, dict)
    if file_sha256(bundle / extra["path"]) != extra["sha256"]:
        raise ConfigError(f"{bundle / extra['path']} changed since the recording")


def _replay_setup(bundle: Path, manifest: dict[str, object], *, scenario: Scenario,
                  spec: MachineSpec, images: GuestImages, cache: Cache, out: Path,
                  witness: bool) -> DeterministicSetup:  # fmt: skip
    scale = manifest["timeout_scale"]
    assert isinstance(scale, float | int)
    setup = _setup(scenario, spec, images, cache, out, timeouts=Timeouts().scaled_by(scale),
                   witness=witness)  # fmt: skip
    if file_sha256(setup.build.ko) != manifest["agent_ko_sha256"]:
        raise ConfigError(
            "the agent module built now differs from the recorded one (the "
            "templates changed): its decoder could misread the recording"
        )
    commands = manifest["commands"]
    assert isinstance(commands, list)
    if tuple(commands) != setup.plan.commands:
        raise ConfigError("the harness now plans other guest commands than the recording ran")
    _concatenate(images.files.initrd, bundle / EXTRA_CPIO, setup.initrd)  # the recorded one
    return setup


def _normal_token(token: str, workdir: str) -> str:
    fixed = re.sub(r"\S*/guest/initrd\.cpio", "INITRD", token.replace(workdir, "RUN"))
    for pattern, replacement in _VARIABLE:
        fixed = pattern.sub(replacement, fixed)
    return fixed


_VARIABLE = (
    (re.compile(r"fd=\d+"), "fd=N"),  # the QMP socket's descriptor
    (re.compile(r"rr=(record|replay)"), "rr=MODE"),
    (re.compile(r"rrfile=[^,]*"), "rrfile=RR"),
)


def argv_differences(recorded: Sequence[str], now: Sequence[str],
                     workdirs: tuple[str, str]) -> list[str]:  # fmt: skip
    """Where ``now`` differs from ``recorded`` beyond the mode, the gdbstub and run paths.

    ``workdirs`` is (recording's run dir, replay's run dir); the initramfs path is per run.
    """

    def normal(argv: Sequence[str], workdir: str) -> list[str]:
        debug = {"-gdb", "-drive"}  # a replay's debugging additions
        tokens = [t for i, t in enumerate(argv)
                  if t not in {"-S", *debug} and (i == 0 or argv[i - 1] not in debug)]  # fmt: skip
        return [_normal_token(token, workdir) for token in tokens]

    before, after = normal(recorded, workdirs[0]), normal(now, workdirs[1])
    if len(before) != len(after):
        return [f"{len(before)} tokens recorded, {len(after)} now"]
    return [f"{a!r} → {b!r}" for a, b in zip(before, after, strict=True) if a != b]


def repro_deterministic(target: str, cache: Cache, *, bundle: bool, kind: DeterministicKind,
                        repeat: int = 0, gdb: bool = False, witness: bool = False,
                        announce: Callable[[str], None] = lambda _: None,
                        ) -> DeterministicResult:  # fmt: skip
    """What ``invoke repro`` runs for ``--deterministic``, ``--record`` and ``--replay``.

    ``target`` is a scenario (name or path), or with ``bundle`` a bundle directory.
    ``witness``: watch a ``--deterministic`` run's overflows from gdb (a replay of a
    witnessed bundle is witnessed by itself).

    :raise ConfigError: the options do not fit together, or the scenario cannot run
        deterministically.
    """
    if gdb and kind != "replay":
        raise ConfigError("--gdb opens the gdbstub of a replay: --bundle DIR --replay --gdb")
    if (kind == "replay") != bundle:
        raise ConfigError("--replay takes a bundle (--bundle DIR --replay), and a bundle is "
                          "replayed instruction for instruction only with --replay")  # fmt: skip
    if kind == "replay":
        return replay_deterministic(Path(target), cache, gdb=gdb, announce=announce)
    scenario = load_scenario(find_scenario(target))
    attempts = repeat or (2 if kind == "deterministic" else 1)
    if kind == "record" and attempts != 1:
        raise ConfigError("--record makes one recording; replay it with --bundle DIR --replay")
    return run_deterministic(scenario, cache, kind=kind, attempts=attempts,
                             witness=witness and kind == "deterministic")  # fmt: skip
