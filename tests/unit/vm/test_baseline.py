"""A pooled guest's state: parsed, compared, and put back by commands a fake guest runs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest

from harness.errors import InfraError
from harness.vm.baseline import (
    CPU_TIME,
    SAMPLE_RATE,
    STATE_COMMAND,
    GuestState,
    differences,
    parse_state,
    read_state,
    reset,
    restore_commands,
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
    """A guest behind the shell seam: prints its state, runs the restore commands.

    It knows the few commands `restore_commands` writes, and the kernel's rule that
    the sample rate cannot be written while the CPU-time limit is 0 or 100.
    ``stuck`` CPUs refuse to come online (EBUSY).
    """

    online: set[int] = field(default_factory=lambda: set(range(4)))
    sysctls: dict[str, str] = field(
        default_factory=lambda: {PERCENT_PATH: "25", RATE_PATH: "100000"}
    )
    modules: list[str] = field(default_factory=list)
    stuck: frozenset[int] = frozenset()
    commands: list[str] = field(default_factory=list)

    def run(self, command: str, *, timeout_s: float | None = None, check: bool = True) -> Output:
        self.commands.append(command)
        if command != STATE_COMMAND:
            script, _, rest = command.partition("; } >&2; ")
            assert rest == STATE_COMMAND, command
            for step in script.removeprefix("{ ").split("; "):
                self._execute(step)
        return Output(self.render())

    def _execute(self, step: str) -> None:
        if rmmod := re.fullmatch(r"rmmod (\S+)", step):
            self.modules.remove(rmmod[1])
        elif cpu := re.fullmatch(r"echo ([01]) > /sys/devices/system/cpu/cpu(\d+)/online", step):
            if int(cpu[2]) not in self.stuck:
                (self.online.add if cpu[1] == "1" else self.online.discard)(int(cpu[2]))
        elif write := re.fullmatch(r"echo (\d+) > (\S+)", step):
            if write[2] == RATE_PATH and self.sysctls[PERCENT_PATH] in ("0", "100"):
                return  # EINVAL
            self.sysctls[write[2]] = write[1]
        else:
            raise AssertionError(f"unexpected guest command {step!r}")

    def render(self) -> str:
        online = ",".join(str(cpu) for cpu in sorted(self.online))
        sysctls = [f"{path}:{value}" for path, value in self.sysctls.items()]
        modules = [f"{name} 45056 0 - Live 0xffff800000c00000 (O)" for name in self.modules]
        return "\n".join(["### online", online, "### sysctl", *sysctls, "### modules", *modules])


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


def test_restore_writes_the_rate_while_the_kernel_accepts_it() -> None:
    """Throttling left off (0): the limit goes to 25, the rate back, then the limit back."""
    boot = GuestState(BOOT.online, ((CPU_TIME, "50"), (SAMPLE_RATE, "100000")), ())
    now = GuestState(BOOT.online, ((CPU_TIME, "0"), (SAMPLE_RATE, "2000")), ())
    assert restore_commands(boot, now) == (
        f"echo 25 > {PERCENT_PATH}",
        f"echo 100000 > {RATE_PATH}",
        f"echo 50 > {PERCENT_PATH}",
    )


def test_restore_order_modules_cpus_sysctls() -> None:
    now = GuestState(frozenset({0, 2}), ((CPU_TIME, "25"), (SAMPLE_RATE, "5000")), ("a", "b"))
    assert restore_commands(BOOT, now) == (
        "rmmod a",
        "rmmod b",
        "echo 1 > /sys/devices/system/cpu/cpu1/online",
        "echo 1 > /sys/devices/system/cpu/cpu3/online",
        f"echo 100000 > {RATE_PATH}",
    )
    assert restore_commands(BOOT, BOOT) == ()


def test_a_clean_guest_costs_one_round_trip() -> None:
    shell = FakeGuestShell()
    outcome = reset(shell, read_state(FakeGuestShell()))
    assert (outcome.found, outcome.left, shell.commands) == ((), (), [STATE_COMMAND])


def test_what_a_test_left_behind_is_restored_in_one_more_round_trip() -> None:
    shell = FakeGuestShell()
    baseline = read_state(shell)
    shell.online -= {1, 3}  # a hotplug test that failed half-way
    shell.sysctls = {PERCENT_PATH: "0", RATE_PATH: "2000"}  # throttling off, low rate
    shell.modules = ["profagent"]  # left loaded
    shell.commands.clear()
    outcome = reset(shell, baseline)
    assert len(outcome.found) == 5
    assert (outcome.left, len(shell.commands)) == ((), 2)
    assert read_state(shell) == baseline


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
    assert outcome.left == ("module virtio_rng is gone (loaded at boot)",)
    assert shell.commands == [STATE_COMMAND]  # nothing to run: the pool boots a fresh guest
