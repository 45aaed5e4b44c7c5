"""The command line as a person uses it: `invoke shell`, bad input, an interrupted build."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.agent.flavours.discovery import PATH_ENV
from harness.builder.cache import Cache
from harness.builder.images import GuestImages
from harness.builder.kernel import source_key
from harness.errors import VmLaunchError
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.topology import CpuTopology
from tests.guest.procs import as_if_typed, process_gone

pytestmark = [pytest.mark.guest, pytest.mark.selftest]
REPO = Path(__file__).resolve().parents[2]
INVOKE = [sys.executable, "-m", "invoke"]


def typed_environment(**extra: str) -> dict[str, str]:
    """The environment of a command a person types: this one's, plus ``extra``, without
    `PATH_ENV`. A command is told its flavours by its own options; it must not depend on
    which test of this worker ran before (issue 42: a unit test's path broke six)."""
    env = {key: value for key, value in os.environ.items() if key != PATH_ENV}
    return {**env, **extra}


def read_until(fd: int, marker: bytes, timeout_s: float) -> bytes:
    """Read from ``fd`` until ``marker`` shows up; fail the test at the deadline."""
    seen = b""
    deadline = time.monotonic() + timeout_s
    while marker not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"no {marker!r} within {timeout_s}s; saw:\n{seen.decode(errors='replace')}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_invoke_shell_gives_a_root_shell_and_stops_the_guest(
    tmp_path: Path, timeouts: Timeouts
) -> None:
    env = typed_environment(PROFBENCH_ARTIFACTS=str(tmp_path), TERM="dumb")
    pid, fd = pty.fork()
    if pid == 0:  # child: the command a person types
        os.chdir(REPO)
        os.execvpe(INVOKE[0], [*INVOKE, "shell", "--cpus", "4"], env)
    try:
        # The guest's root prompt: a boot, after invoke's own start (host check, images).
        read_until(fd, b"# ", timeout_s=timeouts.boot_s + 60 * timeouts.scale)
        os.write(fd, b"echo CPUS=$(nproc) USER=$(id -u)\n")
        answer = read_until(fd, b"USER=0", timeout_s=timeouts.command_s)
        assert b"CPUS=4" in answer
        os.write(fd, b"exit\n")
        # Until the CLI closes the terminal: it stops the guest (QMP quit, then kill).
        read_until(fd, b"\0never", timeout_s=timeouts.shutdown_s + 45 * timeouts.scale)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    (run_json,) = tmp_path.glob("shell/*/run.json")
    record = json.loads(run_json.read_text())
    assert record["verdict"]["result"] == "pass"
    assert process_gone(record["qemu_pid"])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--cpus", "4", "--topology", "2s2cl1c2t"], "has 8 CPUs but --cpus 4"),
        (["--topology", "sockets=2,cores=2,threads=2,cpus=6"], "product equal the CPU count"),
        (["--cpus", "0"], "--cpus must be at least 1"),
        (["--topology", "sockets=1,cores=600"], "more than the arm64 machine"),
        (["--arch", "riscv64"], "unknown arch 'riscv64'; use one of: arm64, x86_64"),
        (["--arch", "x86_64", "--nmi", "off"], "NMIs always"),
        (["--variant", "kasan"], "unknown kernel variant 'kasan'"),
    ],
    ids=["cpus-vs-topology", "product", "zero", "too-many", "arch", "nmi-off-x86", "variant"],
)
def test_bad_input_gets_one_clear_error(args: list[str], says: str, timeouts: Timeouts) -> None:
    proc = subprocess.run([*INVOKE, "test", *args], cwd=REPO, capture_output=True, text=True,
                          env=typed_environment(), timeout=60 * timeouts.scale,
                          check=False)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr


def test_qemu_that_exits_at_start_is_a_launch_error_with_its_output(
    base_setup: tuple[MachineSpec, GuestImages], tmp_path: Path, timeouts: Timeouts
) -> None:
    spec, images = base_setup
    # QEMU refuses this at start ("cannot set up guest memory" or similar).
    greedy = MachineSpec(arch=spec.arch, topology=CpuTopology(), memory_mib=64 * 1024 * 1024)
    with pytest.raises(VmLaunchError) as failed, Guest(greedy, images, tmp_path, timeouts=timeouts):
        pytest.fail("QEMU started")  # and leaving the block stopped it
    assert failed.value.exitcode not in (None, 0)
    assert "memory" in failed.value.output.lower()
    assert "-m 67108864M" in str(failed.value)


def process_evidence(pid: int) -> str:
    """Signal dispositions, wait channel and children of ``pid``, for a failure message."""
    proc = Path(f"/proc/{pid}")
    try:
        status = [ln for ln in (proc / "status").read_text().splitlines() if ln.startswith("Sig")]
        wchan = (proc / "wchan").read_text()
        children = (proc / "task" / str(pid) / "children").read_text().split()
    except OSError as exc:
        return f"pid {pid}: {exc}"
    return f"pid {pid}: {' '.join(status)}; wchan {wchan}; children {children}"


def test_an_interrupted_kernel_build_leaves_no_finished_entry(
    tmp_path: Path, timeouts: Timeouts, cache: Cache
) -> None:
    env = typed_environment(PROFBENCH_CACHE=str(tmp_path))
    _share_unpacked_source(cache, Cache(tmp_path))
    build = subprocess.Popen(as_if_typed([*INVOKE, "kernel"]), cwd=REPO, env=env,
                             stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)  # fmt: skip
    assert build.stderr is not None
    stderr = build.stderr
    said: list[bytes] = []
    try:
        # Unpacking 1.3 GB of source comes first.
        said.append(read_until(stderr.fileno(), b"compiling the kernel",
                               timeout_s=180 * timeouts.scale))  # fmt: skip
    except BaseException:
        build.kill()
        raise
    finally:
        build.send_signal(signal.SIGINT)
        # Keep reading what it says, so a full pipe can never hold it up.
        drain = threading.Thread(target=lambda: said.append(stderr.read()), daemon=True)
        drain.start()
        try:
            # Stopping make and removing the half-built tree: seconds when quiet. Allow
            # 300 s for two workers of guests on the same 2 cores, then fail with evidence.
            build.wait(timeout=300 * timeouts.scale)
        except subprocess.TimeoutExpired:
            evidence = process_evidence(build.pid)
            build.kill()
            build.wait()
            drain.join(timeout=10)
            tail = b"".join(said).decode(errors="replace")[-3000:]
            pytest.fail(f"invoke kernel still ran 300 s after SIGINT: {evidence}\nit said:\n{tail}")
        drain.join(timeout=10)
        stderr.close()
    assert build.returncode != 0
    kernels = Cache(tmp_path).root / "kernel"
    assert not list(kernels.glob("*/manifest.json"))
    assert [p for p in kernels.iterdir() if p.is_dir()] == []  # the unfinished tree is gone
    if not (tmp_path / "source" / source_key()).is_symlink():
        shutil.rmtree(tmp_path / "source")  # 1.3 GB of unpacked source: do not keep it in /tmp


def _share_unpacked_source(cache: Cache, scratch: Cache) -> None:
    """Link ``cache``'s finished 6.1 source entry into ``scratch``: the build under test
    then starts at its configuration, not after unpacking 1.3 GB (136 s of CI's tier on a
    busy host). The source is only read (the build is out of tree); no entry: it unpacks."""
    entry = cache.entry("source", source_key())
    if entry.is_complete:
        link = scratch.root / "source" / entry.path.name
        link.parent.mkdir(parents=True)
        link.symlink_to(entry.path)
