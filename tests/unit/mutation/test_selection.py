"""A campaign's names are looked up once, before anything is built (`resolve_selection`)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from harness.agent import flavours
from harness.errors import ConfigError
from harness.mutation import campaign
from harness.mutation.plan import MutationRequest, per_oracle, resolve_selection


def test_the_request_s_names_come_back_looked_up() -> None:
    chosen = resolve_selection(MutationRequest(flavours=("tprof",), only=("slow_producer",)))
    assert chosen.flavours == ("tprof",)
    assert chosen.only_for("tprof") == ("slow_producer",)
    assert [m.name for m in chosen.named] == ["slow_producer"]


def test_no_names_is_every_flavour_with_every_mutant() -> None:
    chosen = resolve_selection(MutationRequest())
    assert chosen.flavours == flavours.names()
    assert chosen.named == ()
    assert all(chosen.only_for(name) == () for name in chosen.flavours)


def test_per_oracle_keeps_the_flavours_with_a_pick() -> None:
    picks = per_oracle(flavours.names())
    chosen = resolve_selection(MutationRequest(per_oracle=True))
    assert chosen.by_flavour() == {name: found for name, found in picks.items() if found}


@pytest.mark.parametrize(
    ("request_", "says"),
    [(MutationRequest(only=("no_such_mutant",)), "unknown mutant 'no_such_mutant'"),
     (MutationRequest(flavours=("nope",)), "nope")],
)  # fmt: skip
def test_an_unknown_name_fails_before_the_host_is_touched(
    monkeypatch: pytest.MonkeyPatch, request_: MutationRequest, says: str
) -> None:
    def touched(*args: object, **kwargs: object) -> None:
        raise AssertionError("the host was prepared before the names were checked")

    monkeypatch.setattr(campaign, "ensure_host", touched)
    monkeypatch.setattr(campaign, "prepare_images", touched)
    with pytest.raises(ConfigError, match=says):
        campaign.run_mutants(request_, cast(Any, None))
    with pytest.raises(ConfigError, match=says):
        campaign.build_default_group(request_, cast(Any, None))
