"""A pooled guest's state: parsed, compared, and put back by commands a fake guest runs."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.errors import InfraError
from harness.vm.baseline import (
    AFTER,
    CPU_TIME,
    SAMPLE_RATE,
    STATE_COMMAND,
    GuestState,
    differences,
    parse_state,
    read_state,
    reset,
    reset_script,
)

PERCENT_PATH = "/proc/sys/kernel/perf_cpu_time_max_percent"
RATE_PATH = "/proc/sys/kernel/perf_event_max_sample_rate"
BOOT = GuestState(
    online=frozenset(range(4)),
    sysctls=((CPU_TIME, "25"), (SAMPLE_RATE, "100000")),
    modules=(),
)


@dataclass(frozen=True, slots=True)
class Output:
    stdout: str
    stderr: str = ""
    exit_status: int = 0


@dataclass
class FakeGuestShell:
    """A guest behind the shell seam: its state in a file tree, its commands run by ``sh``.

    Each command runs with the guest's paths moved under a fresh directory holding
    the state: the CPUs' online files, the sysctls and /proc/modules; ``rmmod``
    deletes the module's line (and logs the CPU-time limit it saw). ``stuck`` CPUs
    refuse to come online (the kernel's EBUSY: they read 0 again before the state
    is read back); the kernel keeps the online list.
    """

    online: set[int] = field(default_factory=lambda: set(range(4)))
    sysctls: dict[str, str] = field(
        default_factory=lambda: {PERCENT_PATH: "25", RATE_PATH: "100000"}
    )
    modules: list[str] = field(default_factory=list)
    stuck: frozenset[int] = frozenset()
    commands: list[str] = field(default_factory=list)
    rmmod_saw: list[str] = field(default_factory=list)  # the CPU-time limit at each rmmod

    def run(self, command: str, *, timeout_s: float | None = None, check: bool = True) -> Output:
        self.commands.append(command)
        with tempfile.TemporaryDirectory() as where:
            root = Path(where)
            self._write(root)
            done = subprocess.run(["sh", "-c", self._rooted(command, root)], capture_output=True,
                                  text=True, env={"PATH": f"{root}/bin:/usr/bin:/bin"},
                                  check=False)  # fmt: skip
            self._read(root)
        # grep -H names the files as the guest's: under root here
        return Output(done.stdout.replace(where, ""), done.stderr, done.returncode)

    def _write(self, root: Path) -> None:
        cpus = root / "sys/devices/system/cpu"
        for n in range(4):
            (cpus / f"cpu{n}").mkdir(parents=True)
            (cpus / f"cpu{n}/online").write_text("1\n" if n in self.online else "0\n")
        (cpus / "online").write_text(",".join(str(n) for n in sorted(self.online)) + "\n")
        for path, value in self.sysctls.items():
            (root / path[1:]).parent.mkdir(parents=True, exist_ok=True)
            (root / path[1:]).write_text(value + "\n")
        (root / "proc").mkdir(exist_ok=True)
        lines = [f"{m} 45056 0 - Live 0xffff800000c00000 (O)\n" for m in self.modules]
        (root / "proc/modules").write_text("".join(lines))
        (root / "bin").mkdir()
        log = f"cat {root}{PERCENT_PATH} >> {root}/rmmod.log"
        (root / "bin/rmmod").write_text(f'#!/bin/sh\nsed -i "/^$1 /d" {root}/proc/modules\n{log}\n')
        (root / "bin/rmmod").chmod(0o755)

    def _read(self, root: Path) -> None:
        cpus = root / "sys/devices/system/cpu"
        self.online = {n for n in range(4) if n not in self.stuck or n in self.online
                       if (cpus / f"cpu{n}/online").read_text().strip() == "1"}  # fmt: skip
        self.sysctls = {path: (root / path[1:]).read_text().strip() for path in self.sysctls}
        self.modules = [
            line.split()[0] for line in (root / "proc/modules").read_text().splitlines()
        ]
        if (root / "rmmod.log").exists():
            self.rmmod_saw += (root / "rmmod.log").read_text().split()

    def _rooted(self, command: str, root: Path) -> str:
        rooted = command.replace("/proc/", f"{root}/proc/").replace(" /sys/", f" {root}/sys/")
        # what the kernel does between the writes and the read back: stuck CPUs go back
        # offline, and it keeps the online list
        stuck = "".join(f"echo 0 > $cpus/cpu{n}/online; " for n in sorted(self.stuck - self.online))
        kernel = (f"cpus={root}/sys/devices/system/cpu; {stuck}l=; for n in 0 1 2 3; do "
                  f'read -r c < $cpus/cpu$n/online; [ "$c" = 1 ] && l="$l${{l:+,}}$n"; done; '
                  f'echo "$l" > $cpus/online')  # fmt: skip
        marker = f"[ -z \"$w\" ] || {{ echo '{AFTER}'; "
        assert command == STATE_COMMAND or marker in rooted, command
        return rooted.replace(marker, f"[ -z \"$w\" ] || {{ {kernel}; echo '{AFTER}'; ")


def test_state_command_output_parses() -> None:
    text = (
        "### online\n0-2,5\n### sysctl\n"
        f"{PERCENT_PATH}:0\n{RATE_PATH}:2000\n"
        "### modules\nprofagent 45056 0 - Live 0xffff800000c00000 (O)\n"
        "profbench_hello 16384 0 - Live 0xffff800000b00000 (O)\n"
    )
    assert parse_state(text) == GuestState(
        online=frozenset({0, 1, 2, 5}),
        sysctls=((CPU_TIME, "0"), (SAMPLE_RATE, "2000")),
        modules=("profagent", "profbench_hello"),
    )


def test_a_sysctl_the_guest_lacks_is_left_out() -> None:
    state = parse_state(f"### online\n0\n### sysctl\n{PERCENT_PATH}:25\n### modules\n")
    assert (state.sysctls, state.modules) == (((CPU_TIME, "25"),), ())


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("### online\n0-3\n### sysctl\n", "without modules"),
        ("Segmentation fault", "without online, sysctl, modules"),
        ("### online\n0-x\n### sysctl\n### modules\n", "unreadable online CPU list"),
    ],
)
def test_output_that_is_not_the_state_is_an_infra_error(text: str, says: str) -> None:
    with pytest.raises(InfraError, match=says):
        parse_state(text)


def test_differences_name_each_change() -> None:
    now = GuestState(
        online=frozenset({0, 1, 2}),
        sysctls=((CPU_TIME, "0"), (SAMPLE_RATE, "2000")),
        modules=("profagent",),
    )
    assert differences(BOOT, now) == [
        "CPU 3 is offline (online at boot)",
        "kernel.perf_cpu_time_max_percent is 0 (25 at boot)",
        "kernel.perf_event_max_sample_rate is 2000 (100000 at boot)",
        "module profagent is loaded (not at boot)",
    ]
    assert differences(BOOT, BOOT) == []


def test_a_clean_guest_costs_one_round_trip_that_writes_nothing() -> None:
    shell = FakeGuestShell()
    outcome = reset(shell, read_state(FakeGuestShell()))
    assert (outcome.found, outcome.left, len(shell.commands)) == ((), (), 1)
    assert AFTER not in shell.run(shell.commands[0]).stdout


def test_what_a_test_left_behind_is_restored_in_the_same_round_trip() -> None:
    shell = FakeGuestShell()
    baseline = read_state(shell)
    shell.online -= {1, 3}  # a hotplug test that failed half-way
    shell.sysctls = {PERCENT_PATH: "0", RATE_PATH: "2000"}  # throttling off, low rate
    shell.modules = ["b", "a"]  # left loaded, b newest
    shell.commands.clear()
    outcome = reset(shell, baseline)
    assert outcome.found == (
        "CPU 1 is offline (online at boot)",
        "CPU 3 is offline (online at boot)",
        "kernel.perf_cpu_time_max_percent is 0 (25 at boot)",
        "kernel.perf_event_max_sample_rate is 2000 (100000 at boot)",
        "module b is loaded (not at boot)",
        "module a is loaded (not at boot)",
    )
    assert (outcome.left, len(shell.commands)) == ((), 1)
    assert read_state(shell) == baseline
    assert shell.rmmod_saw == ["0", "0"]  # modules first, before the sysctls moved


def test_the_rate_is_written_while_the_kernel_accepts_it() -> None:
    """Throttling left off (0): the limit goes to 25, the rate back, then the limit back."""
    boot = GuestState(BOOT.online, ((CPU_TIME, "50"), (SAMPLE_RATE, "100000")), ())
    script = reset_script(boot)
    rate = script.index(f"echo 100000 > {RATE_PATH}")
    assert script.index(f"0|100) echo 25 > {PERCENT_PATH}") < rate
    assert rate < script.index(f"echo 50 > {PERCENT_PATH}")
    shell = FakeGuestShell(sysctls={PERCENT_PATH: "0", RATE_PATH: "2000"})
    assert reset(shell, boot).left == ()
    assert read_state(shell).sysctls == boot.sysctls


def test_a_cpu_online_that_was_offline_at_boot_goes_offline_again() -> None:
    shell = FakeGuestShell(online={0, 1})
    baseline = read_state(shell)
    shell.online |= {2, 3}
    outcome = reset(shell, baseline)
    assert outcome.found == (
        "CPU 2 is online (offline at boot)",
        "CPU 3 is online (offline at boot)",
    )
    assert (outcome.left, shell.online) == ((), {0, 1})


def test_a_cpu_that_stays_offline_is_left_over() -> None:
    shell = FakeGuestShell(stuck=frozenset({2}))
    baseline = read_state(shell)
    shell.online.discard(2)
    outcome = reset(shell, baseline)
    assert outcome.left == ("CPU 2 is offline (online at boot)",)


def test_a_module_gone_since_boot_cannot_be_restored() -> None:
    shell = FakeGuestShell(modules=["virtio_rng"])
    baseline = read_state(shell)
    shell.modules.clear()
    shell.commands.clear()
    outcome = reset(shell, baseline)
    assert outcome.left == ("module virtio_rng is gone (loaded at boot)",)  # a fresh guest next
    assert len(shell.commands) == 1
