from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from harness.agent import flavours
from harness.agent.flavour import behaviour
from harness.agent.flavours.tprof.data import TPROF as TPROF_INFO
from harness.agent.module.spec import AgentSpec
from harness.errors import ConfigError
from harness.scenarios.load import (
    OPS,
    SCENARIOS_DIR,
    Expectation,
    Scenario,
    Step,
    find_scenario,
    load_all,
    load_scenario,
    scenario_record,
)
from harness.vm.topology import CpuTopology

# A valid tprof scenario in parts; tests swap one part. Top-level keys come first in TOML.
TOP = 'name = "s"\ndescription = "a test"\nseed = 1\n'
GUEST = '[guest]\ntopology = "2s1cl1c2t"\n'  # 4 CPUs
AGENT = """[agent]
flavour = "tprof"
period = 200000
drain = "manual"
buffer_samples = 8
list_limit = 2
quirks = ["TP-D1"]
pmu_produce = false
"""
STEPS = '[[steps]]\nop = "inject"\ncpu = "all"\ncount = 8\n'
EXPECT = """[[expect]]
oracle = "TP-O1"
[[expect]]
value = "stats.sample"
equals = 16
"""
DT_AGENT = '[agent]\nflavour = "dt"\n'
DT_EXPECT = '[[expect]]\noracle = "DT-O1"\n'


def write(
    tmp_path: Path,
    *,
    name: str = "s",
    top: str = TOP,
    guest: str = GUEST,
    agent: str = AGENT,
    steps: str = STEPS,
    expect: str = EXPECT,
) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join((top, guest, agent, steps, expect)))
    return path


def step(op: str, **params: object) -> str:
    lines = [f'op = "{op}"', *(f"{key} = {json.dumps(value)}" for key, value in params.items())]
    return "[[steps]]\n" + "\n".join(lines) + "\n"


def value_expect(value: str, relation: str = "equals", bound: int = 1) -> str:
    return f'[[expect]]\nvalue = "{value}"\n{relation} = {bound}\n'


# --- valid files -------------------------------------------------------------------------


def test_the_example_loads(tmp_path: Path) -> None:
    path = write(tmp_path)
    scenario = load_scenario(path)
    assert isinstance(scenario, Scenario)
    assert (scenario.name, scenario.seed, scenario.repeat, scenario.path) == ("s", 1, 1, path)
    assert scenario.guest.topology == CpuTopology.parse("2s1cl1c2t")
    assert scenario.agent == AgentSpec(
        flavour="tprof",
        period=200_000,
        drain="manual",
        quirks=TPROF_INFO.quirk_bit("TP-D1"),
        pmu_produce=False,
        params=(("buffer_samples", 8), ("list_limit", 2)),
    )
    assert scenario.steps == (Step("inject", cpu="all", count=8),)
    assert [e.describe() for e in scenario.expect] == ["oracle TP-O1 holds", "stats.sample == 16"]


def test_defaults_fill_every_optional_key(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, agent='[agent]\nflavour = "tprof"\n', steps=""))
    guest = scenario.guest
    assert (guest.arch, guest.accel, guest.variant, guest.nmi, guest.kernel_args) == (
        "arm64",
        "tcg",
        "default",
        True,
        (),
    )
    assert scenario.agent == AgentSpec(flavour="tprof")
    assert (scenario.throttling, scenario.max_sample_rate, scenario.steps) == (False, None, ())


def test_a_scenario_may_name_one_of_its_flavours_runs_instead_of_steps(tmp_path: Path) -> None:
    hw = '[agent]\nflavour = "hwpmc"\n'
    for run in behaviour("hwpmc").runs:
        path = write(tmp_path, top=TOP + f'run = "{run}"\n', agent=hw, steps="",
                     expect='[[expect]]\noracle = "HW-O1"\n')  # fmt: skip
        scenario = load_scenario(path)
        assert (scenario.run, scenario.steps) == (run, ())
        assert scenario_record(scenario)["run"] == run
    assert load_scenario(write(tmp_path)).run is None
    assert "run" not in scenario_record(load_scenario(write(tmp_path)))


def test_every_guest_and_agent_key(tmp_path: Path) -> None:
    guest = """[guest]
arch = "arm64"
accel = "auto"
topology = "sockets=1,clusters=2,cores=1,threads=1"
variant = "debug"
nmi = "off"
kernel_args = ["loglevel=8", "nokaslr"]
"""
    agent = AGENT + 'event = "cpu-clock"\ndrain_ms = 50\nest_freq = 100\n'
    agent += 'throttling = "on"\nmax_sample_rate = 2000\n'
    scenario = load_scenario(write(tmp_path, top=TOP + "repeat = 3\n", guest=guest, agent=agent))
    assert scenario.repeat == 3
    assert (scenario.guest.accel, scenario.guest.variant, scenario.guest.nmi) == (
        "auto",
        "debug",
        False,
    )
    assert scenario.guest.topology.name == "1s2cl1c1t"
    assert scenario.guest.kernel_args == ("loglevel=8", "nokaslr")
    assert (scenario.agent.event, scenario.agent.drain_ms, scenario.agent.param("est_freq")) == (
        "cpu-clock",
        50,
        100,
    )
    assert (scenario.throttling, scenario.max_sample_rate) == (True, 2000)
    # Every AgentSpec field but flavour is read from the file: none keeps its default.
    default = AgentSpec()
    names = [f.name for f in fields(AgentSpec) if f.name != "flavour"]
    assert all(getattr(scenario.agent, name) != getattr(default, name) for name in names)


def test_every_tprof_op(tmp_path: Path) -> None:
    steps = "".join(
        (
            step("inject", cpu=3, count=1_000_000),
            step("kick"),
            step("kick", cpu=1),
            step("spin", cpu=2, ms=600_000),
            step("wait"),
            step("idle", ms=1),
            step("probe", cpu=0, ms=5000),
            step("offline", cpu=3),
            step("online", cpu=3),
            step("pause", ms=200),
        )
    )
    scenario = load_scenario(write(tmp_path, steps=steps))
    assert [s.describe() for s in scenario.steps] == [
        "inject cpu=3 count=1000000",
        "kick cpu=all",
        "kick cpu=1",
        "spin cpu=2 ms=600000",
        "wait",
        "idle ms=1",
        "probe cpu=0 ms=5000",
        "offline cpu=3",
        "online cpu=3",
        "pause ms=200",
    ]


def test_dt_ops_and_values(tmp_path: Path) -> None:
    steps = step("reader", on=True) + step("skip", cpu=1, count=5) + step("nest", cpu=0, count=3)
    steps += step("inject", cpu=0, count=2) + step("reader", on=False)
    expect = DT_EXPECT + value_expect("stats.readevt", "at_least", 2)
    expect += value_expect("percpu.3.x_calls", "at_most", 10) + value_expect("samples.cpu.1")
    scenario = load_scenario(write(tmp_path, agent=DT_AGENT, steps=steps, expect=expect))
    assert scenario.steps[0] == Step("reader", on=True)
    assert scenario.steps[1].params() == {"cpu": 1, "count": 5}
    assert [e.describe() for e in scenario.expect] == [
        "oracle DT-O1 holds",
        "stats.readevt >= 2",
        "percpu.3.x_calls <= 10",
        "samples.cpu.1 == 1",
    ]


def test_inject_nmi_where_the_arch_supports_it(tmp_path: Path) -> None:
    guest = '[guest]\narch = "x86_64"\ntopology = "1s1cl2c1t"\n'
    scenario = load_scenario(write(tmp_path, guest=guest, steps=step("inject-nmi")))
    assert scenario.guest.arch == "x86_64"
    assert scenario.steps == (Step("inject-nmi"),)


def test_quirks_as_a_mask(tmp_path: Path) -> None:
    agent = AGENT.replace('quirks = ["TP-D1"]', "quirks = 3")
    assert load_scenario(write(tmp_path, agent=agent)).agent.quirks == 3


def test_value_names_of_every_kind(tmp_path: Path) -> None:
    expect = value_expect("samples") + value_expect("samples.cpu.3")
    expect += value_expect("percpu.0.x_quirk_lost") + value_expect("core.2.x_nmi_total")
    expect += value_expect("stats.x_bytes_read")
    assert len(load_scenario(write(tmp_path, expect=expect)).expect) == 5


def test_expectation_holds() -> None:
    assert Expectation(value="samples", equals=3).holds(3)
    assert not Expectation(value="samples", equals=3).holds(4)
    assert Expectation(value="samples", at_least=3).holds(4)
    assert not Expectation(value="samples", at_most=3).holds(4)
    assert not Expectation(oracle="TP-O1").holds(0)
    assert Expectation(value="samples", at_most=3).describe() == "samples <= 3"


def test_record_is_json_and_mirrors_the_file(tmp_path: Path) -> None:
    agent = AGENT + 'throttling = "on"\nmax_sample_rate = 2000\n'
    record = scenario_record(load_scenario(write(tmp_path, agent=agent, steps=step("kick"))))
    assert json.loads(json.dumps(record)) == record
    assert record["guest"] == {
        "arch": "arm64",
        "accel": "tcg",
        "topology": "2s1cl1c2t",
        "variant": "default",
        "nmi": "on",
        "kernel_args": [],
    }
    assert record["steps"] == [{"op": "kick", "cpu": "all"}]
    assert record["expect"] == [{"oracle": "TP-O1"}, {"value": "stats.sample", "equals": 16}]
    agent_record = record["agent"]
    assert isinstance(agent_record, dict)
    assert agent_record["quirks"] == 1
    assert (agent_record["throttling"], agent_record["max_sample_rate"]) == ("on", 2000)
    assert (record["seed"], record["path"]) == (1, str(tmp_path / "s.toml"))


def test_load_all_sorts_by_name(tmp_path: Path) -> None:
    write(tmp_path, name="b", top=TOP.replace('"s"', '"b"'))
    write(tmp_path, name="a", top=TOP.replace('"s"', '"a"'))
    assert [s.name for s in load_all(tmp_path)] == ["a", "b"]
    assert load_all(tmp_path / "none") == ()


def test_load_all_on_the_repository() -> None:
    # Whatever the repository ships must load.
    assert all(s.path.parent == SCENARIOS_DIR for s in load_all())


def test_find_scenario_by_path_and_by_name(tmp_path: Path) -> None:
    path = write(tmp_path, name="tprof-one")
    assert find_scenario(str(path)) == path
    assert find_scenario("tprof-one", tmp_path) == path
    with pytest.raises(ConfigError, match=r"no scenario .*'tprof-onw'.*did you mean tprof-one"):
        find_scenario("tprof-onw", tmp_path)
    with pytest.raises(ConfigError, match="known: tprof-one"):
        find_scenario("nothing-like-it", tmp_path)


def test_format_documents_every_op_and_its_example_loads(tmp_path: Path) -> None:
    text = (SCENARIOS_DIR / "FORMAT.md").read_text()
    own = {op for name in flavours.names() for op in behaviour(name).ops}
    assert own  # dt has ops of its own
    assert all(f"`{op}`" in text for op in (*OPS, *own))
    example = text.rsplit("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "tprof-tp-d1-quirk.toml"
    path.write_text(example)
    scenario = load_scenario(path)
    assert scenario.agent.quirks == TPROF_INFO.quirk_bit("TP-D1")
    assert [s.describe() for s in scenario.steps] == ["inject cpu=0 count=40", "kick cpu=all"]


# --- errors: file, key and reason --------------------------------------------------------

ERRORS: dict[str, tuple[dict[str, str], str, str]] = {
    # id: (parts to swap, key, reason fragment)
    "unknown top-level key": ({"top": TOP + 'colour = "red"\n'}, "colour", "unknown key"),
    "unknown guest key": ({"guest": GUEST + "memory = 2\n"}, "guest.memory", "unknown key"),
    "unknown agent key": ({"agent": AGENT + "sample_period = 1\n"}, "agent.sample_period", ""),
    "unknown step key": ({"steps": step("wait", cpu=1)}, "steps[0].cpu", "allowed here: op"),
    "unknown expect key": ({"expect": EXPECT + "hint = 1\n"}, "expect[1].hint", "unknown key"),
    "seed missing": ({"top": 'name = "s"\ndescription = "d"\n'}, "seed", "it is missing"),
    "seed not an int": ({"top": TOP.replace("1", '"one"')}, "seed", "must be an integer"),
    "seed negative": ({"top": TOP.replace("1", "-1")}, "seed", "-1 is below the minimum 0"),
    "seed a bool": ({"top": TOP.replace("1", "true")}, "seed", "must be an integer"),
    "empty description": ({"top": TOP.replace("a test", "")}, "description", "non-empty"),
    "repeat 0": ({"top": TOP + "repeat = 0\n"}, "repeat", "below the minimum 1"),
    "repeat 101": ({"top": TOP + "repeat = 101\n"}, "repeat", "above the maximum 100"),
    "name not the stem": ({"top": TOP.replace('"s"', '"t"')}, "name", "file stem 's'"),
    "no guest": ({"guest": ""}, "guest", "must be a table; it is missing"),
    "no topology": ({"guest": '[guest]\narch = "arm64"\n'}, "guest.topology", "missing"),
    "bad topology": ({"guest": '[guest]\ntopology = "4x"\n'}, "guest.topology", "cannot read"),
    "unknown arch": ({"guest": GUEST + 'arch = "mips"\n'}, "guest.arch", "use one of: arm64"),
    "bad accel": ({"guest": GUEST + 'accel = "hvf"\n'}, "guest.accel", "one of tcg, kvm, auto"),
    "nmi as bool": ({"guest": GUEST + "nmi = true\n"}, "guest.nmi", "one of on, off, not True"),
    "bad variant": ({"guest": GUEST + 'variant = "kasan"\n'}, "guest.variant", "unknown kernel"),
    "kernel arg with a space": (
        {"guest": GUEST + 'kernel_args = ["a b"]\n'},
        "guest.kernel_args",
        "one-word strings",
    ),
    "x86 clusters": (
        {"guest": '[guest]\narch = "x86_64"\ntopology = "1s2cl1c1t"\n'},
        "guest",
        "cannot have clusters",
    ),
    "x86 nmi off": (
        {"guest": '[guest]\narch = "x86_64"\ntopology = "1s1cl1c1t"\nnmi = "off"\n'},
        "guest",
        "NMI mode 'off'",
    ),
    "no agent": ({"agent": ""}, "agent", "must be a table"),
    "no flavour": ({"agent": "[agent]\nperiod = 200000\n"}, "agent.flavour", "missing"),
    "unknown flavour": ({"agent": '[agent]\nflavour = "x"\n'}, "agent.flavour", "known: dt"),
    "event an int": ({"agent": AGENT + "event = 3\n"}, "agent.event", "non-empty string"),
    "period too small": (
        {"agent": AGENT.replace("200000", "5")},
        "agent.period",
        "period=5 is outside",
    ),
    "bad drain": ({"agent": AGENT.replace('"manual"', '"never"')}, "agent.drain", "not one of"),
    "pmu_produce an int": (
        {"agent": AGENT.replace("false", "0")},
        "agent.pmu_produce",
        "true or false",
    ),
    "unknown quirk": (
        {"agent": AGENT.replace("TP-D1", "DT-D1")},
        "agent.quirks[0]",
        "no quirk 'DT-D1'",
    ),
    "quirk mask of dt bits": (
        {"agent": AGENT.replace('["TP-D1"]', "65536")},
        "agent.quirks",
        "does not have",
    ),
    "max rate without throttling": (
        {"agent": AGENT + "max_sample_rate = 100\n"},
        "agent.max_sample_rate",
        'only with throttling = "on"',
    ),
    "bad throttling": ({"agent": AGENT + "throttling = false\n"}, "agent.throttling", "off, on"),
    "steps not tables": ({"top": TOP + "steps = 3\n", "steps": ""}, "steps", "array of tables"),
    "too many steps": ({"steps": step("wait") * 201}, "steps", "has 201 entries"),
    "step without op": ({"steps": "[[steps]]\ncpu = 1\n"}, "steps[0].op", "it is missing"),
    "unknown op": ({"steps": step("sleep", ms=1)}, "steps[0].op", "one of inject, kick"),
    "cpu out of range": (
        {"steps": step("wait") + step("inject", cpu=4, count=1)},
        "steps[1].cpu",
        "CPU 4 does not exist in a 4-CPU topology (0..3)",
    ),
    "cpu negative": ({"steps": step("spin", cpu=-1, ms=1)}, "steps[0].cpu", "a CPU number"),
    "spin on all": ({"steps": step("spin", cpu="all", ms=1)}, "steps[0].cpu", "not 'all'"),
    "inject without count": ({"steps": step("inject", cpu=0)}, "steps[0].count", "missing"),
    "count 0": ({"steps": step("inject", cpu=0, count=0)}, "steps[0].count", "minimum 1"),
    "ms too long": ({"steps": step("idle", ms=600_001)}, "steps[0].ms", "maximum 600000"),
    "probe too long": ({"steps": step("probe", cpu=0, ms=5001)}, "steps[0].ms", "maximum 5000"),
    "offline cpu 0": ({"steps": step("offline", cpu=0)}, "steps[0].cpu", "CPU 0 cannot go"),
    "reader on a string": (
        {"agent": DT_AGENT, "expect": DT_EXPECT, "steps": step("reader", on="yes")},
        "steps[0].on",
        "true or false",
    ),
    "dt-only op on tprof": (
        {"steps": step("skip", cpu=0, count=1)},
        "steps[0].op",
        "'skip' is an op of flavour dt, not of tprof",
    ),
    "kick on dt": (
        {"agent": DT_AGENT, "expect": DT_EXPECT, "steps": step("kick")},
        "steps[0].op",
        "dt has no drain",
    ),
    "inject-nmi on arm64": (
        {"steps": step("inject-nmi")},
        "steps[0].op",
        "QEMU 7.2's virt machine answers 'not currently supported'",
    ),
    "no expect": ({"expect": ""}, "expect", "it is missing"),
    "empty expect": ({"top": TOP + "expect = []\n", "expect": ""}, "expect", "has 0 entries"),
    "unknown oracle": (
        {"expect": '[[expect]]\noracle = "TP-O9"\n'},
        "expect[0].oracle",
        "no oracle 'TP-O9' for flavour tprof; "
        "known: IRQ, CALLS, RELEASED, PEER, PROFILE, THROTTLE, C-2, C-3, TP-O1",
    ),
    "unknown run": (
        {"top": TOP + 'run = "counting"\n', "steps": ""},
        "run",
        "no run 'counting' for flavour tprof; known: standard, exact",
    ),
    "run and steps": ({"top": TOP + 'run = "exact"\n'}, "run", "not both"),
    "run not a string": ({"top": TOP + "run = 1\n", "steps": ""}, "run", "non-empty string"),
    "dt oracle on tprof": (
        {"expect": DT_EXPECT},
        "expect[0].oracle",
        "for flavour tprof",
    ),
    "oracle with a relation": (
        {"expect": '[[expect]]\noracle = "TP-O1"\nequals = 1\n'},
        "expect[0].equals",
        "takes no relation",
    ),
    "oracle and value": (
        {"expect": '[[expect]]\noracle = "TP-O1"\nvalue = "samples"\n'},
        "expect[0]",
        "name one of oracle, value, console or error (found: oracle, value)",
    ),
    "fails on a value": (
        {"expect": value_expect("samples") + "fails = true\n"},
        "expect[0].fails",
        "only an oracle expectation takes fails",
    ),
    "fails not a bool": (
        {"expect": '[[expect]]\noracle = "TP-O1"\nfails = 1\n'},
        "expect[0].fails",
        "true or false",
    ),
    "console with a relation": (
        {"expect": '[[expect]]\nconsole = "WARNING"\nequals = 1\n'},
        "expect[0].equals",
        "a console expectation takes no relation",
    ),
    "empty error text": (
        {"expect": '[[expect]]\nerror = " "\n'},
        "expect[0].error",
        "must be a non-empty string",
    ),
    "two relations": (
        {"expect": value_expect("samples") + "at_most = 3\n"},
        "expect[0]",
        "exactly one of equals, at_least, at_most (found: equals, at_most)",
    ),
    "no relation": (
        {"expect": '[[expect]]\nvalue = "samples"\n'},
        "expect[0]",
        "(found: none)",
    ),
    "relation not an int": (
        {"expect": value_expect("samples").replace("1", "1.5")},
        "expect[0].equals",
        "must be an integer",
    ),
    "unknown value name": (
        {"expect": EXPECT + value_expect("stats.samples")},
        "expect[2].value",
        "unknown value 'stats.samples' for flavour tprof; close names: stats.sample",
    ),
    "dt value on tprof": (
        {"expect": value_expect("stats.readevt")},
        "expect[0].value",
        "the forms: samples, samples.cpu.<cpu>",
    ),
    "per-cpu typo": (
        {"expect": value_expect("percpu.1.x_smple")},
        "expect[0].value",
        "close names: percpu.1.x_sample",
    ),
    "value cpu out of range": (
        {"expect": value_expect("core.4.x_nmi_total")},
        "expect[0].value",
        "CPU 4 does not exist in a 4-CPU topology",
    ),
    "value cpu not a number": (
        {"expect": value_expect("samples.cpu.one")},
        "expect[0].value",
        "unknown value",
    ),
}


@pytest.mark.parametrize(("parts", "key", "reason"), ERRORS.values(), ids=ERRORS.keys())
def test_error_names_file_key_and_reason(
    tmp_path: Path, parts: dict[str, str], key: str, reason: str
) -> None:
    path = write(tmp_path, **parts)
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    message = str(info.value)
    assert message.startswith(f"{path}: key '{key}': "), message
    assert reason in message, message


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text("name = \n")
    with pytest.raises(ConfigError, match=r"s\.toml: not valid TOML"):
        load_scenario(path)
    with pytest.raises(ConfigError, match=r"gone\.toml: cannot read the scenario file"):
        load_scenario(tmp_path / "gone.toml")
