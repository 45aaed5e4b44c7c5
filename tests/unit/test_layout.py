"""The harness's layout is its data flow: no import cycle, no stage imports a later one.

Stages, in order: the foundation modules at the top of ``harness/`` (errors, paths,
timeouts, ...), then ``builder`` → ``vm`` → ``agent`` → ``scenarios`` → ``fuzz`` → ``mutation`` →
``matrix`` → ``cli``. A module may import its own stage and earlier ones, never a later
one. Imports inside functions count too: a lazy import is still a dependency.

Inside ``harness/agent/``, each sub-package's docstring names the others it may import
(``May import: truth, steps.``) and its modules import no other; the flavours'
registry and data import only ``values``; and only a flavour's own folder imports it
(the registry aside, which imports each flavour's ``data``).

Collapsed onto its parts (`agent_unit`: each sub-package, each top-level module, the
registry, each flavour's folder), ``harness/agent/`` has no cycle either: a package
whose files import no file circularly can still sit both above and below another.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from harness.paths import REPO_ROOT

STAGES = ("", "builder", "vm", "agent", "scenarios", "fuzz", "mutation", "matrix", "cli")
HARNESS = REPO_ROOT / "harness"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every harness module ``path`` imports, at any depth of the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("harness"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness"):
            for alias in node.names:  # `from harness.x import y`: y may be a module
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
    return found


MODULES = {module_name(p) for p in HARNESS.rglob("*.py")}
GRAPH = {module_name(p): imports_of(p) & MODULES for p in HARNESS.rglob("*.py")}


def stage_of(module: str) -> int:
    parts = module.split(".")
    return STAGES.index(parts[1]) if len(parts) > 2 and parts[1] in STAGES else 0


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path of module names, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_graph_is_read() -> None:
    assert "harness.vm.machine" in GRAPH["harness.vm.guest"]
    assert "harness.builder.cache" in GRAPH["harness.builder.images"]


def test_no_import_cycle() -> None:
    assert find_cycle(GRAPH) is None, " → ".join(find_cycle(GRAPH) or [])


def test_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_stage_imports_a_later_one() -> None:
    backwards = [
        f"{mod} ({STAGES[stage_of(mod)] or 'foundation'}) imports {dep} ({STAGES[stage_of(dep)]})"
        for mod, deps in sorted(GRAPH.items())
        for dep in sorted(deps)
        if stage_of(dep) > stage_of(mod)
    ]
    assert backwards == []


AGENT = HARNESS / "agent"
AGENT_PACKAGES = tuple(
    sorted(p.parent.name for p in AGENT.glob("*/__init__.py") if p.parent.name != "flavours")
)


def agent_unit(module: str) -> str | None:
    """The part of ``harness.agent`` that ``module`` belongs to (None: outside the agent).

    A sub-package's name; ``flavours`` for the registry (its modules directly in
    ``flavours/``: discovery) and every flavour's data;
    ``flavours.<name>`` for the rest of a flavour's folder; else the module's own name.
    """
    parts = module.split(".")
    if parts[:2] != ["harness", "agent"]:
        return None
    if len(parts) == 2:
        return "agent"
    if parts[2] == "flavours":
        registry = len(parts) == 3 or (AGENT / "flavours" / f"{parts[3]}.py").is_file()
        return "flavours" if registry or parts[4:] == ["data"] else f"flavours.{parts[3]}"
    return parts[2]


def may_import(package: str) -> set[str]:
    """The units ``package``'s docstring says it may import, besides itself (``nothing``)."""
    doc = ast.get_docstring(ast.parse((AGENT / package / "__init__.py").read_text())) or ""
    found = re.search(r"May import: ([^.]*)\.", doc)
    assert found, f"harness.agent.{package}'s docstring does not say what it may import"
    named = {name.strip() for name in found.group(1).replace("\n", " ").split(",")}
    return set() if named == {"nothing"} else named


def unit_graph() -> dict[str, set[str]]:
    """`GRAPH` collapsed onto the parts of ``harness.agent`` (`agent_unit`), self-edges dropped.

    A flavour's folder is not one part with the registry: the registry lists each
    flavour's data, while the rest of the folder (runner, oracles, report) sits on
    everything shared, so the two are the bottom and the top of the agent.
    """
    units: dict[str, set[str]] = {}
    for mod, deps in GRAPH.items():
        unit = agent_unit(mod)
        if unit is None:
            continue
        reached = units.setdefault(unit, set())
        reached.update(u for dep in deps if (u := agent_unit(dep)) not in {None, unit})
    return units


def test_the_agent_packages_are_found() -> None:
    assert {"module", "oracles", "peer", "truth"} <= set(AGENT_PACKAGES)
    assert agent_unit("harness.agent.flavours.dt.data") == "flavours"
    assert agent_unit("harness.agent.flavours.discovery") == "flavours"
    assert agent_unit("harness.agent.flavours.dt.run") == "flavours.dt"
    assert agent_unit("harness.agent.oracles.laws") == "oracles"


def test_agent_packages_import_what_they_say() -> None:
    units = {agent_unit(m) for m in GRAPH} - {None}
    strays = []
    for package in AGENT_PACKAGES:
        allowed = may_import(package) | {package}
        assert allowed - {package} <= units, f"{package} names an unknown part: {allowed - units}"
        strays += [
            f"{mod} imports {dep}"
            for mod, deps in sorted(GRAPH.items())
            if agent_unit(mod) == package
            for dep in sorted(deps)
            if agent_unit(dep) not in allowed | {None, "agent"}
        ]
    assert strays == []


def test_registry_and_flavour_data_import_only_values() -> None:
    """The registry sits at the bottom: of the agent it reads only the values its data is in."""
    strays = [
        f"{mod} imports {dep}"
        for mod, deps in sorted(GRAPH.items())
        if agent_unit(mod) == "flavours"
        for dep in sorted(deps)
        if agent_unit(dep) not in {None, "flavours", "values"}
    ]
    assert strays == []


def test_only_a_flavours_folder_imports_it() -> None:
    strays = [
        f"{mod} imports {dep}"
        for mod, deps in sorted(GRAPH.items())
        for dep in sorted(deps)
        if (agent_unit(dep) or "").startswith("flavours.") and agent_unit(mod) != agent_unit(dep)
    ]
    assert strays == []


def test_no_cycle_between_the_agents_parts() -> None:
    cycle = find_cycle(unit_graph())
    assert cycle is None, " → ".join(cycle or [])


REGISTRY = {"harness.agent.flavours", "harness.agent.flavours.discovery"}


def test_only_the_listed_modules_read_the_registry() -> None:
    """Outside ``flavours/``, only these import the registry (``REGISTRY``), and each does.

    - ``harness.agent.module.spec``: a spec names its flavour, whose data its parameters
      and quirks are.
    - ``harness.agent.module.render``: one module holds every flavour's C, in registry order.
    - ``harness.agent.mutants``: every flavour's own mutants join the core's in the C's enum.
    - ``harness.agent.steps``: a snapshot must hold the counters its flavour declares, and
      names that flavour only in the guest's ``info`` file.
    - ``harness.agent.flavour``: ``behaviour(name)`` imports the package the registry found.
    - ``harness.agent.external``: a flavour found outside is checked against every other.
    - ``harness.agent.scaffold``: a new flavour's name must be well formed and not taken.

    Each needs the flavour a name means, or every flavour, when a name arrives (from a
    scenario, a command line, the guest), so it looks the name up rather than being
    handed the data. That is sound because the registry imports none of them
    (`test_registry_and_flavour_data_import_only_values`): it sits at the bottom of the
    agent, not at its top.
    """
    doc = test_only_the_listed_modules_read_the_registry.__doc__ or ""
    allowed = set(re.findall(r"^\s*- ``([\w.]+)``:", doc, re.MULTILINE))
    readers = {
        mod
        for mod, deps in GRAPH.items()
        if deps & REGISTRY
        and agent_unit(mod) not in {None, "flavours"}
        and not (agent_unit(mod) or "").startswith("flavours.")
    }
    assert len(allowed) == 7
    assert sorted(readers) == sorted(allowed)


#: The most lines a module of the harness (or tasks.py) may have: one a newcomer reads top
#: to bottom (issue 43). Counted as ``wc -l`` does.
MAX_MODULE_LINES = 400


def test_no_module_is_longer_than_a_newcomer_reads() -> None:
    modules = [*HARNESS.rglob("*.py"), REPO_ROOT / "tasks.py"]
    long = {str(p.relative_to(REPO_ROOT)): n for p in modules
            if (n := p.read_text().count("\n")) > MAX_MODULE_LINES}  # fmt: skip
    assert len(modules) > 100
    assert long == {}
