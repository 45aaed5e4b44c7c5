"""Out-of-tree modules build against the cached kernel tree and load in the guest."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.builder.images import GuestImages
from harness.builder.modules import build_module
from harness.errors import BuildError
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.topology import CpuTopology
from tests.guest.procs import dmesg_mark, dmesg_since

pytestmark = pytest.mark.guest
HELLO = Path(__file__).resolve().parents[1] / "data" / "modules" / "hello"


@pytest.fixture(scope="session")
def hello_ko(
    base_setup: tuple[MachineSpec, GuestImages], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """Built once per session: every guest of a run boots the same kernel."""
    return build_module(HELLO, base_setup[1], tmp_path_factory.mktemp("hello"))


def test_a_module_builds_loads_and_unloads(
    guest: Guest, topology: CpuTopology, hello_ko: Path
) -> None:
    ko = hello_ko
    guest.shell.put(ko, f"/tmp/{ko.name}")
    mark = dmesg_mark(guest.shell)  # only this load's lines count, not an earlier test's
    guest.shell.run(f"insmod /tmp/{ko.name}")
    try:
        assert "profbench_hello" in guest.shell.run("cat /proc/modules").stdout
    finally:
        guest.shell.run("rmmod profbench_hello")
    dmesg = "\n".join(dmesg_since(guest.shell, mark))
    assert f"of {topology.cpus} online" in dmesg
    assert "profbench_hello: unloaded" in dmesg


def test_a_compile_error_shows_the_file_and_line(guest: Guest, tmp_path: Path) -> None:
    broken = tmp_path / "broken-src"
    broken.mkdir()
    (broken / "Kbuild").write_text("obj-m := broken.o\n")
    (broken / "broken.c").write_text(
        '#include <linux/module.h>\nint x = y;\nMODULE_LICENSE("GPL");\n'
    )
    with pytest.raises(BuildError) as failed:
        build_module(broken, guest.images, tmp_path / "broken")
    assert "broken.c:2" in failed.value.tail
    assert "error:" in failed.value.tail
