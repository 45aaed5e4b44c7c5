from __future__ import annotations

import fcntl
import os
import platform
import shlex
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import arches
from harness.agent.profctl import (
    MAX_CHUNK,
    MAX_CPU,
    StepResult,
    cat_step,
    clock_step,
    close_step,
    ioctl_step,
    open_step,
    parse_output,
    pin_step,
    read_step,
    readbg_step,
    repeat_step,
    sleep_step,
    spin_step,
    timeout_step,
    unload_step,
    wait_step,
    write_step,
    writefd_step,
)
from harness.agent.profctl_build import build_profctl
from harness.agent.profctl_run import MAX_COMMAND, run_profctl
from harness.agent.steps import Named, Results, texts
from harness.agent.truth.elfsyms import symbol_span
from harness.builder.cache import Cache, file_sha256
from harness.errors import BuildError, ConfigError, GuestCommandError, InfraError
from harness.process import tool_version
from harness.vm.shell import CommandShell
from harness.vm.ssh import GuestShell

EM_X86_64 = 62
EM_AARCH64 = 183
PT_INTERP = 3
FIONREAD = 0x541B  # the same number on x86_64 and arm64 (asm-generic)
FIONCLEX = 0x5450


# --- parsing -------------------------------------------------------------------------------

STEPS = (
    open_step("/dev/tprof"),
    ioctl_step(3, 0x40087401, 4, b"\x01"),
    write_step("/sys/kernel/debug/tprof/ctl", "start: now"),
    cat_step("/sys/kernel/debug/tprof/state"),
    wait_step(),
)
OUTPUT = (
    "step=0 op=open ok=1 fd=3\n"
    "step=1 op=ioctl ok=1 rc=0 out=0100ff00\n"
    "step=2 op=write ok=0 errno=EBUSY\n"
    "step=3 op=cat ok=1 bytes=25 lines=3\n"
    "| state=running\n"
    "| \n"
    "| | step=9 op=x ok=1\n"
    "step=4 op=wait ok=0 errno=EINTR children=1 failed=0\n"
)


def test_parse_output_reads_values_errnos_and_cat_lines() -> None:
    assert parse_output(OUTPUT, STEPS) == (
        StepResult(0, "open", True, None, {"fd": "3"}),
        StepResult(1, "ioctl", True, None, {"rc": "0", "out": "0100ff00"}),
        StepResult(2, "write", False, "EBUSY", {}),
        StepResult(
            3,
            "cat",
            True,
            None,
            {"bytes": "25", "lines": "3"},
            ("state=running", "", "| step=9 op=x ok=1"),
        ),
        StepResult(4, "wait", False, "EINTR", {"children": "1", "failed": "0"}),
    )


def test_step_result_accessors() -> None:
    results = parse_output(OUTPUT, STEPS)
    assert results[0].int_value("fd") == 3
    assert results[1].out_bytes == b"\x01\x00\xff\x00"
    assert results[4].int_value("children") == 1
    with pytest.raises(InfraError, match=r"step 2 \(write, failed with EBUSY"):
        results[2].int_value("bytes")
    with pytest.raises(InfraError, match="no hex out="):
        _ = results[0].out_bytes
    with pytest.raises(TypeError):
        results[0].values["fd"] = "4"  # type: ignore[index]


def test_results_are_asked_for_by_the_name_of_the_step_that_made_them() -> None:
    cat = Named(STEPS[3], "cat")
    plan: tuple[str | Named, ...] = (Named(STEPS[0], "opened"), *STEPS[1:3], cat, STEPS[4], cat)
    assert texts(plan) == (*STEPS, STEPS[3])
    results = Results.of(plan, parse_output(OUTPUT + "step=5 op=cat ok=1 bytes=0 lines=0\n",
                                            texts(plan)))  # fmt: skip
    cats = results.all("cat")
    assert [r.index for r in cats] == [3, 5]
    assert cats[0].lines == ("state=running", "", "| step=9 op=x ok=1")
    assert results.one("opened").int_value("fd") == 3
    assert [name for name, _ in results.named()][:3] == ["opened", "", ""]
    assert next(results.pairs()) == (STEPS[0], results.one("opened"))
    assert results.all("sleep", at_least=0) == ()
    with pytest.raises(InfraError, match="has 0 step\\(s\\) named 'sleep', not 1 or more"):
        results.all("sleep")
    with pytest.raises(InfraError, match="has 2 steps named 'cat', not 1"):
        results.one("cat")
    with pytest.raises(InfraError, match="5 profctl results for 6 steps"):
        Results.of(plan, results.results[:-1])


def test_parse_output_with_empty_ioctl_buffer() -> None:
    steps = (ioctl_step(3, FIONCLEX, 0),)
    (result,) = parse_output("step=0 op=ioctl ok=1 rc=0 out=\n", steps)
    assert result.out_bytes == b""


@pytest.mark.parametrize(
    "bad_line",
    [
        pytest.param("step=0 op=open ok=1 fd", id="token-without-equals"),
        pytest.param("step=0 op=open  ok=1", id="double-space"),
        pytest.param("step=0 op=open ok=2 fd=3", id="ok-not-boolean"),
        pytest.param("step=0 op=open ok=0 fd=3", id="failure-without-errno"),
        pytest.param("step=0 op=open ok=1 errno=EBUSY fd=3", id="success-with-errno"),
        pytest.param("step=0 op=open ok=0 errno=busy", id="errno-not-symbolic"),
        pytest.param("step=1 op=open ok=1 fd=3", id="wrong-index"),
        pytest.param("step=0 op=close ok=1 fd=3", id="wrong-op"),
        pytest.param("op=open step=0 ok=1 fd=3", id="wrong-order"),
        pytest.param("step=0 op=open ok=1 fd=3 fd=4", id="duplicate-key"),
        pytest.param("| stray file line", id="file-line-outside-cat"),
        pytest.param("Segmentation fault", id="garbage"),
    ],
)
def test_parse_output_rejects_malformed_line(bad_line: str) -> None:
    with pytest.raises(InfraError) as caught:
        parse_output(bad_line + "\n", (open_step("/dev/tprof"),))
    assert repr(bad_line) in str(caught.value)


def test_parse_output_rejects_output_cut_mid_line() -> None:
    with pytest.raises(InfraError, match=r"mid-line: 'step=1 op=wa'"):
        parse_output("step=0 op=open ok=1 fd=3\nstep=1 op=wa", (open_step("/x"), wait_step()))


def test_parse_output_rejects_missing_step_lines() -> None:
    steps = (open_step("/x"), wait_step())
    with pytest.raises(InfraError, match=r"1 step line\(s\) for 2 step\(s\); last line: 'step=0"):
        parse_output("step=0 op=open ok=1 fd=3\n", steps)
    with pytest.raises(InfraError, match=r"0 step line\(s\) for 2 step\(s\); last line: '<no"):
        parse_output("", steps)


def test_parse_output_rejects_extra_step_lines() -> None:
    extra = "step=1 op=wait ok=1 children=0 failed=0"
    with pytest.raises(InfraError, match="more step lines") as caught:
        parse_output(f"step=0 op=open ok=1 fd=3\n{extra}\n", (open_step("/x"),))
    assert repr(extra) in str(caught.value)


def test_parse_output_checks_the_cat_line_count() -> None:
    with pytest.raises(InfraError, match=r"announced 2 line\(s\) but printed 1"):
        parse_output("step=0 op=cat ok=1 bytes=4 lines=2\n| a\n", (cat_step("/x"),))


# --- step builders -------------------------------------------------------------------------


def test_step_builders_render_tokens() -> None:
    assert open_step("/dev/tprof") == "open:/dev/tprof"
    assert close_step(3) == "close:3"
    assert ioctl_step(3, 0xC0107401, 16, b"\x01\xab") == "ioctl:3:0xc0107401:16:01ab"
    assert ioctl_step(4, FIONCLEX, 0) == "ioctl:4:0x5450:0"
    assert read_step(3, "/tmp/s.bin", 65536) == "read:3:/tmp/s.bin:65536"
    assert timeout_step(0) == "timeout:0"
    assert (
        write_step("/sys/kernel/debug/t/ctl", "set a:b c")
        == "write:/sys/kernel/debug/t/ctl:set a:b c"
    )
    assert cat_step("/proc/interrupts") == "cat:/proc/interrupts"
    assert spin_step(1, 250) == "spin:1:250"
    assert wait_step() == "wait"
    assert sleep_step(10) == "sleep:10"
    assert pin_step(0) == "pin:0"
    assert unload_step("profagent") == "unload:profagent"


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: open_step("/dev/a:b"), id="colon-in-path"),
        pytest.param(lambda: open_step(""), id="empty-path"),
        pytest.param(lambda: cat_step("/x\0y"), id="nul-in-path"),
        pytest.param(lambda: close_step(-1), id="negative-fd"),
        pytest.param(lambda: ioctl_step(3, -1, 0), id="negative-request"),
        pytest.param(lambda: ioctl_step(3, 2**64, 0), id="request-too-big"),
        pytest.param(lambda: ioctl_step(3, 1, 4097), id="ioctl-size-too-big"),
        pytest.param(lambda: ioctl_step(3, 1, 2, b"abc"), id="ioctl-data-exceeds-size"),
        pytest.param(lambda: read_step(3, "/tmp/x", 0), id="chunk-zero"),
        pytest.param(lambda: read_step(3, "/tmp/x", MAX_CHUNK + 1), id="chunk-too-big"),
        pytest.param(lambda: read_step(3, "/tmp/a:b", 4096), id="read-colon-in-path"),
        pytest.param(lambda: timeout_step(-1), id="negative-timeout"),
        pytest.param(lambda: write_step("/x", "a\0b"), id="nul-in-text"),
        pytest.param(lambda: spin_step(-1, 10), id="negative-cpu"),
        pytest.param(lambda: spin_step(0, -10), id="negative-ms"),
        pytest.param(lambda: pin_step(MAX_CPU + 1), id="cpu-too-big"),
        pytest.param(lambda: sleep_step(-5), id="negative-sleep"),
        pytest.param(lambda: unload_step("/lib/m.ko"), id="unload-a-path"),
        pytest.param(lambda: unload_step(""), id="unload-no-name"),
    ],
)
def test_step_builders_reject_impossible_values(build: Callable[[], str]) -> None:
    with pytest.raises(ConfigError, match="profctl"):
        build()


# --- building and running the real binary ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class LocalResult:
    exit_status: int
    stdout: str
    stderr: str


class LocalShell:
    """Runs commands with the host's /bin/sh, as GuestShell runs them with the guest's."""

    def run(
        self, command: str, *, timeout_s: float | None = None, check: bool = True
    ) -> LocalResult:
        # A session of its own, so a hung profctl (not only the shell) dies on timeout.
        with subprocess.Popen(
            ["/bin/sh", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        ) as proc:  # fmt: skip
            try:
                stdout, stderr = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                raise
        if check and proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, command, stdout, stderr)
        return LocalResult(proc.returncode, stdout, stderr)


def _guest_shell_is_a_command_shell(shell: GuestShell) -> CommandShell:
    return shell  # mypy checks that the Protocol matches the real class


def _elf_machine_and_interp(path: Path) -> tuple[int, bool]:
    """e_machine of a 64-bit little-endian ELF file, and whether it has PT_INTERP."""
    data = path.read_bytes()
    assert data[:6] == b"\x7fELF\x02\x01", "not a 64-bit little-endian ELF file"
    (machine,) = struct.unpack_from("<H", data, 18)
    (phoff,) = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    types = {struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)}
    return machine, PT_INTERP in types


@pytest.fixture(scope="module")
def host_cache(tmp_path_factory: pytest.TempPathFactory) -> Cache:
    return Cache(tmp_path_factory.mktemp("profctl-cache"))


@pytest.fixture(scope="module")
def host_profctl(host_cache: Cache) -> Path:
    arch = arches.get("x86_64")
    if not tool_version(f"{arch.cross_compile}gcc"):
        pytest.skip(f"{arch.cross_compile}gcc is not installed")
    if platform.machine() not in arch.kvm_host_machines:
        pytest.skip(f"an x86_64 binary cannot run on this {platform.machine()} host")
    return build_profctl(arch, host_cache)


def run_local(binary: Path, *steps: str) -> tuple[StepResult, ...]:
    return run_profctl(LocalShell(), str(binary), steps, timeout_s=20)


def test_build_is_static_cached_and_recorded(host_profctl: Path, host_cache: Cache) -> None:
    assert _elf_machine_and_interp(host_profctl) == (EM_X86_64, False)
    manifest = host_cache.entry("profctl", host_profctl.parent.name).manifest
    assert manifest["sha256"] == file_sha256(host_profctl)
    assert manifest["compiler"] == tool_version("x86_64-linux-gnu-gcc")
    assert build_profctl(arches.get("x86_64"), host_cache) == host_profctl
    assert host_cache.entry("profctl", host_profctl.parent.name).manifest == manifest


def test_build_error_shows_file_and_line(host_profctl: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.c"
    broken.write_text("int main(void)\n{\n\tint unused;\n\treturn 0;\n}\n")
    cache = Cache(tmp_path / "cache")
    with pytest.raises(BuildError, match=r"broken\.c:3:\d+: error: unused variable"):
        build_profctl(arches.get("x86_64"), cache, source=broken)
    assert not any(entry.is_dir() for entry in (tmp_path / "cache" / "profctl").iterdir())


def test_arm64_build_is_a_static_aarch64_elf(tmp_path: Path) -> None:
    arch = arches.get("arm64")
    if not tool_version(f"{arch.cross_compile}gcc"):
        pytest.skip(f"{arch.cross_compile}gcc is not installed")
    binary = build_profctl(arch, Cache(tmp_path))
    assert _elf_machine_and_interp(binary) == (EM_AARCH64, False)
    # PLACE judges the busy loops' samples in spin_loop: it is a function of its own
    low, high = symbol_span(binary.read_bytes(), "spin_loop")
    assert 0 < high - low < 0x200


def test_write_then_cat(host_profctl: Path, tmp_path: Path) -> None:
    ctl = tmp_path / "ctl"
    ctl.write_text("")
    text = "set a:b  'c' $HOME\n\nlast"
    write, cat = run_local(host_profctl, write_step(str(ctl), text), cat_step(str(ctl)))
    assert (write.ok, write.int_value("bytes")) == (True, len(text))
    assert ctl.read_text() == text
    assert cat.lines == ("set a:b  'c' $HOME", "", "last")
    assert (cat.int_value("bytes"), cat.int_value("lines")) == (len(text), 3)


def test_writefd_writes_to_an_open_descriptor_each_time(host_profctl: Path, tmp_path: Path) -> None:
    """kprof's kpctl is exclusive: its commands go to the one open descriptor."""
    ctl = tmp_path / "ctl"
    ctl.write_text("")
    opened, first, empty, second, closed = run_local(
        host_profctl, open_step(str(ctl)), writefd_step(3, "start: a b"), writefd_step(3, ""),
        writefd_step(3, "stop"), close_step(3),
    )  # fmt: skip
    assert opened.int_value("fd") == 3
    assert [r.int_value("bytes") for r in (first, empty, second)] == [10, 0, 4]
    assert closed.ok
    assert ctl.read_text() == "start: a bstop"
    (bad,) = run_local(host_profctl, writefd_step(9, "x"))
    assert bad.errno == "EBADF"


def test_open_ioctl_read_to_eof_close(host_profctl: Path, tmp_path: Path) -> None:
    source, copy = tmp_path / "source.bin", tmp_path / "copy.bin"
    data = bytes(range(256)) * 40 + b"tail"
    source.write_bytes(data)
    results = run_local(
        host_profctl,
        open_step(str(source)),
        ioctl_step(3, FIONREAD, 4, b"\xff\xff\xff\xff"),
        ioctl_step(3, FIONCLEX, 0),
        read_step(3, str(copy), 777),
        close_step(3),
        close_step(3),
    )
    opened, pending, cloexec, read, closed, closed_again = results
    assert opened.int_value("fd") == 3
    assert pending.out_bytes == struct.pack("<i", len(data))
    assert (cloexec.int_value("rc"), cloexec.out_bytes) == (0, b"")
    assert read.ok
    assert (read.int_value("bytes"), read.int_value("reads")) == (len(data), -(-len(data) // 777))
    assert copy.read_bytes() == data
    assert closed.ok
    assert (closed_again.ok, closed_again.errno) == (False, "EBADF")


def test_failed_steps_do_not_stop_the_sequence(host_profctl: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    results = run_local(
        host_profctl,
        open_step("/dev/null"),
        ioctl_step(3, FIONREAD, 4),
        open_step(missing),
        write_step(missing, "x"),
        cat_step(missing),
        sleep_step(1),
    )
    assert [(r.op, r.ok, r.errno) for r in results] == [
        ("open", True, None),
        ("ioctl", False, "ENOTTY"),
        ("open", False, "ENOENT"),
        ("write", False, "ENOENT"),
        ("cat", False, "ENOENT"),
        ("sleep", True, None),
    ]
    assert results[1].values == {}


def test_spin_and_wait(host_profctl: Path) -> None:
    cpu = min(os.sched_getaffinity(0))
    pin, spin, wait = run_local(host_profctl, pin_step(cpu), spin_step(cpu, 50), wait_step())
    # wait reaped one child that exited 0: the child ended its spin, so wait blocked until then.
    assert pin.ok
    assert spin.int_value("pid") > 0
    assert spin.int_value("cpu") == cpu
    assert (wait.ok, wait.int_value("children"), wait.int_value("failed")) == (True, 1, 0)


def test_clock_brackets_a_sleep_in_monotonic_ns(host_profctl: Path) -> None:
    before, _, after = run_local(host_profctl, clock_step(), sleep_step(20), clock_step())
    assert (before.ok, after.ok) == (True, True)
    assert after.int_value("ns") - before.int_value("ns") >= 20_000_000


def test_spin_on_a_missing_cpu_fails_before_forking(host_profctl: Path) -> None:
    """profctl forks from the target CPU, so a CPU it cannot run on fails the step."""
    if MAX_CPU in os.sched_getaffinity(0):
        pytest.skip(f"this host has CPU {MAX_CPU}")
    spin, wait = run_local(host_profctl, spin_step(MAX_CPU, 10), wait_step())
    assert spin.errno == "EINVAL"
    assert (wait.int_value("children"), wait.int_value("failed")) == (0, 0)


def test_spin_children_never_run_off_their_cpu(host_profctl: Path) -> None:
    cpu = max(os.sched_getaffinity(0))
    spin, _ = run_local(host_profctl, spin_step(cpu, 300), sleep_step(50))
    allowed = os.sched_getaffinity(spin.int_value("pid"))
    assert allowed == {cpu}


def _still_running(pid: int, program: Path) -> bool:
    """Whether ``pid`` is a live (not zombie) process of ``program``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and argv0 == str(program).encode()


def test_spin_without_wait_does_not_hold_the_output_open(host_profctl: Path) -> None:
    """profctl's output ends while its spin child still runs: the child closed our pipes.

    Had the child kept them, reading the output would have lasted its whole minute and
    `run_local` would have failed on its 20 s deadline (killing the child with it).
    """
    cpu = min(os.sched_getaffinity(0))
    (spin,) = run_local(host_profctl, spin_step(cpu, 60_000))
    pid = spin.int_value("pid")
    try:
        assert spin.ok
        assert _still_running(pid, host_profctl)
    finally:
        if _still_running(pid, host_profctl):
            os.kill(pid, signal.SIGKILL)


def test_timeout_interrupts_a_blocked_read(host_profctl: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    timeout, opened, read = run_local(
        host_profctl, timeout_step(1), open_step(str(fifo)), read_step(3, str(tmp_path / "o"), 64)
    )
    assert (timeout.ok, timeout.int_value("seconds")) == (True, 1)
    assert opened.int_value("fd") == 3
    # Nothing ever writes to the FIFO: only the timeout's alarm ends that read, with EINTR.
    assert (read.ok, read.errno, read.values) == (False, "EINTR", {"bytes": "0", "reads": "0"})


def test_unload_of_a_module_nobody_loaded_fails_with_an_errno(host_profctl: Path) -> None:
    (unload,) = run_local(host_profctl, unload_step("profbench_no_such_module"))
    # ENOENT unprivileged or privileged alike on Linux; EPERM without CAP_SYS_MODULE;
    # ENOSYS where a sandbox filters the call. Never ok: the module does not exist.
    assert (unload.op, unload.ok) == ("unload", False)
    assert unload.errno in ("ENOENT", "EPERM", "ENOSYS")


@pytest.mark.parametrize(("pause_ms", "status"), [
    # Blocked in read: takes the second write at once; the alarm ends it (profctl's
    # own descriptor, opened read-write, keeps the FIFO from ever reaching EOF).
    (0, "bytes=6 reads=2 errno=EINTR"),
    (60_000, "bytes=3 reads=1 errno=EINTR"),  # asleep after the short read until the alarm
])  # fmt: skip
def test_a_pausing_background_reader_sleeps_after_a_short_read(
    host_profctl: Path, tmp_path: Path, pause_ms: int, status: str
) -> None:
    """dt's reader pauses after a read that emptied the rings (`readbg_step`'s ``pause_ms``)."""
    fifo, out = tmp_path / "fifo", tmp_path / "out"
    os.mkfifo(fifo)

    def writer() -> None:
        with open(fifo, "wb", buffering=0) as pipe:
            pipe.write(b"abc")
            drained = time.monotonic() + 15
            while _unread(pipe.fileno()) and time.monotonic() < drained:
                time.sleep(0.01)  # the reader's first read took them: FIONREAD says 0
            pipe.write(b"def")

    thread = threading.Thread(target=writer)
    thread.start()
    steps = (timeout_step(3), open_step(str(fifo)), readbg_step(3, str(out), 64, pause_ms),
             timeout_step(30), wait_step())  # `wait` outlasts the reader's alarm  # fmt: skip
    assert readbg_step(3, "/tmp/o", 64, 5) == "readbg:3:/tmp/o:64:5"
    results = run_local(host_profctl, *steps)
    thread.join()
    assert all(r.ok for r in results), results
    assert (tmp_path / "out.status").read_text().strip() == status


def _unread(fd: int) -> int:
    (count,) = struct.unpack("<i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))
    return int(count)


def test_usage_error_exits_2_before_running_anything(host_profctl: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("before")
    proc = subprocess.run(
        [str(host_profctl), write_step(str(target), "after"), "spin:1", "bogus"],
        capture_output=True, text=True, timeout=20, check=False,
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "profctl: step 1 (spin:1): wrong number of fields\n"
    assert target.read_text() == "before"
    with pytest.raises(ConfigError, match=r"step 0 \(bogus:1\): unknown op"):
        run_local(host_profctl, "bogus:1")


def test_run_profctl_reports_a_missing_binary(tmp_path: Path) -> None:
    with pytest.raises(GuestCommandError, match="exited with status 127"):
        run_profctl(LocalShell(), str(tmp_path / "nope"), (wait_step(),), timeout_s=20)
    with pytest.raises(ConfigError, match="at least one step"):
        run_profctl(LocalShell(), str(tmp_path / "nope"), (), timeout_s=20)


def test_steps_survive_shell_quoting(host_profctl: Path, tmp_path: Path) -> None:
    odd = tmp_path / "a dir; $(touch pwned)"
    odd.mkdir()
    ctl = odd / "ctl *"
    ctl.write_text("")
    steps: Sequence[str] = (write_step(str(ctl), "`id` && echo $1"), cat_step(str(ctl)))
    _, cat = run_local(host_profctl, *steps)
    assert cat.lines == ("`id` && echo $1",)
    assert not (Path.cwd() / "pwned").exists()


# --- long sequences go through a steps file (dropbear refuses commands over 9000 bytes) ---


class _RecordingShell(LocalShell):
    """The local shell, keeping every command it ran."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    def run(
        self, command: str, *, timeout_s: float | None = None, check: bool = True
    ) -> LocalResult:
        self.commands.append(command)
        return super().run(command, timeout_s=timeout_s, check=check)


def test_a_long_sequence_runs_from_a_steps_file_sent_in_short_commands(
    host_profctl: Path, tmp_path: Path
) -> None:
    ctl = tmp_path / "ctl"
    ctl.write_text("")
    steps = [write_step(str(ctl), f"step {i:03d} {'x' * 90} 'q' $HOME") for i in range(150)]
    shell = _RecordingShell()
    results = run_profctl(shell, str(host_profctl), steps, timeout_s=20)
    assert len(shlex.join([str(host_profctl), *steps])) > MAX_COMMAND
    assert max(len(c) for c in shell.commands) <= MAX_COMMAND
    assert shell.commands[-1] == shlex.join([str(host_profctl), "-f", f"{host_profctl}.steps"])
    assert [r.ok for r in results] == [True] * len(steps)
    assert ctl.read_text() == f"step 149 {'x' * 90} 'q' $HOME"


def test_repeat_runs_its_steps_silently_then_once_aloud(host_profctl: Path, tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("")
    missing = str(tmp_path / "no" / "such")
    first, *rest = run_local(
        host_profctl,
        repeat_step(5, 2),
        open_step(str(log)),
        write_step(missing, "x"),
        cat_step(str(log)),
    )
    assert (first.op, first.ok) == ("repeat", True)
    assert first.values == {"times": "5", "steps": "2", "failed": "4", "first": "write:ENOENT"}
    assert [(r.op, r.ok, r.errno) for r in rest] == [
        ("open", True, None),
        ("write", False, "ENOENT"),
        ("cat", True, None),
    ]
    assert rest[0].int_value("fd") == 7  # four silent opens before it, none closed


def test_repeat_must_fit_and_not_nest(host_profctl: Path) -> None:
    with pytest.raises(ConfigError, match="COUNT runs past the last step"):
        run_local(host_profctl, repeat_step(2, 3), sleep_step(1))
    with pytest.raises(ConfigError, match="a repeat inside a repeat"):
        run_local(host_profctl, repeat_step(2, 2), repeat_step(2, 1), sleep_step(1))
    with pytest.raises(ConfigError, match="repeat times must be in 1"):
        repeat_step(0, 1)
