"""Both profiles in speedscope's and pprof's formats, checked by those formats' own tools.

speedscope's schema comes from its npm package (``dist/release/file-format-schema.json``)
and is checked with check-jsonschema; pprof's proto is decoded by ``pprof-format``, the
pprof encoder and decoder for JavaScript (npm), in node. Both packages come from the npm
registry with ``npm pack``; without npm these skip, naming it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness.agent.peer.export import parse_pprof, pprof, speedscope
from harness.agent.peer.symbols import fold

AGENT = fold(
    [("main", "work", "outer", "middle", "leaf")] * 40
    + [("main", "work", "now_ns")] * 3
    + [("[kernel]", "__arch_clear_user")] * 5
)
PERF = fold([("main", "work", "outer", "middle", "leaf")] * 38 + [("main", "work")] * 2)
PACKAGES = {"speedscope": "1.25.0", "pprof-format": "2.3.2"}


@pytest.fixture(scope="module")
def npm_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both npm packages unpacked under one directory (``<name>/package/...``)."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed (apt-get install npm): the formats' own tools")
    out = tmp_path_factory.mktemp("npm")
    specs = [f"{name}@{version}" for name, version in PACKAGES.items()]
    subprocess.run([npm, "pack", "--silent", *specs], cwd=out, check=True, timeout=300,
                   capture_output=True)  # fmt: skip
    for name, version in PACKAGES.items():
        with tarfile.open(out / f"{name}-{version}.tgz") as tar:
            tar.extractall(out / name, filter="data")
    return out


def test_the_speedscope_file_passes_speedscopes_own_schema(
    npm_packages: Path, tmp_path: Path
) -> None:
    schema = npm_packages / "speedscope" / "package" / "dist" / "release"
    schema /= "file-format-schema.json"
    path = tmp_path / "profile-01.speedscope.json"
    path.write_text(speedscope({"agent": AGENT, "perf": PERF}))
    checker = Path(sys.executable).parent / "check-jsonschema"
    done = subprocess.run([str(checker), "--schemafile", str(schema), str(path)],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(path.read_text())
    frames = [f["name"] for f in document["shared"]["frames"]]
    agent, perf = document["profiles"]
    assert sum(agent["weights"]) == AGENT.total
    assert sum(perf["weights"]) == PERF.total
    # Each sample is root first: the workload's path reads main → ... → leaf.
    assert [frames[i] for i in agent["samples"][0]] == ["main", "work", "outer", "middle", "leaf"]
    # A schema that fails: a broken file is refused, so the check can fail.
    broken = tmp_path / "broken.speedscope.json"
    broken.write_text(json.dumps({**document, "profiles": [{**agent, "type": "sampledd"}]}))
    refused = subprocess.run([str(checker), "--schemafile", str(schema), str(broken)],
                             capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert refused.returncode != 0


DECODE = """
const { Profile } = require(process.argv[1]);
const zlib = require("zlib");
const fs = require("fs");
const profile = Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[2])));
const name = (id) => profile.stringTable.strings[
  profile.function.find((f) => f.id == id).name];
console.log(JSON.stringify(profile.sample.map((s) => [
  s.locationId.map((l) => name(profile.location.find((x) => x.id == l).line[0].functionId)),
  s.value.map(Number)])));
"""


def test_the_pprof_file_decodes_with_a_pprof_library(npm_packages: Path, tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None  # npm needs it
    path = tmp_path / "profile-01-agent.pb.gz"
    path.write_bytes(pprof(AGENT, period=1_000_000))
    library = npm_packages / "pprof-format" / "package"
    done = subprocess.run([node, "-e", DECODE, str(library), str(path)], capture_output=True,
                          text=True, timeout=120, check=True)  # fmt: skip
    samples = {tuple(stack): values for stack, values in json.loads(done.stdout)}
    # pprof lists a sample's frames leaf first.
    assert samples[("leaf", "middle", "outer", "work", "main")] == [40]
    assert samples[("__arch_clear_user", "[kernel]")] == [5]
    assert sum(v[0] for v in samples.values()) == AGENT.total


def test_pprof_keeps_every_stack_and_count() -> None:
    message = parse_pprof(pprof(PERF))
    names = {f.id: message.string_table[f.name] for f in message.function}
    stacks = {tuple(names[i] for i in s.location_id): s.value[0] for s in message.sample}
    assert stacks == {tuple(reversed(stack)): n for stack, n in PERF.stacks}
    assert message.string_table[message.sample_type[0].type] == "samples"
