"""The one jinja2 environment for everything rendered from ``guest/``.

Templates only substitute and loop; every decision is made in Python on typed
values before rendering. Undefined names are errors, not empty strings::

    text = render("rootfs/init.j2", {"init": InitConfig(...)})
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

import jinja2

from harness.errors import ConfigError
from harness.paths import GUEST_DIR


@cache
def environment() -> jinja2.Environment:
    """The shared environment, loading from ``guest/`` whatever the working directory."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(GUEST_DIR),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render(name: str, context: Mapping[str, object]) -> str:
    """Render ``guest/<name>`` with ``context``.

    :raise ConfigError: the template is missing or uses a name the context lacks.
    """
    try:
        return environment().get_template(name).render(context)
    except jinja2.TemplateNotFound:
        raise ConfigError(f"template guest/{name} not found under {GUEST_DIR}") from None
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"template guest/{name}: {exc}") from exc


def template_source(name: str) -> str:
    """The raw text of ``guest/<name>``, for cache keys."""
    return (GUEST_DIR / name).read_text()
