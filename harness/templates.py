"""The one jinja2 environment for everything rendered from ``guest/`` (and flavour packages).

Templates only substitute and loop; every decision is made in Python on typed
values before rendering. Undefined names are errors, not empty strings::

    text = render("rootfs/init.j2", {"init": InitConfig(...)})

A flavour that lives outside the tree keeps its C template in its own package;
the registry adds that package's directory as a root, and its templates are
named ``<root>:<file>`` (`add_root`)::

    add_root("myport", Path("/src/myport/profbench_myport"))
    render("myport:myport.c.j2", context)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import jinja2

from harness.errors import ConfigError
from harness.paths import GUEST_DIR

#: Between an extra root's name and a file in it: ``myport:myport.c.j2``.
ROOT_SEPARATOR = ":"
#: Extra template roots by name (`add_root`); the prefix loader reads this dict live.
_ROOTS: dict[str, jinja2.BaseLoader] = {}
_ROOT_DIRS: dict[str, Path] = {}


@cache
def environment() -> jinja2.Environment:
    """The shared environment, loading from ``guest/`` whatever the working directory.

    Names with a ``root:`` prefix load from that extra root instead (`add_root`).
    """
    return jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [
                jinja2.FileSystemLoader(GUEST_DIR),
                jinja2.PrefixLoader(_ROOTS, delimiter=ROOT_SEPARATOR),
            ]
        ),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def add_root(name: str, directory: Path) -> str:
    """Load templates named ``<name>:<file>`` from ``directory``; the name prefix to use.

    Adding the same directory again is nothing.

    :raise ConfigError: ``name`` already loads from another directory.
    """
    directory = directory.resolve()
    known = _ROOT_DIRS.get(name)
    if known is not None and known != directory:
        raise ConfigError(f"template root {name!r} is {known}, not {directory}")
    _ROOT_DIRS[name] = directory
    _ROOTS[name] = jinja2.FileSystemLoader(directory)
    return f"{name}{ROOT_SEPARATOR}"


def render(name: str, context: Mapping[str, object]) -> str:
    """Render ``guest/<name>`` (or ``<root>:<file>``) with ``context``.

    :raise ConfigError: the template is missing, is not valid jinja2, or uses a name
        the context lacks.
    """
    try:
        return environment().get_template(name).render(context)
    except jinja2.TemplateNotFound:
        raise ConfigError(f"template {_shown(name)} not found{_under(name)}") from None
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"template {_shown(name)}: {exc}") from exc
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"template {_shown(name)} line {exc.lineno}: {exc.message}") from exc


#: What `template_lines` appends to a template line: ``/*@tl:N@*/`` (C comment syntax, so
#: it survives rendering as text, and no template writes it).
_MARK = re.compile(r"/\*@tl:(\d+)@\*/")
#: Jinja's tag delimiters: a line that ends inside one cannot take a mark.
_OPEN, _CLOSE = ("{{", "{%", "{#"), ("}}", "%}", "#}")


def template_lines(name: str, context: Mapping[str, object]) -> tuple[int | None, ...] | None:
    """For each line ``render(name, context)`` gives, the template line it came from.

    The template is rendered once more with a mark after every line that ends outside
    a jinja tag; an output line takes its first mark's number, and a line with none
    (from a loop's body past its first line, a macro, an included file) the number of
    the line before it, as a C compiler counts after a ``#line``. None when the marked
    render, marks taken out, is not the plain one (whitespace control that a mark
    changes): then no line is given a wrong number.

    :raise ConfigError: as `render`.
    """
    plain = render(name, context)
    env = environment()
    try:
        source, _, _ = env.loader.get_source(env, name) if env.loader else ("", None, None)
    except jinja2.TemplateNotFound:
        raise ConfigError(f"template {_shown(name)} not found{_under(name)}") from None
    marked, depth = [], 0
    for number, line in enumerate(source.split("\n"), 1):
        depth += sum(line.count(o) for o in _OPEN) - sum(line.count(c) for c in _CLOSE)
        tag = line.strip().startswith(("{%", "{#"))  # a statement line renders nothing
        marked.append(line if depth or tag or not line.strip() else f"{line}/*@tl:{number}@*/")
    text = env.from_string("\n".join(marked)).render(context)
    if _MARK.sub("", text) != plain:
        return None
    found: list[int | None] = []
    for line in text.split("\n"):
        mark = _MARK.search(line)
        found.append(int(mark[1]) if mark else (found[-1] if found else None))
    return tuple(found[: len(plain.split("\n"))])


def shown_name(name: str) -> str:
    """Template ``name`` as a person finds it: ``guest/<name>``, or its file in a root."""
    return _shown(name)


def _shown(name: str) -> str:
    """Template ``name`` for a message: ``guest/<name>``, or its path in an extra root."""
    root, sep, rest = name.partition(ROOT_SEPARATOR)
    if not sep:
        return f"guest/{name}"
    return str(_ROOT_DIRS[root] / rest) if root in _ROOT_DIRS else name


def _under(name: str) -> str:
    return "" if ROOT_SEPARATOR in name else f" under {GUEST_DIR}"


def template_source(name: str) -> str:
    """The raw text of ``guest/<name>``, for cache keys."""
    return (GUEST_DIR / name).read_text()
