"""What each option of each invoke task means: the ``help`` of ``tasks.py``'s tasks.

One dict per task, option name to the line ``invoke --help TASK`` shows, so the
tasks themselves stay a few lines each (an option block is part of a parser's size).
`GUEST` holds the options of every task that boots a guest, `FLAVOUR_PATH` the
``--flavour-path`` every flavour-aware task takes::

    @task(help=taskhelp.SHELL)
    def shell(c: Context, cpus: str | None = None, ...) -> None: ...
"""

from __future__ import annotations

from harness.agent import flavours

GUEST = {
    "cpus": "number of vCPUs (default layout spreads them over sockets, clusters, SMT)",
    "topology": "explicit layout, e.g. sockets=2,clusters=2,cores=1,threads=2 or 2s2cl1c2t",
    "arch": "guest architecture: arm64 (default; vPMU under TCG) or x86_64",
    "variant": "kernel variant: default, debug (lockdep, kmemleak, KASAN, UBSAN) or kcsan",
    "accel": "auto (KVM only where a real boot probe works), kvm or tcg",
    "nmi": "on: PMU interrupts as (pseudo-)NMIs; off: as ordinary IRQs (arm64 only)",
    "append": "extra guest kernel arguments, e.g. 'nokaslr loglevel=8'",
    "memory": "guest memory in MiB (default 1024)",
    "kernel": "guest kernel version from Debian's linux-source packages: 6.1 (default) or 6.12",
    "kernel_src": "build and boot this kernel source tree instead (clean or dirty checkout)",
}

FLAVOUR_PATH = (
    "a flavour package outside the tree, or the checkout holding one (its pyproject.toml "
    "declares it), repeatable; exported as PROFBENCH_FLAVOUR_PATH to the tests"
)

KERNEL = {
    "arch": GUEST["arch"],
    "variant": GUEST["variant"],
    "jobs": "parallel make jobs (default: one per host CPU)",
    "kernel": GUEST["kernel"],
    "kernel_src": GUEST["kernel_src"],
}

ROOTFS = {
    "arch": GUEST["arch"],
    "relock": "pin today's Debian versions in guest/rootfs/<arch>.lock.json",
}

IMAGES = {
    "arch": GUEST["arch"],
    "variant": GUEST["variant"],
    "kernel": GUEST["kernel"],
    "kernel_src": GUEST["kernel_src"],
    "key": "only print the kernel's cache key (CI's actions/cache key)",
}

TEST = {
    **GUEST,
    "workers": "pytest-xdist workers (default: one per host core, one for a guest of over 8 vCPUs)",
    "k": "only tests (or matrix cells) matching this pytest -k expression",
    "selftests": "also run the harness's own failure-path and CLI checks",
    "complete": "first build the images the tier's other checks need (debug kernel, "
    "x86_64), so none skips for want of one",
    "matrix": "run a named matrix from tests/matrix.toml (quick, full) instead",
    "n": "matrix workers: auto (one per host core) or a number",
    "no_snapshot": "boot guests cold instead of restoring them from snapshots",
    "flavour": "only this flavour's tests (with --matrix: its cells on the matrix's "
    "guests); repeatable, one outside the tree too",
    "flavour_path": FLAVOUR_PATH,
    "ktap": "print the run's KTAP (also written beside its JUnit as ktap.txt) on "
    "standard output instead of pytest's tables",
}

SHELL = GUEST

BENCH = {
    "out": "JSON output path (default artifacts/bench/bench-<time>.json)",
    "cold": "also time a cold kernel and rootfs build in a scratch cache (~4 min)",
    "repeats": "boots per vCPU count (the median is reported)",
    "matrix": "matrix timed with 1 worker and the CPU budget (none: skip)",
    "test_wall": "also time `invoke test --cpus 8` with and without snapshots (minutes)",
    "only_boots": "only cold boot and restore times (and --test-wall)",
    "against": "time `invoke test` of this tree and of commit REV alternately, side "
    "by side (with or without --test-wall; nothing else is measured)",
    "k": "with --against: the tests to time (pytest -k; default the whole tier)",
    "rounds": "with --against: REV-then-this-tree rounds",
    "warmup": "with --against: run each tree's tier once, untimed, before the rounds "
    "(agents whose template changed are built there)",
    "kernel": GUEST["kernel"],
    "kernel_src": GUEST["kernel_src"],
}

_FLAVOURS = ", ".join(flavours.FLAVOURS)
AGENT = {
    "flavour": f"agent flavour: {_FLAVOURS}, or one outside the tree (--flavour-path)",
    "event": "cycles, instructions or cpu-clock",
    "period": "events between overflows",
    "drain": "auto (periodic) or manual (kicks)",
    "drain-ms": "auto drain period",
    "out": "output directory (default artifacts/agent/<time>-<flavour>)",
    "quirks": "seed defects to reproduce: a mask (0x3) or names (TP-D1,TP-D2)",
    "param": "a flavour's own load parameter, NAME=VALUE, repeatable "
    "(tprof: est_freq, buffer_samples, list_limit; see its data.py)",
    "arch": GUEST["arch"],
    "variant": GUEST["variant"],
    "kernel": GUEST["kernel"],
    "kernel_src": GUEST["kernel_src"],
    "flavour_path": FLAVOUR_PATH,
}

NEW_FLAVOUR = {
    "name": "the new flavour's name: lower-case letters, digits and _",
    "out": "the directory to write (new or empty; default ./profbench-NAME)",
}

MATRIX = {
    "name": "a matrix in tests/matrix.toml (quick, full)",
    "format": "text (one cell id a line), github (a strategy matrix as JSON) or "
    "images (the kernels its cells boot, once each, as a strategy matrix)",
    "k": "only cells whose id contains this",
    "flavour": "only this flavour's cells (repeatable; one outside the tree: a cell "
    "on each of the matrix's guests)",
    "flavour_path": FLAVOUR_PATH,
}

REPRO = {
    "scenario": "a scenario name in scenarios/ or a path to a .toml file "
    "(with --bundle: a bundle directory)",
    "repeat": "attempts (default: the scenario's own count; --deterministic: 2)",
    "bundle": "replay the bundle directory given instead, and compare verdicts",
    "dump_memory": "on a guest failure, save the guest's memory (QMP dump-guest-memory)",
    "deterministic": "run input-free, deterministic instruction for instruction (one TCG "
    "thread, icount, fixed seed and clock, no network); every number "
    "must repeat",
    "record": "1-vCPU scenarios: run input-free and keep QEMU's record/replay log",
    "replay": "with --bundle: replay a recording (or re-run a --deterministic bundle) "
    "and compare every number with the recorded one",
    "gdb": "with --replay: start stopped, with QEMU's gdbstub on a port it prints",
    "witness": "with --deterministic: gdb on QEMU's gdbstub from the start sees every "
    "overflow the kernel hands the agent, judged against the run's counts and records "
    "(1 vCPU: every attempt; more: one extra attempt, not compared)",
    "no_snapshot": "boot each attempt's guest cold instead of restoring its snapshot "
    "(deterministic runs never use snapshots)",
    "flavour_path": FLAVOUR_PATH,
}

CACHE = {"prune": "remove entries the current tree no longer builds, and unfinished ones"}

MUTANTS = {
    "full": "also the mutants that end their guest and the debug-kernel ones",
    "cpus": "vCPUs of the mutation guests (default 2)",
    "flavour": "only this flavour's standard and exact runs (repeatable; default all)",
    "mutant": "only this mutant beside the control (repeatable; default all)",
    "per_oracle": "one mutant per oracle of the quick set (CI's and invoke judge's share)",
    "kernel": GUEST["kernel"],
    "kernel_src": GUEST["kernel_src"],
    "flavour_path": FLAVOUR_PATH,
}

FUZZ = {
    "flavour": "the flavour whose control interface is fuzzed (its interface.py)",
    "variant": "guest kernel: default, debug (lockdep, KASAN, kmemleak) or kcsan",
    "cpus": "vCPUs of the one guest (1 or 2)",
    "budget": "minutes of search before giving up (shrinking a finding takes up to --shrink more)",
    "shrink": "minutes spent shrinking the first finding (default 2)",
    "seed": "Hypothesis's seed: the same seed draws the same sequences",
    "quirk": "build the agent with this defect (repeatable), e.g. DT-D2",
    "max_steps": "steps drawn per sequence at most (default 24)",
    "flavour_path": FLAVOUR_PATH,
}

CI = {"workers": "xdist workers for the guest tier (default 2: this machine's cores)"}

JUDGE = {
    "flavour": "the flavour to judge: in the tree or found with --flavour-path",
    "flavour_path": FLAVOUR_PATH,
}
