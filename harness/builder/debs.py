"""Fetch Debian packages of a foreign architecture without touching the host's dpkg.

apt runs with a private state and cache directory under the bench cache and the
host's own source list, so no foreign architecture is added to the host and
nothing is installed::

    apt = PrivateApt(cache_dir / "apt" / "arm64", debian_arch="arm64")
    apt.update()
    pinned = apt.candidates(["busybox-static", "dropbear-bin"])
    paths = apt.download(pinned, into=workdir)      # verified against SHA256
    extract(paths, root=workdir / "root")

Only the thin shell lives here; what to fetch is decided in `harness.builder.rootfs`.
"""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.builder.cache import file_sha256
from harness.errors import BuildError

LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PinnedPackage:
    """A package at an exact version, with the archive's SHA-256 of its .deb."""

    name: str
    version: str
    sha256: str


class PrivateApt:
    """apt-get/apt-cache with their own state, for one Debian architecture."""

    def __init__(self, state_dir: Path, *, debian_arch: str) -> None:
        self._dir = state_dir
        self._arch = debian_arch
        for sub in ("lists/partial", "archives/partial"):
            (state_dir / sub).mkdir(parents=True, exist_ok=True)
        (state_dir / "status").touch()

    def _options(self) -> list[str]:
        return [
            "-o", f"APT::Architecture={self._arch}",
            "-o", f"APT::Architectures::={self._arch}",
            "-o", f"Dir::State={self._dir}",
            "-o", f"Dir::State::Lists={self._dir / 'lists'}",
            "-o", f"Dir::State::status={self._dir / 'status'}",
            "-o", f"Dir::Cache={self._dir}",
            "-o", f"Dir::Cache::Archives={self._dir / 'archives'}",
            "-o", "Debug::NoLocking=1",
            # The private directory belongs to us; apt's sandbox user may not read it.
            "-o", "APT::Sandbox::User=root",
        ]  # fmt: skip

    def _run(self, tool: str, *args: str, cwd: Path | None = None) -> str:
        argv = [tool, *self._options(), *args]
        LOG.debug("running %s", " ".join(argv))
        proc = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=600, check=False
        )
        if proc.returncode != 0:
            raise BuildError(
                f"{tool} {' '.join(args)} failed with status {proc.returncode} "
                f"(is the host's apt source list reachable?)",
                tail=(proc.stdout + proc.stderr)[-3000:],
            )
        return proc.stdout

    def update(self) -> None:
        """Refresh the private package lists (network; a few seconds)."""
        LOG.info("refreshing the %s package lists (private apt state)", self._arch)
        self._run("apt-get", "-q", "update")

    def candidates(self, names: Sequence[str]) -> list[PinnedPackage]:
        """The version apt would pick today for each name, with its SHA-256."""
        return [self.show(name) for name in names]

    def show(self, name: str, version: str | None = None) -> PinnedPackage:
        """Facts of ``name`` at ``version`` (the candidate when None).

        :raise BuildError: the package or that version is not in the lists.
        """
        if version is None:
            policy = self._run("apt-cache", "policy", name)
            match = re.search(r"Candidate:\s*(\S+)", policy)
            if match is None or match[1] == "(none)":
                raise BuildError(f"no {self._arch} package named {name!r} in the apt lists")
            version = match[1]
        text = self._run("apt-cache", "show", f"{name}={version}")
        record = text.split("\n\n", 1)[0]
        sha = re.search(r"^SHA256:\s*(\S+)", record, re.MULTILINE)
        if sha is None:
            raise BuildError(f"apt-cache show {name}={version} gave no SHA256", tail=record)
        return PinnedPackage(name, version, sha[1])

    def has_version(self, name: str, version: str) -> bool:
        """Whether the lists still offer ``name`` at exactly ``version``."""
        try:
            self.show(name, version)
        except BuildError:
            return False
        return True

    def download(self, packages: Sequence[PinnedPackage], *, into: Path) -> list[Path]:
        """Download each .deb into ``into`` and check it against its SHA-256.

        :raise BuildError: a download failed or a checksum differs.
        """
        into.mkdir(parents=True, exist_ok=True)
        self._run(
            "apt-get", "-q", "download", *(f"{p.name}={p.version}" for p in packages), cwd=into
        )
        paths = []
        for pkg in packages:
            # The directory keeps older versions too: name the exact file apt wrote.
            found = [into / deb_file_name(pkg, arch) for arch in (self._arch, "all")]
            path = next((p for p in found if p.is_file()), None)
            if path is None:
                raise BuildError(f"apt-get download produced neither {found[0].name} nor "
                                 f"{found[1].name}")  # fmt: skip
            actual = file_sha256(path)
            if actual != pkg.sha256:
                raise BuildError(
                    f"{path.name}: SHA-256 {actual} differs from the pinned {pkg.sha256}"
                )
            paths.append(path)
        return paths


def deb_file_name(pkg: PinnedPackage, arch: str) -> str:
    """The file name ``apt-get download`` gives a package (an epoch's colon as ``%3a``)."""
    return f"{pkg.name}_{pkg.version.replace(':', '%3a')}_{arch}.deb"


def extract(debs: Sequence[Path], *, root: Path) -> None:
    """Unpack the data of each .deb into ``root`` (no maintainer scripts run)."""
    root.mkdir(parents=True, exist_ok=True)
    for deb in debs:
        proc = subprocess.run(
            ["dpkg-deb", "-x", str(deb), str(root)], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise BuildError(f"dpkg-deb -x {deb.name} failed", tail=proc.stderr[-2000:])


def elf_needs(path: Path) -> tuple[str | None, tuple[str, ...]]:
    """Return (program interpreter, NEEDED sonames) of an ELF file via ``readelf``."""
    proc = subprocess.run(
        ["readelf", "-W", "-l", "-d", str(path)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise BuildError(f"readelf failed on {path}", tail=proc.stderr[-2000:])
    return parse_readelf(proc.stdout)


def parse_readelf(text: str) -> tuple[str | None, tuple[str, ...]]:
    """Pure half of `elf_needs`: parse ``readelf -W -l -d`` output."""
    interp = re.search(r"\[Requesting program interpreter: ([^\]]+)\]", text)
    needed = tuple(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text))
    return (interp[1] if interp else None), needed
