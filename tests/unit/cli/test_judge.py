"""`invoke judge`'s card: each check's rerun command, its time estimate, the card."""

from __future__ import annotations

import shlex

from harness.cli.judge import CHECKS, Row, estimate, pairs_met, render_card, rerun_command

SANITIZER_TEST = "tests.guest.test_sanitizers::test_x[myport]"


def test_each_check_reruns_as_the_invoke_command_it_is() -> None:
    commands = {c.name: rerun_command(c, "myport", ("/tmp/my port",)) for c in CHECKS}
    assert shlex.split(commands["tier"]) == ["invoke", "test", "--cpus=2", "--flavour=myport",
                                             "--flavour-path=/tmp/my port"]  # fmt: skip
    debug = shlex.split(commands["debug"])
    assert {"--variant=debug", "--memory=512", "-k", "test_sanitizers or test_stress"} <= set(debug)
    assert "--variant=kcsan" in shlex.split(commands["kcsan"])
    assert shlex.split(commands["mutants"])[:3] == ["invoke", "mutants", "--flavour=myport"]


def test_the_estimate_sums_the_checks_and_names_the_kernel_builds() -> None:
    minutes = sum(c.estimate_s for c in CHECKS) // 60
    assert estimate(CHECKS).startswith(f"about {minutes} min for {len(CHECKS)} checks")
    assert "each kernel variant not yet built adds" in estimate(CHECKS)


def test_the_card_names_each_failed_test_under_its_check() -> None:
    rows = [Row(CHECKS[0], True, "12 passed, 0 failed, 1 skipped", (), 200.0, "invoke test"),
            Row(CHECKS[2], False, "3 passed, 1 failed, 0 skipped",
                (SANITIZER_TEST,), 90.0, "invoke test -k s")]  # fmt: skip
    card = render_card("myport", rows).splitlines()
    assert card[0] == "report card: myport"
    assert card[1].split()[:3] == ["tier", "ok", "200"]
    assert card[2].split()[:2] == ["debug", "FAILED"]
    assert card[3].split() == ["failed:", SANITIZER_TEST]
    assert card[-1].split() == ["debug", "invoke", "test", "-k", "s"]


def test_the_kcsan_check_counts_the_pairs_met_and_names_each_unmet_one() -> None:
    values = ['{"the core\'s producer-call count": true, "dt ring index": false}',
              '{"kprof\'s block hand-off": false}']  # fmt: skip
    assert pairs_met(values) == ("KCSAN pairs met 1 of 3 (UNJUDGED: dt ring index, "
                                 "kprof's block hand-off)")  # fmt: skip
    assert pairs_met(['{"a": true}']) == "KCSAN pairs met 1 of 1"
