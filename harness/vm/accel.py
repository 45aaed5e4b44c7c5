"""Choosing the accelerator: KVM only where a real boot proves it works.

On these machines ``/dev/kvm`` exists and even opens, yet KVM guests fail: QEMU's
default CPU boots, but ``-cpu host,pmu=on`` aborts with "failed to set MSR
0x10a", and a nested Linux guest hangs. So the device file proves nothing. The
probe boots the arch's tiny probe kernel (`ArchProfile.probe_kernel`, which
writes ``KV`` to the serial port) with the machine type and CPU model a real
run would use; those bytes within the deadline mean KVM runs *our* guests here.
The answer is cached per host, kernel release, QEMU version and CPU model::

    accel, reason = choose_accel(arches.get("x86_64"), "auto", cache)
    # ('tcg', 'probe QEMU exited: ... failed to set MSR 0x10a to 0x69 ...')
"""

from __future__ import annotations

import json
import logging
import os
import platform
import select
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

from harness.arches import Accel, ArchProfile
from harness.builder.cache import Cache, content_key, write_json_atomic
from harness.errors import ConfigError
from harness.process import die_with_parent, tool_version

LOG = logging.getLogger(__name__)

AccelChoice = Literal["auto", "kvm", "tcg"]
PROBE_TIMEOUT_S = 15.0


def choose_accel(arch: ArchProfile, choice: str, cache: Cache) -> tuple[Accel, str]:
    """Resolve ``auto``/``kvm``/``tcg`` for ``arch`` on this host, with the reason.

    :raise ConfigError: ``kvm`` was demanded but cannot work here.
    """
    if choice == "tcg":
        return "tcg", "requested"
    if choice not in ("auto", "kvm"):
        raise ConfigError(f"unknown accelerator {choice!r}; use auto, kvm or tcg")
    if not arch.kvm_possible_here:
        reason = f"a {platform.machine()} host cannot run {arch.name} guests under KVM"
    elif not os.path.exists("/dev/kvm"):
        reason = "/dev/kvm does not exist"
    else:
        works, reason = kvm_probe(arch, cache)
        if works:
            return "kvm", reason
    if choice == "kvm":
        raise ConfigError(f"--accel kvm is not usable: {reason}; use --accel tcg or auto")
    return "tcg", reason


def kvm_probe(arch: ArchProfile, cache: Cache) -> tuple[bool, str]:
    """Whether a KVM guest really runs on this host (cached per kernel and QEMU)."""
    version = tool_version(arch.qemu_binary)
    key = content_key({"kernel": platform.release(), "qemu": version, "host": platform.node(),
                       "machine": arch.machine, "cpu": arch.kvm_cpu})  # fmt: skip
    path = cache.root / "probes" / f"kvm-{key}.json"
    if path.is_file():
        cached = json.loads(path.read_text())
        return bool(cached["works"]), f"{cached['reason']} (cached probe)"
    LOG.info("probing KVM with a real boot (at most %.0fs, once per host)", PROBE_TIMEOUT_S)
    works, reason = boot_probe(arch)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {"works": works, "reason": reason, "at": time.time()})
    return works, reason


def boot_probe(arch: ArchProfile, accel: Accel = "kvm") -> tuple[bool, str]:
    """Boot ``arch.probe_kernel`` like a real guest under ``accel``; True when it printed."""
    with tempfile.TemporaryDirectory(prefix="profbench-kvm-") as tmp:
        image = Path(tmp) / "probe.img"
        image.write_bytes(arch.probe_kernel)
        argv = [arch.qemu_binary, "-accel", accel, "-machine", arch.machine,
                "-cpu", arch.cpu_model(accel), "-nodefaults", "-no-user-config",
                "-display", "none", "-serial", "stdio", "-m", "64M",
                "-kernel", str(image)]  # fmt: skip
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, preexec_fn=die_with_parent,  # noqa: PLW1509
            )  # fmt: skip
        except OSError as exc:
            return False, f"probe could not start QEMU: {exc}"
        try:
            return _read_probe(proc)
        finally:
            proc.kill()
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()


def _read_probe(proc: subprocess.Popen[bytes]) -> tuple[bool, str]:
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                return False, f"probe QEMU exited: {seen.decode(errors='replace').strip()[-300:]}"
            seen += chunk
            if b"KV" in seen:
                return True, "probe guest booted and wrote to its serial port"
    return False, f"probe guest printed nothing within {PROBE_TIMEOUT_S:.0f}s (hung)"
