"""Out-of-tree kernel modules, built against the cached kernel tree of the images.

::

    ko = build_module(source_dir, images, out_dir)     # out_dir/<name>.ko
    shell.put(ko, f"/tmp/{ko.name}")
    shell.run(f"insmod /tmp/{ko.name}")

The source directory (a ``Kbuild`` file and C sources) is copied into
``out_dir`` and built there, so the build products stay with the run's artifacts.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from harness.builder.images import GuestImages
from harness.errors import BuildError
from harness.process import run_logged

LOG = logging.getLogger(__name__)


def build_module(source: Path, images: GuestImages, out: Path, *, timeout_s: float = 600) -> Path:
    """Build the module in ``source`` against ``images``' kernel; return its ``.ko``.

    Blocks ≤ ``timeout_s``.

    :raise BuildError: the compiler failed (its error lines attached), or the build
        produced no single ``.ko``.
    """
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, out, dirs_exist_ok=True)
    arch = images.arch
    make = ["make", "-C", str(images.kernel_build), f"M={out}", f"ARCH={arch.linux_arch}"]
    make += [f"CROSS_COMPILE={arch.cross_compile}", "modules"]
    run_logged(
        make, log=out / "build.log", what=f"building module {source.name}", timeout_s=timeout_s
    )
    built = sorted(out.glob("*.ko"))
    if len(built) != 1:
        raise BuildError(f"expected one .ko in {out}, found {[p.name for p in built]}",
                         log=out / "build.log")  # fmt: skip
    LOG.info("built %s (%d bytes)", built[0], built[0].stat().st_size)
    return built[0]
