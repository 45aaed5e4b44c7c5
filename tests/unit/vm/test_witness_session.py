"""The witness's shell at its seams: a fake gdb beside a fake monitor, no guest.

The fake gdb does what `gdbside` promises: it reads its configuration, says it is ready,
writes hit lines, and on SIGINT writes its last line and leaves. The session must open
and close the gdbstub, wait for the breakpoint before returning, stop gdb by its PID,
and kill a gdb that does not stop.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.errors import HarnessTimeout, HostSetupError, InfraError
from harness.timeouts import Timeouts
from harness.vm.witness.session import Discovery, Witness
from tests.unit.vm.test_witness_records import OFFSETS, hit

FAKE_GDB = """#!{python}
import json, os, signal, sys, time
config = json.load(open(os.environ["PROFBENCH_WITNESS"]))
stopping = []
signal.signal(signal.SIGINT, {on_sigint})
with open(config["out"], "w") as out:
    out.write({hits!r})
    out.flush()
    open(config["ready"], "w").write("ready\\n")
    while not stopping:
        time.sleep(0.01)
    out.write(json.dumps({{"end": {count}}}) + "\\n")
"""


class Monitor:
    def __init__(self) -> None:
        self.commands: list[str] = []

    def hmp(self, command_line: str) -> str:
        self.commands.append(command_line)
        return ""


def fake_gdb(tmp_path: Path, *, stops: bool) -> Path:
    hits = "".join(f"{hit(cpu, count)}\n" for cpu, count in ((0, 100), (1, 100), (0, 200)))
    handler = "lambda *_: stopping.append(1)" if stops else "signal.SIG_IGN"
    script = tmp_path / "gdb-multiarch"
    script.write_text(FAKE_GDB.format(python=sys.executable, on_sigint=handler, hits=hits,
                                      count=3))  # fmt: skip
    script.chmod(0o755)
    return script


def witness(tmp_path: Path, monitor: Monitor, gdb: Path) -> Witness:
    return Witness(monitor, OFFSETS, tmp_path / "w", Timeouts(qmp_s=1.0), depth=8, nmi_on=True,
                   gdb=str(gdb))  # fmt: skip


def test_arm_waits_for_the_breakpoint_and_disarm_returns_what_gdb_saw(tmp_path: Path) -> None:
    monitor = Monitor()
    with witness(tmp_path, monitor, fake_gdb(tmp_path, stops=True)) as w:
        w.arm(0xFFFFFFC0002B100C)
        config = json.loads((tmp_path / "w" / "witness-01.json").read_text())
        assert config["address"] == 0xFFFFFFC0002B100C
        assert config["offsets"]["task_tgid"] == OFFSETS.task_tgid
        log = w.disarm()
    assert [(o.cpu, o.count) for o in log.overflows] == [(0, 100), (1, 100), (0, 200)]
    assert log.complete
    assert monitor.commands == [f"gdbserver tcp:127.0.0.1:{config['port']}", "gdbserver none"]


def test_a_gdb_that_ignores_sigint_is_killed_by_its_pid(tmp_path: Path) -> None:
    w = witness(tmp_path, Monitor(), fake_gdb(tmp_path, stops=False))
    w.arm(0x1000)
    pid = w.gdb_pid or -1
    with pytest.raises(HarnessTimeout, match="gdb to detach"):
        w.disarm()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    w.close()


def test_leaving_the_block_stops_gdb_even_on_an_error(tmp_path: Path) -> None:
    monitor = Monitor()
    pids: list[int] = []

    def failed_run() -> None:
        with witness(tmp_path, monitor, fake_gdb(tmp_path, stops=True)) as w:
            w.arm(0x1000)
            pids.append(w.gdb_pid or -1)
            raise RuntimeError("the run failed")

    with pytest.raises(RuntimeError):
        failed_run()
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)
    assert monitor.commands[-1] == "gdbserver none"


def test_disarming_what_was_never_armed_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InfraError, match="not armed"):
        witness(tmp_path, Monitor(), fake_gdb(tmp_path, stops=True)).disarm()


def test_a_missing_gdb_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(HostSetupError, match="invoke setup"):
        witness(tmp_path, Monitor(), tmp_path / "no-such-gdb").arm(0x1000)


LEAVES_BY_ITSELF = """#!{python}
import json, os
config = json.load(open(os.environ["PROFBENCH_WITNESS"]))
with open(config["out"], "w") as out:
    out.write(json.dumps({{"handler": 4096, "cpu": 0}}) + "\\n")
    out.write({hits!r})
    open(config["ready"], "w").write("ready\\n")
    out.write(json.dumps({{"closed": "Remote connection closed"}}) + "\\n")
    out.write(json.dumps({{"end": 2}}) + "\\n")
"""


def test_watch_uses_the_command_lines_gdbstub_and_finish_waits_for_gdb_to_leave(
    tmp_path: Path,
) -> None:  # fmt: skip
    """A deterministic run's witness: no QMP at all, the handler found by gdbside itself."""
    script = tmp_path / "gdb-multiarch"
    hits = "".join(f"{hit(cpu, count)}\n" for cpu, count in ((0, 100), (1, 100)))
    script.write_text(LEAVES_BY_ITSELF.format(python=sys.executable, hits=hits))
    script.chmod(0o755)
    with Witness(None, OFFSETS, tmp_path / "w", Timeouts(qmp_s=1.0), depth=8, nmi_on=True,
                 gdb=str(script), port=1234) as w:  # fmt: skip
        w.watch(Discovery(at=0xFFFFFFC008200000, image=(0xFFFFFFC008000000, 0xFFFFFFC009000000)))
        config = json.loads((tmp_path / "w" / "witness-01.json").read_text())
        log = w.finish(timeout_s=5.0)
    assert config["port"] == 1234
    assert config["address"] is None
    assert config["discover"] == {"at": 0xFFFFFFC008200000,
                                  "image": [0xFFFFFFC008000000, 0xFFFFFFC009000000]}  # fmt: skip
    assert log.handlers == (4096,)
    assert [(o.cpu, o.count) for o in log.overflows] == [(0, 100), (1, 100)]
    assert log.complete


def test_watch_needs_the_command_lines_port(tmp_path: Path) -> None:
    with pytest.raises(InfraError, match="port"):
        witness(tmp_path, Monitor(), fake_gdb(tmp_path, stops=True)).watch(Discovery(1, (2, 3)))


def test_arming_without_a_port_or_qmp_is_refused(tmp_path: Path) -> None:
    alone = Witness(None, OFFSETS, tmp_path / "w", Timeouts(qmp_s=1.0), depth=8, nmi_on=True)
    with pytest.raises(InfraError, match="neither"):
        alone.arm(0x1000)
