"""The default group's flavours shared out among guests at once (`harness.lanes`)."""

from __future__ import annotations

from harness.agent import flavours
from harness.cli.mutantruns import _flavour_plan, _Plan, _shares, per_oracle


def _plans() -> dict[str, _Plan]:
    chosen = flavours.names()
    only = per_oracle(chosen)
    return {name: _flavour_plan(name, full=False, only=only[name]) for name in chosen if only[name]}


def test_every_flavour_runs_in_exactly_one_lane_in_plan_order() -> None:
    plans = _plans()
    shares = _shares(plans, 2)
    assert len(shares) == 2
    assert all(shares)
    ran = [name for share in shares for name in share]
    assert sorted(ran) == sorted(plans)
    order = list(plans)
    assert all(list(share) == sorted(share, key=order.index) for share in shares)


def test_one_lane_runs_them_all_and_no_lane_is_empty() -> None:
    plans = _plans()
    assert _shares(plans, 1) == [tuple(plans)]
    one = {name: plans[name] for name in list(plans)[:1]}
    assert _shares(one, 2) == [tuple(one)]
