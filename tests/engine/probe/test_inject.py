"""Planted bugs and what-if multipliers as tap modifiers, on a stand-in of a loaded model (no
torch, no transformers): every factor by hand from the bug's definition, every refusal's words."""

from __future__ import annotations

import contextlib
import math
from types import SimpleNamespace

import pytest

from engine.errors import ConfigError
from engine.probe.inject import (
    BUG_KINDS,
    bug_modifier,
    bug_modifiers,
    bug_scaling,
    check_layers,
    injected,
    multiplied,
    multiplier_modifiers,
    site_scale,
)
from engine.probe.tap import Modifier


class FakeTap:
    def __init__(self) -> None:
        self.seen: list = []

    @contextlib.contextmanager
    def active(self, modifiers=None):
        self.seen.append(("enter", modifiers))
        yield self
        self.seen.append(("exit", None))


def _loaded(n: int = 3, d_k: int = 16, heads: int = 4, d_model: int = 64, code_scale=None,
            declared=None, softcap=None):
    """Sites of d_k 16, 4 heads, d_model 64 (d_model / heads = 16 = d_k unless changed)."""
    return SimpleNamespace(
        n_sites=n, code_scale=code_scale,
        declared=declared or [(d_k**-0.5, "1/sqrt(head_dim)")] * n,
        site_d_k=[d_k] * n, site_heads=[heads] * n, site_softcap=softcap or [None] * n,
        info=SimpleNamespace(d_model=d_model), tap=FakeTap())


def _config_error(fn, *args) -> tuple[str, str]:
    with pytest.raises(ConfigError) as info:
        fn(*args)
    return info.value.field, info.value.message


def test_check_layers_holds_both_ends_and_names_the_field() -> None:
    loaded = _loaded(n=3)
    check_layers(loaded, {0: "none", 2: "twice", "1": "dmodel"}, "inject")
    check_layers(loaded, None, "inject")
    assert _config_error(check_layers, loaded, {3: "none"}, "inject") == (
        "inject", "layer 3 is out of range; this model has layers 0..2")
    assert _config_error(check_layers, loaded, {-1: "none"}, "bugs") == (
        "bugs", "layer -1 is out of range; this model has layers 0..2")
    assert _config_error(check_layers, loaded, {1: "thrice"}, "inject") == (
        "inject", "unknown bug kind 'thrice'; one of twice, none, dmodel, after_softmax, "
                  "head_dim, softcap_off")


def test_bug_scaling_by_hand_with_a_correct_factor_that_is_not_one_over_sqrt_dk() -> None:
    """s0 = 0.3 (a model's own factor): each kind's definition against s0, d_k 16, d_model 64."""
    s0, d_k, d_model = 0.3, 16, 64
    assert bug_scaling("twice", s0, d_k, d_model) == pytest.approx(0.3 / 4, rel=1e-15)
    assert bug_scaling("dmodel", s0, d_k, d_model) == pytest.approx(0.3 * 4 / 8, rel=1e-15)
    assert bug_scaling("none", s0, d_k, d_model) == 1.0
    assert bug_scaling("after_softmax", s0, d_k, d_model) == 1.0
    assert bug_scaling("softcap_off", s0, d_k, d_model) == 0.3
    # head_dim 16 where d_model / heads = 64 / 2 = 32 and the model uses 1/sqrt(16)... 0.3 here
    assert bug_scaling("head_dim", s0, d_k, d_model, 2) == pytest.approx(0.3 * 4 / math.sqrt(32),
                                                                         rel=1e-15)
    assert _config_error(bug_scaling, "thrice", s0, d_k, d_model) == (
        "inject", "unknown bug kind 'thrice'; one of twice, none, dmodel, after_softmax, "
                  "head_dim, softcap_off")
    for heads in (None, 0):
        assert _config_error(bug_scaling, "head_dim", s0, d_k, d_model, heads) == (
            "inject", "head_dim needs the number of heads")


def test_head_dim_of_a_model_that_scales_by_d_model_over_heads_takes_head_dim() -> None:
    """Gemma 2 27B: 1/sqrt(d_model / heads) = 1/sqrt(144) where head_dim is 128."""
    assert bug_scaling("head_dim", 1 / 12, 128, 4608, 32) == pytest.approx(128**-0.5, rel=1e-15)
    # within 1e-6 of 1/sqrt(width) counts as it; 2e-6 off does not (the other formula)
    assert bug_scaling("head_dim", (1 + 9e-7) / 12, 128, 4608, 32) == 128**-0.5
    off = (1 + 2e-6) / 12
    assert bug_scaling("head_dim", off, 128, 4608, 32) == pytest.approx(
        off * math.sqrt(128) / 12, rel=1e-15)
    off = (1 - 2e-6) / 12
    assert bug_scaling("head_dim", off, 128, 4608, 32) == pytest.approx(
        off * math.sqrt(128) / 12, rel=1e-15)


def test_site_scale_reads_the_surveyed_factor_else_the_declared_one() -> None:
    assert site_scale(_loaded(code_scale=[0.5, 0.25, 2]), 2) == 2.0
    assert type(site_scale(_loaded(code_scale=[0.5, 0.25, 2]), 2)) is float
    declared = [(0.1, "a"), (0.2, "b"), (0.3, "c")]
    assert site_scale(_loaded(declared=declared), 1) == 0.2
    assert site_scale(_loaded(code_scale=[], declared=declared), 2) == 0.3
    # a stand-in without the survey's attribute at all (not every loaded model has one)
    assert site_scale(SimpleNamespace(declared=declared), 0) == 0.1


def test_each_bug_modifier_by_hand() -> None:
    loaded = _loaded(n=2, d_k=16, heads=2, d_model=64, code_scale=[0.25, 0.5])  # width 32
    assert bug_modifier(loaded, 0, "twice") == Modifier(q_factor=pytest.approx(0.25),
                                                        w_factor=1.0)
    m = bug_modifier(loaded, 1, "dmodel")
    assert (m.q_factor, m.w_factor, m.softcap_off) == (pytest.approx(0.5), 1.0, False)
    m = bug_modifier(loaded, 1, "none")  # the factor on q.k becomes 1: q times 1 / 0.5
    assert (m.q_factor, m.w_factor) == (pytest.approx(2.0), 1.0)
    m = bug_modifier(loaded, 0, "after_softmax")  # 1 before, 1/sqrt(16) after the softmax
    assert (m.q_factor, m.w_factor) == (pytest.approx(4.0), 0.25)
    m = bug_modifier(loaded, 0, "head_dim")  # 0.25 * 4 / sqrt(32) over 0.25
    assert m.q_factor == pytest.approx(4 / math.sqrt(32)) and m.w_factor == 1.0


def test_softcap_off_needs_a_cap_and_touches_no_factor() -> None:
    loaded = _loaded(n=2, softcap=[None, 50.0])
    assert bug_modifier(loaded, 1, "softcap_off") == Modifier(1.0, 1.0, True)
    assert _config_error(bug_modifier, loaded, 0, "softcap_off") == (
        "inject", "layer 0 has no soft-cap to leave out")


def test_a_bug_that_changes_nothing_is_refused_with_why() -> None:
    loaded = _loaded(n=2, d_k=16, heads=4, d_model=64)  # 64 / 4 = 16 = d_k
    assert _config_error(bug_modifier, loaded, 1, "head_dim") == (
        "inject", "layer 1: head_dim 16 equals d_model / heads (64/4); this bug changes "
                  "nothing here")
    square = _loaded(n=1, d_k=16, heads=1, d_model=16)
    assert _config_error(bug_modifier, square, 0, "dmodel") == (
        "inject", "layer 0: d_model equals d_k; dmodel changes nothing")
    unscaled = _loaded(n=2, declared=[(1.0, "none"), (1.0, "no scale")], code_scale=None)
    assert _config_error(bug_modifier, unscaled, 1, "none") == (
        "inject", "layer 1 already applies no scale (declared no scale); 'none' changes "
                  "nothing here")
    # a factor 1 + 1e-9 is a scale: 'none' is allowed there, and removes it
    almost = _loaded(n=1, code_scale=[1 + 1e-9])
    assert bug_modifier(almost, 0, "none").q_factor == pytest.approx(1 / (1 + 1e-9), rel=1e-15)
    # head_dim of a model whose width differs by far less than one is still refused, by more not
    close = _loaded(n=1, d_k=16, heads=3, d_model=48)
    with pytest.raises(ConfigError, match="equals d_model / heads"):
        bug_modifier(close, 0, "head_dim")
    apart = _loaded(n=1, d_k=16, heads=3, d_model=49)
    assert bug_modifier(apart, 0, "head_dim").q_factor == pytest.approx(4 / math.sqrt(49 / 3))


def test_bug_modifiers_checks_the_layers_and_keys_them_as_integers() -> None:
    loaded = _loaded(n=3, code_scale=[0.25, 0.25, 0.25])
    mods = bug_modifiers(loaded, {"2": "twice", 0: "none"})
    assert set(mods) == {0, 2} and all(type(k) is int for k in mods)
    assert mods[2].q_factor == pytest.approx(0.25) and mods[0].q_factor == pytest.approx(4.0)
    assert _config_error(bug_modifiers, loaded, {3: "twice"}) == (
        "inject", "layer 3 is out of range; this model has layers 0..2")


def test_injected_plants_the_modifiers_and_yields_the_factor_now_applied() -> None:
    loaded = _loaded(n=3, code_scale=[0.25, 0.25, 0.5])
    with injected(loaded, {0: "twice", 1: "after_softmax", 2: "none"}) as applied:
        assert loaded.tap.seen[0][0] == "enter"
        assert loaded.tap.seen[0][1] == bug_modifiers(loaded, {0: "twice", 1: "after_softmax",
                                                               2: "none"})
        assert len(loaded.tap.seen) == 1
    assert applied == {0: pytest.approx(0.0625), 1: 0.25, 2: pytest.approx(1.0)}
    assert loaded.tap.seen[-1] == ("exit", None)


def test_multiplier_modifiers_of_every_site_or_one() -> None:
    loaded = _loaded(n=3)
    assert multiplier_modifiers(loaded, 2.5) == {i: Modifier(q_factor=2.5) for i in range(3)}
    assert multiplier_modifiers(loaded, 0.5, 2) == {2: Modifier(q_factor=0.5)}
    assert multiplier_modifiers(loaded, 0.5, 0) == {0: Modifier(q_factor=0.5)}
    for layer in (3, -1):
        assert _config_error(multiplier_modifiers, loaded, 2.0, layer) == (
            "whatif_layer", f"layer {layer} is out of range; this model has layers 0..2")


def test_multiplied_runs_the_block_under_the_multipliers() -> None:
    loaded = _loaded(n=2)
    with multiplied(loaded, 3.0, 1) as value:
        assert value is None
        assert loaded.tap.seen == [("enter", {1: Modifier(q_factor=3.0)})]
    assert loaded.tap.seen[-1] == ("exit", None)
    with multiplied(loaded, 0.5):
        assert loaded.tap.seen[-1] == ("enter", {0: Modifier(0.5), 1: Modifier(0.5)})


def test_every_kind_has_a_help_text() -> None:
    assert list(BUG_KINDS) == ["twice", "none", "dmodel", "after_softmax", "head_dim",
                               "softcap_off"]
    assert all(isinstance(v, str) and v for v in BUG_KINDS.values())
