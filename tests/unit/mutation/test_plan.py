"""The default group's flavours shared out among guests at once (`harness.lanes`)."""

from __future__ import annotations

from harness.agent import flavours
from harness.mutation.plan import Plan, flavour_plan, per_oracle, shares


def _plans() -> dict[str, Plan]:
    chosen = flavours.names()
    only = per_oracle(chosen)
    return {name: flavour_plan(name, full=False, only=only[name]) for name in chosen if only[name]}


def test_every_flavour_runs_in_exactly_one_lane_in_plan_order() -> None:
    plans = _plans()
    lanes = shares(plans, 2)
    assert len(lanes) == 2
    assert all(lanes)
    ran = [name for share in lanes for name in share]
    assert sorted(ran) == sorted(plans)
    order = list(plans)
    assert all(list(share) == sorted(share, key=order.index) for share in lanes)


def test_one_lane_runs_them_all_and_no_lane_is_empty() -> None:
    plans = _plans()
    assert shares(plans, 1) == [tuple(plans)]
    one = {name: plans[name] for name in list(plans)[:1]}
    assert shares(one, 2) == [tuple(one)]
