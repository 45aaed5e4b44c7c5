"""A load is one guest command: unload, throttling, insmod; each failure named as its own."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.agent.driver import Agent
from harness.agent.module.spec import AgentSpec
from harness.agent.overlap import UNLOAD_IF_LOADED
from harness.agent.steps import GUEST_DIR, throttling_command
from harness.errors import GuestCommandError, ModuleLoadError


@dataclass(frozen=True)
class Result:
    exit_status: int
    stdout: str
    stderr: str


class ScriptedGuest:
    """Runs each command in the host's /bin/sh, with stand-ins for the guest's tools.

    ``modules``: /proc/modules' text; ``insmod``, ``rmmod``: their exit statuses;
    ``sysctl``: whether the perf sysctls can be written.
    """

    def __init__(self, root: Path, *, loaded: bool = False, insmod: int = 0, rmmod: int = 0,
                 sysctl: bool = True) -> None:  # fmt: skip
        self.commands: list[str] = []
        self.root = root
        bin_dir = root / "bin"
        bin_dir.mkdir()
        (root / "modules").write_text("profagent 1 0 - Live 0x0\n" if loaded else "")
        tools = {
            "insmod": f"echo insmod >> {root}/log; exit {insmod}",
            "rmmod": f"echo rmmod >> {root}/log; exit {rmmod}",
            "dmesg": f"echo 'boot line'; grep -qs insmod {root}/log && echo 'profagent: bad param'",
            "sleep": "exit 0",  # unload_command's retries, at once
        }
        for name, body in tools.items():
            (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
            (bin_dir / name).chmod(0o755)
        self.sysctl = sysctl

    def run(self, command: str, *, timeout_s: float | None = None, check: bool = True) -> Result:
        self.commands.append(command)
        if command.startswith("ls "):
            return Result(0, "cpu_cycles\n", "")
        local = (command.replace("/proc/modules", str(self.root / "modules"))
                 .replace("/proc/sys/kernel/perf", str(self.root / "perf"))
                 .replace(GUEST_DIR, str(self.root)))  # fmt: skip
        if self.sysctl:
            for name, value in (("_cpu_time_max_percent", "25"),
                                ("_event_max_sample_rate", "100000")):  # fmt: skip
                (self.root / f"perf{name}").write_text(value + "\n")
        env = {"PATH": f"{self.root / 'bin'}:/usr/bin:/bin"}
        done = subprocess.run(["/bin/sh", "-c", local], capture_output=True, text=True, env=env,
                              check=False)  # fmt: skip
        if check and done.returncode:
            raise GuestCommandError(command, done.returncode, done.stdout, done.stderr)
        return Result(done.returncode, done.stdout, done.stderr)

    def log(self) -> list[str]:
        path = self.root / "log"
        return path.read_text().split() if path.exists() else []


def agent(shell: ScriptedGuest, tmp_path: Path) -> Agent:
    return Agent(shell, None, tmp_path, tmp_path, nmi_expected=True,  # type: ignore[arg-type]
                 pmu_irq_label="PMU")  # fmt: skip


def test_a_load_is_one_command_after_the_pmu_listing(tmp_path: Path) -> None:
    shell = ScriptedGuest(tmp_path, loaded=True)
    agent(shell, tmp_path).load(AgentSpec(flavour="tprof"))
    assert len(shell.commands) == 2
    assert shell.commands[0].startswith("ls ")
    assert shell.log() == ["rmmod", "insmod"]  # the loaded one first
    assert (tmp_path / "perf_cpu_time_max_percent").read_text().strip() == "0"


def test_nothing_is_unloaded_when_nothing_is_loaded(tmp_path: Path) -> None:
    shell = ScriptedGuest(tmp_path)
    agent(shell, tmp_path).load(AgentSpec(flavour="tprof"))
    assert shell.log() == ["insmod"]


def test_a_failed_unload_is_named_and_nothing_is_inserted(tmp_path: Path) -> None:
    shell = ScriptedGuest(tmp_path, loaded=True, rmmod=1)
    with pytest.raises(GuestCommandError) as failed:
        agent(shell, tmp_path).load(AgentSpec(flavour="tprof"))
    assert failed.value.command == UNLOAD_IF_LOADED
    assert "insmod" not in shell.log()


def test_a_failed_throttling_write_is_named_and_nothing_is_inserted(tmp_path: Path) -> None:
    shell = ScriptedGuest(tmp_path, sysctl=False)
    (tmp_path / "perf_cpu_time_max_percent").mkdir()  # cannot be written
    with pytest.raises(GuestCommandError) as failed:
        agent(shell, tmp_path).load(AgentSpec(flavour="tprof"))
    assert failed.value.command == throttling_command(disabled=True)
    assert shell.log() == []


def test_a_failed_insmod_carries_the_dmesg_lines_it_added(tmp_path: Path) -> None:
    shell = ScriptedGuest(tmp_path, insmod=1)
    with pytest.raises(ModuleLoadError) as failed:
        agent(shell, tmp_path).load(AgentSpec(flavour="tprof"))
    assert "profagent: bad param" in str(failed.value) + failed.value.evidence


def test_unload_runs_its_follow_up_in_the_same_command(tmp_path: Path) -> None:
    shell = ScriptedGuest(tmp_path, loaded=True)
    (tmp_path / "samples.bin").touch()
    agent(shell, tmp_path).unload(then=f"rm -f {tmp_path}/samples.bin")
    assert len(shell.commands) == 1
    assert shell.log() == ["rmmod"]
    assert not (tmp_path / "samples.bin").exists()
