"""Every field of TrainingConfig at both edges of its range: the edge value is taken (and
normalized: an integer field holds an int, a float field a float), one step outside is refused
naming the field with the allowed range; the cross-field refusals at their edges with their
whole messages; the memory guards at exactly their limits (the sizes counted by hand); the
schedule and the evaluation steps. Configs only: no torch, about 0.3 s."""

from __future__ import annotations

import numpy as np
import pytest

import engine.training.config as config_module
from engine.errors import ConfigError
from engine.training.config import TrainingConfig


def _refused(**changes) -> ConfigError:
    with pytest.raises(ConfigError) as exc:
        TrainingConfig(**changes)
    return exc.value


#: field, lo, hi, a base that makes both edges valid otherwise (the memory guards)
INT_FIELDS = [
    ("items_min", 1, 1024, {"items_max": 1024, "batch": 1, "probe_size": 1}),
    ("items_max", 1, 1024, {"items_min": 1, "batch": 1, "probe_size": 1}),
    ("key_dim", 1, 4096, {}),
    ("classes", 2, 4096, {}),
    ("pairs", 1, 256, {}),
    ("d_model", 1, 4096, {"scalings": ("sqrt",)}),
    ("heads", 1, 64, {}),
    ("d_k", 0, 4096, {}),
    ("layers", 1, 4, {}),
    ("base_width", 0, 4096, {}),
    ("batch", 1, 65_536, {"d_model": 1, "items_min": 1, "items_max": 1}),
    ("steps", 1, 1_000_000, {"log_every": 1_000_000}),
    ("seed", 0, 2**63 - 1, {}),
    ("warmup", 0, 1_000_000, {}),
    ("log_every", 1, 1_000_000, {}),
    ("probe_size", 1, 4096, {}),
    ("hist_bins", 2, 2000, {}),
    ("collapse_logs", 1, 10_000, {}),
    ("eval_size", 1, 65_536, {}),
    ("eval_every", 1, 1_000_000, {}),
]


@pytest.mark.parametrize(("field", "lo", "hi", "base"), INT_FIELDS, ids=[f[0] for f in INT_FIELDS])
def test_an_integer_field_takes_both_edges_and_refuses_one_step_outside(field, lo, hi, base):
    for edge in (lo, hi):
        value = getattr(TrainingConfig(**base, **{field: np.int64(edge)}), field)
        assert value == edge and type(value) is int, (field, edge, value)
    if hi < 2**53:  # a float that is a whole number is taken as that integer
        value = getattr(TrainingConfig(**base, **{field: float(hi)}), field)
        assert value == hi and type(value) is int
    for outside in (lo - 1, hi + 1):
        err = _refused(**base, **{field: outside})
        assert err.field == field
        assert err.message == f"must be from {lo:,} to {hi:,}, got {outside:,}", err.message


#: field, lo, hi, lo open, hi open, the range as the message writes it
FLOAT_FIELDS = [
    ("noise", 0.0, 10.0, False, False, "[0, 10]"),
    ("qk_init", 0.0, 100.0, True, False, "(0, 100]"),
    ("temperature", 1e-6, 1e6, False, False, "[1e-06, 1e+06]"),
    ("cosine_temperature", 1e-6, 1e6, False, False, "[1e-06, 1e+06]"),
    ("softcap", 0.0, 1e6, True, False, "(0, 1e+06]"),
    ("qk_clip_tau", 0.0, 1e6, True, False, "(0, 1e+06]"),
    ("attn_mult", 0.0, 1e6, False, False, "[0, 1e+06]"),
    ("lr", 0.0, 100.0, True, False, "(0, 100]"),
    ("lr_floor", 0.0, 1.0, False, False, "[0, 1]"),
    ("weight_decay", 0.0, 10.0, False, False, "[0, 10]"),
    ("grad_clip", 0.0, 1e6, False, False, "[0, 1e+06]"),
    ("hist_range", 0.0, 1e6, True, False, "(0, 1e+06]"),
    ("saturation_threshold", 0.0, 1.0, True, True, "(0, 1)"),
    ("collapse_threshold", 0.0, 1.0, False, False, "[0, 1]"),
]


@pytest.mark.parametrize(("field", "lo", "hi", "lo_open", "hi_open", "allowed"), FLOAT_FIELDS,
                         ids=[f[0] for f in FLOAT_FIELDS])
def test_a_float_field_takes_its_closed_edges_and_refuses_outside(field, lo, hi, lo_open,
                                                                  hi_open, allowed):
    # inside, half a unit from an open end (a lower end moved from 0 to 1 refuses it), as a
    # NumPy float64 (a subclass of float): the field holds a Python float itself
    inside = [lo + 0.5 if lo_open else lo, hi - 0.5 if hi_open else hi]
    for v in inside:
        value = getattr(TrainingConfig(**{field: np.float64(v)}), field)
        assert value == v and type(value) is float, (field, v, value)
    outside = [lo / 2 if lo > 0 else lo - 0.5, hi + 0.5]  # (an end moved by 1 takes hi + 0.5)
    outside += [lo] if lo_open else []
    outside += [hi] if hi_open else []
    for v in outside:
        err = _refused(**{field: v})
        assert err.field == field
        assert err.message == f"must be in {allowed}, got {v:g}", err.message


@pytest.mark.parametrize(("field", "good", "bad", "choices"), [
    ("task", ("retrieval", "recall"), "copy", "retrieval, recall"),
    ("positions", ("learned", "sinusoidal", "none"), "rope", "learned, sinusoidal, none"),
    ("param", ("sp", "mup"), "ntk", "sp, mup"),
    ("width_axis", ("d_model", "d_k"), "heads", "d_model, d_k"),
    ("optimizer", ("adam", "sgd"), "lbfgs", "adam, sgd"),
    ("device", ("auto", "cpu", "cuda"), "tpu", "auto, cpu, cuda"),
    ("decay", ("none", "cosine"), "linear", "none, cosine"),
])
def test_a_choice_field_takes_each_choice_and_names_them_when_refusing(field, good, bad, choices):
    for value in good:
        assert getattr(TrainingConfig(**{field: value}), field) == value
    err = _refused(**{field: bad})
    assert err.field == field and err.message == f"must be one of {choices}; got '{bad}'"


def test_scalings_and_eval_lengths_given_as_lists_are_held_as_tuples_of_ints():
    cfg = TrainingConfig(scalings=["dk", "sqrt"], eval_lengths=[64.0, np.int64(16)])
    assert cfg.scalings == ("dk", "sqrt") and type(cfg.scalings) is tuple
    assert cfg.eval_lengths == (64, 16) and type(cfg.eval_lengths) is tuple
    assert [type(n) for n in cfg.eval_lengths] == [int, int]


@pytest.mark.parametrize("name", ["mlp", "layernorm"])
def test_the_switches_take_booleans_only(name):
    for value in (True, False):
        assert getattr(TrainingConfig(**{name: value}), name) is value
    err = _refused(**{name: 1})
    assert err.field == name and err.message == "must be true or false, got 1"


def test_items_max_equal_to_items_min_is_taken_one_below_is_refused():
    assert TrainingConfig(items_min=7, items_max=7).items_max == 7
    err = _refused(items_min=7, items_max=6)
    assert err.field == "items_max" and err.message == "must be >= items_min (7), got 6"


def test_recall_pairs_up_to_classes_retrieval_ignores_pairs():
    assert TrainingConfig(task="recall", pairs=16, classes=16).pairs == 16
    err = _refused(task="recall", pairs=17, classes=16)
    assert err.field == "pairs"
    assert err.message == "must be <= classes (16) so keys are distinct, got 17"
    assert TrainingConfig(task="retrieval", pairs=17, classes=16).pairs == 17


def test_heads_must_divide_d_model_only_when_d_k_follows_it():
    err = _refused(d_model=10, heads=3)
    assert err.field == "heads"
    assert err.message == "must divide d_model (10) when d_k is 0 (= d_model / heads), got 3"
    assert TrainingConfig(d_model=10, heads=3, d_k=4).head_dim == 4


def test_mup_base_width_a_multiple_of_heads_only_where_d_k_follows_d_model():
    mup = {"param": "mup", "d_model": 64, "heads": 4}
    for bad in (1, 6):
        err = _refused(**mup, base_width=bad)
        assert err.field == "base_width"
        assert err.message == f"must be a multiple of heads (4) when d_k is d_model / heads, got {bad}"
    assert TrainingConfig(**mup, base_width=8).base_width == 8
    assert TrainingConfig(**mup, base_width=0).base_width == 0  # (this model's own width)
    # under sp the base width is ignored; on the d_k axis, or with d_k given, it is a d_k
    assert TrainingConfig(**{**mup, "param": "sp"}, base_width=6).base_width == 6
    assert TrainingConfig(**mup, width_axis="d_k", base_width=6).base_width == 6
    assert TrainingConfig(**mup, d_k=16, base_width=6).base_width == 6


def test_eval_lengths_edges_and_refusals():
    err = _refused(eval_lengths=(8, 0))
    assert err.field == "eval_lengths" and err.message == "must be from 1 to 4,096, got 0"
    err = _refused(eval_lengths=(4097,))
    assert err.field == "eval_lengths" and err.message == "must be from 1 to 4,096, got 4,097"
    assert TrainingConfig(eval_lengths=(1, 4096)).eval_lengths == (1, 4096)
    err = _refused(eval_lengths=(8, 16, 8))
    assert err.field == "eval_lengths" and err.message == "lists a length twice"
    # retrieval: any length up to the limit, whatever the classes
    assert TrainingConfig(classes=16, pairs=8, eval_lengths=(4096,)).eval_lengths == (4096,)
    # recall: the longest (not the first nor the last) at most classes, and at most pairs with
    # learned positions
    recall = {"task": "recall", "classes": 16, "pairs": 8}
    assert TrainingConfig(**recall, positions="none", eval_lengths=(4, 16, 2)).eval_lengths \
        == (4, 16, 2)
    err = _refused(**recall, positions="sinusoidal", eval_lengths=(4, 17, 2))
    assert err.field == "eval_lengths"
    assert err.message == "recall: pairs must be <= classes (16) so keys are distinct, got 17"
    assert TrainingConfig(**recall, eval_lengths=(4, 8, 2)).eval_lengths == (4, 8, 2)
    err = _refused(**recall, eval_lengths=(4, 9, 2))
    assert err.field == "positions"
    assert err.message == ("learned positions exist only for the trained 17 tokens (8 pairs), "
                           "so eval_lengths up to 9 pairs cannot be evaluated: choose positions "
                           "sinusoidal or none")


# A small model whose sizes are counted by hand: retrieval, d_model 8, 4 heads of d_k 2 (8 wide
# inside), 2 layers, key_dim 4, classes 4, LayerNorm, no MLP, 2 rules, items_max 5 (6 tokens),
# batch 8, probe 4, steps 8 logged every 4 (logs 0, 4, 8), 20 bins.
SMALL = {"d_model": 8, "heads": 4, "layers": 2, "key_dim": 4, "classes": 4, "items_max": 5,
         "scalings": ("sqrt", "dk"), "batch": 8, "probe_size": 4, "steps": 8, "log_every": 4,
         "hist_bins": 20}
# parameters: embedding (4 + 4 + 1) * 8 + 8 = 80; per layer W_Q, W_K, W_V, W_O 4 * 8 * 8 = 256
# and ln1 16, twice: 544; final LayerNorm 16; readout 8 * 4 + 4 = 36: 676 per rule, 1,352 in all
PARAMS = 1352
# activations: batch 8 x layers 2 x (3 heads-maps 3 * 4 * 6 * 6 = 432 + 6 tokens x (4 * 8 + 4 * 8)
# = 384) = 13,056
ACTIVATIONS = 13_056
# probe logits: 4 examples x 2 layers x 4 heads x 36 = 1,152; histogram cells: 3 logs x 2 rules
# x 2 layers x 4 heads x 20 bins = 960
PROBE = 1152
CELLS = 960


@pytest.mark.parametrize(("limit", "size", "field", "message"), [
    ("PARAMS_MAX", PARAMS, "d_model",
     "2 rule(s) x 676 parameters = 1,352, more than 1,351 (memory): use a smaller d_model or "
     "d_k, fewer heads or layers, or fewer rules"),
    ("ACTIVATIONS_MAX", ACTIVATIONS, "batch",
     "one forward pass holds ~13,056 activations, more than 13,055 (memory): use a smaller "
     "batch, shorter sequences (items_max, pairs) or a smaller model"),
    ("PROBE_LOGITS_MAX", PROBE, "probe_size",
     "probe_size x layers x heads x tokens^2 = 1,152 logits, more than 1,151 (memory): use a "
     "smaller probe batch"),
    ("HISTORY_CELLS_MAX", CELLS, "hist_bins",
     "logs x rules x layers x heads x bins = 960 histogram cells, more than 959: use fewer "
     "bins, fewer heads or a larger log_every"),
])
def test_each_memory_guard_takes_its_limit_and_refuses_one_more(monkeypatch, limit, size, field,
                                                                 message):
    assert TrainingConfig(**SMALL).n_params == 676
    monkeypatch.setattr(config_module, limit, size)
    TrainingConfig(**SMALL)  # exactly at the limit: taken
    monkeypatch.setattr(config_module, limit, size - 1)
    err = _refused(**SMALL)
    assert err.field == field and err.message == message


def test_cosine_decay_ends_at_the_floor_and_stays_there():
    # one update after the warmup: the span is 1, so update 11 is at the end (cos pi = -1)
    short = TrainingConfig(steps=11, warmup=10, decay="cosine", lr_floor=0.0)
    assert short.lr_factor(10) == 1.0 and short.lr_factor(11) == pytest.approx(0.0, abs=1e-15)
    cfg = TrainingConfig(steps=110, warmup=10, decay="cosine", lr_floor=0.1)
    assert cfg.lr_factor(160) == pytest.approx(0.1)  # past the end: the floor, not the rise
    assert cfg.lr_factor(35) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi / 4)))


def test_the_evaluation_lengths_are_measured_at_every_kth_log_and_the_last_step():
    cfg = TrainingConfig(eval_lengths=(8,), steps=25, log_every=5, eval_every=2)
    assert [s for s in range(0, 26) if cfg.evaluates_lengths_at(s)] == [0, 10, 20, 25]
    every = cfg.replace(eval_every=1)
    assert [s for s in range(0, 26) if every.evaluates_lengths_at(s)] == [0, 5, 10, 15, 20, 25]
    assert not any(cfg.replace(eval_lengths=()).evaluates_lengths_at(s) for s in range(26))
