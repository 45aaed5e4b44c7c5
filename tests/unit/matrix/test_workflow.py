"""The GitHub workflow fans out exactly what ``invoke matrix NAME --format github`` prints.

The workflow's ``plan`` job prints a matrix as JSON, and the ``cell`` job takes it as
``strategy.matrix`` and reads ``matrix.<key>`` in its name and steps. GitHub never
runs this workflow here, so this test renders each matrix with the very function the
command uses and checks the workflow's side: every ``matrix.<key>`` it reads exists in
every cell, every cell's id selects that cell alone (``-k CELL``), and GitHub's limit
of 256 jobs per matrix holds. The workflow's schema is checked by ``invoke check``
(check-jsonschema).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from ruamel.yaml import YAML

from harness.matrix.load import get_matrix, github_images, github_matrix, load_matrices, select
from harness.paths import REPO_ROOT

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "matrix.yml"
GITHUB_MAX_JOBS = 256  # per matrix
MATRIX_NAMES = sorted(load_matrices())  # every matrix the workflow may be asked to run
_MATRIX_KEY = re.compile(r"\bmatrix\.([A-Za-z_][\w-]*)")
_FROM_JSON = re.compile(r"^\$\{\{\s*fromJSON\(needs\.(\w+)\.outputs\.(\w+)\)\s*\}\}$")


def load_workflow() -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe").load(WORKFLOW.read_text())
    return data


def fanned_out_jobs(workflow: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Jobs whose strategy.matrix is another job's output, read with fromJSON."""
    return {
        name: job
        for name, job in workflow["jobs"].items()
        if _FROM_JSON.match(str(job.get("strategy", {}).get("matrix", "")))
    }


def rendered(name: str) -> dict[str, Any]:
    """What ``invoke matrix NAME --format github`` prints, parsed back."""
    chosen = get_matrix(name)
    data: dict[str, Any] = json.loads(json.dumps(github_matrix(chosen, select(chosen, None))))
    return data


@pytest.mark.parametrize(("job", "form"), [("cell", "github"), ("images", "images")])
def test_each_fanned_out_job_takes_its_matrix_from_invoke_matrix(job: str, form: str) -> None:
    workflow = load_workflow()
    jobs = fanned_out_jobs(workflow)
    assert list(jobs) == ["images", "cell"]
    found = _FROM_JSON.match(jobs[job]["strategy"]["matrix"])
    assert found is not None
    planner, output = found.groups()
    assert planner in str(jobs[job]["needs"])
    plan = workflow["jobs"][planner]
    step_id = re.fullmatch(r"\$\{\{\s*steps\.(\w+)\.outputs\.(\w+)\s*\}\}", plan["outputs"][output])
    assert step_id is not None
    (step,) = [s for s in plan["steps"] if s.get("id") == step_id.group(1)]
    assert f'echo "{step_id.group(2)}=$(invoke matrix "$name" --format {form})"' in step["run"]


def _cache_steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/cache")]


def test_cells_restore_the_kernel_the_images_job_saved_under_the_same_key() -> None:
    jobs = load_workflow()["jobs"]
    assert "images" in str(jobs["cell"]["needs"])
    (saved,), (restored,) = _cache_steps(jobs["images"]), _cache_steps(jobs["cell"])
    assert saved["uses"].startswith("actions/cache@")  # restores, or saves after a build
    assert restored["uses"].startswith("actions/cache/restore@")
    assert restored["with"]["fail-on-cache-miss"] is True  # never a cold build per cell
    assert (saved["with"]["key"], saved["with"]["path"]) == (
        restored["with"]["key"], restored["with"]["path"])  # fmt: skip
    key_steps = [next(s for s in jobs[j]["steps"] if s.get("id") == "key") for j in jobs
                 if j in ("images", "cell")]  # fmt: skip
    assert key_steps[0]["run"] == key_steps[1]["run"]
    assert "invoke images --key" in key_steps[0]["run"]


@pytest.mark.parametrize("name", MATRIX_NAMES)
def test_the_images_job_builds_every_kernel_a_cell_boots_once(name: str) -> None:
    chosen = get_matrix(name)
    images = github_images(chosen, select(chosen, None))["include"]
    assert isinstance(images, list)
    wanted = {(c["arch"], c["variant"], c["kernel"]) for c in rendered(name)["include"]}
    built = [(i["arch"], i["variant"], i["kernel"]) for i in images]
    assert sorted(built) == sorted(wanted)  # each once
    used = set(_MATRIX_KEY.findall(json.dumps(fanned_out_jobs(load_workflow())["images"])))
    assert used
    assert all(used <= set(image) for image in images)


@pytest.mark.parametrize("name", MATRIX_NAMES)
def test_every_key_the_workflow_reads_is_in_every_cell(name: str) -> None:
    used = set(_MATRIX_KEY.findall(json.dumps(fanned_out_jobs(load_workflow())["cell"])))
    assert used, "the cell job reads no matrix.<key>: nothing tells the cells apart"
    cells = rendered(name)["include"]
    assert cells, f"matrix {name} has no cells"
    missing = [(cell.get("cell"), sorted(used - set(cell))) for cell in cells if used - set(cell)]
    assert missing == []


@pytest.mark.parametrize("name", MATRIX_NAMES)
def test_each_cell_id_selects_its_cell_alone_within_githubs_job_limit(name: str) -> None:
    cells = rendered(name)["include"]
    assert len(cells) <= GITHUB_MAX_JOBS
    matrix = get_matrix(name)
    for cell in cells:
        assert [c.id for c in select(matrix, cell["cell"])] == [cell["cell"]]
        assert all(isinstance(value, str) and value for value in cell.values())
