"""A C error in the agent names its template's file and line, its files kept (issue 44)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import templates
from harness.agent.module.build import compile_error
from harness.agent.module.render import render_agent, template_of
from harness.agent.module.spec import AgentSpec
from harness.errors import BuildError
from harness.paths import GUEST_DIR

TEMPLATE = """\
/* head */
{% for name in names %}
int {{ name }}_count;
{% endfor %}
{%- if extra %}
int extra;
{% endif %}
static int last = {{ names | length }};
"""


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A template root of this test's own, gone afterwards."""
    monkeypatch.setattr(templates, "_ROOTS", dict(templates._ROOTS))
    monkeypatch.setattr(templates, "_ROOT_DIRS", dict(templates._ROOT_DIRS))
    templates.environment.cache_clear()
    (tmp_path / "t.c.j2").write_text(TEMPLATE)
    prefix = templates.add_root("tl", tmp_path)
    yield prefix
    templates.environment.cache_clear()


def test_each_output_line_knows_its_template_line(root: str) -> None:
    context = {"names": ("a", "b"), "extra": True}
    out = templates.render(f"{root}t.c.j2", context).split("\n")
    lines = templates.template_lines(f"{root}t.c.j2", context)
    assert lines is not None
    found = dict(zip(out, lines, strict=True))
    assert found["/* head */"] == 1
    assert (found["int a_count;"], found["int b_count;"]) == (3, 3)  # a loop's body
    assert found["int extra;"] == 6
    assert found["static int last = 2;"] == 8


def test_every_agent_template_is_traced_to_the_letter() -> None:
    rendered = render_agent(AgentSpec())
    for file, text in rendered.files.items():
        shown, lines = template_of(rendered, file)
        assert lines is not None, file
        source = (GUEST_DIR.parent / shown).read_text().split("\n")
        for line, at in zip(text.split("\n"), lines, strict=False):
            if at is not None and line.strip() and "{" not in source[at - 1]:
                assert line.strip() == source[at - 1].strip(), (file, line)


def test_a_compile_error_names_the_template_and_keeps_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROFBENCH_ARTIFACTS", str(tmp_path / "artifacts"))
    rendered = render_agent(AgentSpec())
    entry = tmp_path / "entry"
    rendered.write(entry / "src")
    core = rendered.files["core.c"].split("\n")
    number = next(i for i, line in enumerate(core, 1) if line.startswith("static ") and i > 40)
    (entry / "build").mkdir()
    (entry / "build" / "build.log").write_text(
        f"make -C ...\n{entry}/build/core.c:{number}:5: error: 'x' undeclared\n"
        f"{entry}/build/core.c:{number}:5: note: each undeclared identifier is reported once\n"
    )  # fmt: skip
    error = compile_error(BuildError("building module src failed"), rendered, entry, "ab" * 16)
    shown, lines = template_of(rendered, "core.c")
    assert lines is not None
    assert error.tail == (f"{shown}:{lines[number - 1]}:5: error: 'x' undeclared "
                          f"(generated core.c:{number})")  # fmt: skip
    assert shown == "guest/agent/core.c.j2"
    assert error.log is not None
    assert error.log.is_file()  # kept where the removed cache entry's was not
    assert (error.log.parent / "src" / "core.c").read_text() == rendered.files["core.c"]
