"""What ``invoke ci`` builds beside its first tier: the later tiers' kernels and agents.

`harness.cli.ci.run_ci` starts this module at idle priority
(`harness.process.beside`) once the first tier's images are ready, so the debug,
6.12 and kcsan kernels and the mutant stage's agents compile in the CPU time the
guest tier leaves idle instead of one after another before it. Every build goes
into the content-addressed cache, exactly as ``invoke images`` and ``invoke
mutants`` would make it; the later stages then find them there (and build what is
missing themselves if this run failed or was stopped)::

    python -m harness.cli.prebuild     # exit status 0 when everything was built
"""

from __future__ import annotations

import logging
import sys

from harness import arches
from harness.builder.cache import Cache
from harness.builder.images import prepare_images
from harness.builder.kernel import KernelChoice
from harness.cli.ci import CI_IMAGES, CI_MUTANTS
from harness.errors import HarnessError
from harness.mutation.campaign import build_default_group
from harness.process import handle_sigterm

LOG = logging.getLogger("harness.cli.prebuild")


def build_later(cache: Cache) -> None:
    """Every CI image after the first, then the agents of CI's mutant stage."""
    for arch, variant, kernel in CI_IMAGES[1:]:
        prepare_images(arches.get(arch), variant, cache, kernel=KernelChoice(kernel))
    count = build_default_group(CI_MUTANTS, cache)
    LOG.info("the mutant stage's %d agents are built", count)


def main() -> int:
    """Build, logging to stderr; a harness error is one line and its exit status."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr)  # fmt: skip
    handle_sigterm()
    try:
        build_later(Cache.default())
    except HarnessError as exc:
        print(f"error ({type(exc).__name__}): {exc}", file=sys.stderr)
        return exc.exit_status
    return 0


if __name__ == "__main__":
    sys.exit(main())
