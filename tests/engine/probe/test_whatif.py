"""engine.probe.whatif: the per-site statistics, cosines and perplexity against hand
computations, the result's rows and columns, and the sweep on tiny GPT-2 / BERT models against
the models' own attention weights and log-likelihoods (transformers' output, not the tap's)."""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from types import SimpleNamespace as NS

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.errors import Cancelled, ConfigError  # noqa: E402
from engine.probe.whatif import (  # noqa: E402
    DEFAULT_MULTIPLIERS,
    WhatIfResult,
    WhatIfSnapshot,
    _cosine,
    _perplexity,
    _site_stats,
    run_whatif,
    whatif,
)

IDS = [5, 17, 3, 42, 8, 29, 11, 60, 2, 33]


def test_default_multipliers_are_13_half_octaves_from_an_eighth_to_8() -> None:
    assert len(DEFAULT_MULTIPLIERS) == 13 and DEFAULT_MULTIPLIERS[6] == 1.0
    np.testing.assert_allclose(DEFAULT_MULTIPLIERS, [0.125 * math.sqrt(2) ** i for i in range(13)],
                               rtol=1e-15)


# -- one site's statistics -------------------------------------------------------------------------


def test_site_stats_by_hand() -> None:
    """Rows seeing 1 key are left out; H / ln(n_i) per row, the top weight strictly above the
    threshold saturates; per head."""
    w = torch.zeros(1, 2, 3, 3)
    w[0, 0, 0, 0] = 1.0
    w[0, 0, 1, :2] = torch.tensor([0.75, 0.25])
    w[0, 0, 2] = torch.tensor([0.5, 0.25, 0.25])
    w[0, 1, 0, 0] = 1.0
    w[0, 1, 1, :2] = torch.tensor([0.5, 0.5])
    w[0, 1, 2] = torch.tensor([1.0, 0.0, 0.0])
    mask = torch.tril(torch.ones(3, 3, dtype=torch.bool))[None, None]
    call = NS(weights=w, mask=mask)
    h1 = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)) / math.log(2)
    h2 = -(0.5 * math.log(0.5) + 0.5 * math.log(0.25)) / math.log(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 0 ln 0 is 0, without a warning
        ent, sat = _site_stats(call, 0.75)
    np.testing.assert_allclose(ent, [(h1 + h2) / 2, (1.0 + 0.0) / 2], rtol=1e-12)
    np.testing.assert_allclose(sat, [0.0, 0.5])  # 0.75 is not above 0.75; 1.0 is
    _, sat = _site_stats(call, 0.7499)
    np.testing.assert_allclose(sat, [0.5, 0.5])
    # an additive mask (0 / -inf) reads the same
    add = torch.zeros(1, 1, 3, 3).masked_fill(~mask, float("-inf"))
    ent2, _ = _site_stats(NS(weights=w, mask=add), 0.75)
    np.testing.assert_allclose(ent2, ent, rtol=1e-15)
    # no row with two keys: zeros of the heads' length
    one = NS(weights=w[:, :, :1, :1], mask=mask[..., :1, :1])
    ent, sat = _site_stats(one, 0.5)
    assert ent.tolist() == [0.0, 0.0] and sat.tolist() == [0.0, 0.0]


def test_site_stats_with_more_keys_than_queries() -> None:
    """Two new queries after one cached key (nq = 2, nk = 3): rows see 2 and 3 keys."""
    w = torch.zeros(1, 1, 2, 3)
    w[0, 0, 0, :2] = torch.tensor([0.5, 0.5])
    w[0, 0, 1] = torch.tensor([0.2, 0.2, 0.6], dtype=torch.float64)
    mask = torch.tensor([[True, True, False], [True, True, True]])[None, None]
    ent, sat = _site_stats(NS(weights=w, mask=mask), 0.55)
    h2 = -(0.4 * math.log(0.2) + 0.6 * math.log(0.6)) / math.log(3)
    np.testing.assert_allclose(ent, [(1.0 + h2) / 2], rtol=1e-6)  # (float32 weights)
    np.testing.assert_allclose(sat, [0.5])  # top weights 0.5 and 0.6


def test_cosine_by_hand() -> None:
    a = np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 0.0], [2.0, 2.0]])
    b = np.array([[4.0, 3.0], [-2.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    np.testing.assert_allclose(_cosine(a, b), [24 / 25, -1.0, 0.0, 1.0], rtol=1e-15)
    big = np.array([[1e-3, 1.0 + 1e-16]])
    assert _cosine(big, big)[0] <= 1.0
    # norms below 1 are norms too; a zero vector on either side gives 0
    small = np.array([[0.3, 0.4], [0.0, 0.0], [0.06, 0.08]])
    other = np.array([[0.0, 0.5], [0.6, 0.8], [0.0, 0.0]])
    np.testing.assert_allclose(_cosine(small, other), [0.8, 0.0, 0.0], rtol=1e-15)
    np.testing.assert_allclose(_cosine(other, small), [0.8, 0.0, 0.0], rtol=1e-15)
    # a vector with itself: the rounding of the sum over the norms' product goes either way
    # (above 1 for about a quarter of these rows): clipped to exactly 1 and -1
    x = np.random.default_rng(3).normal(size=(1000, 3))
    n2 = np.linalg.norm(x, axis=-1) ** 2
    assert ((x * x).sum(-1) / n2 > 1).any()  # the case the clip is for occurs here
    assert _cosine(x, x).max() == 1.0 and _cosine(x, -x).min() == -1.0


def test_perplexity_by_hand() -> None:
    emb = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    net = NS(get_input_embeddings=lambda: NS(weight=torch.tensor(emb)))
    h = np.array([[2.0, 0.0], [0.0, 1.0], [5.0, 5.0]])
    ids = [0, 2, 1]
    nll = []
    for pos, nxt in ((0, 2), (1, 1)):
        logits = emb @ h[pos]
        nll.append(math.log(np.exp(logits).sum()) - logits[nxt])
    assert _perplexity(net, h, ids) == pytest.approx(math.exp(np.mean(nll)), rel=1e-12)
    huge = np.array([[1e4, 0.0], [0.0, 0.0], [0.0, 0.0]])  # exp(1e4) overflows: the largest float
    with np.errstate(over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert _perplexity(net, huge, [0, 1, 1]) == np.finfo(np.float64).max
    # large logits the model predicts well: the shift by the largest keeps exp finite
    sure = np.array([[800.0, 0.0], [0.0, 900.0], [0.0, 0.0]])  # next tokens 0 then 2
    expected = math.exp((math.log(2.0) + math.log(2.0)) / 2)  # each next token ties with one other
    assert _perplexity(net, sure, [0, 0, 2]) == pytest.approx(expected, rel=1e-12)


# -- the result ------------------------------------------------------------------------------------


def _result(pooled, ppl, injected=None) -> WhatIfResult:
    ent = np.array([[[0.2, 0.4]], [[0.6, 1.0]]])  # (M=2, L=1, H=2)
    sat = np.array([[[0.0, 0.5]], [[1.0, 1.0]]])
    return WhatIfResult(np.array([0.5, 2.0]), None, ent, sat, np.array([0.9, 0.8]), pooled, ppl,
                        0.99, 0.1, injected=injected or {})


def test_rows_and_columns() -> None:
    r = _result(np.array([0.95, 0.85]), None)
    assert r.columns() == ["multiplier", "layer", "model", "entropy_norm_mean", "saturated_frac",
                           "output_cosine", "pooled_cosine"]
    assert r.rows() == [
        {"multiplier": 0.5, "layer": "all", "model": "intact model", "entropy_norm_mean":
         pytest.approx(0.3), "saturated_frac": 0.25, "output_cosine": 0.9, "pooled_cosine": 0.95},
        {"multiplier": 2.0, "layer": "all", "model": "intact model", "entropy_norm_mean":
         pytest.approx(0.8), "saturated_frac": 1.0, "output_cosine": 0.8, "pooled_cosine": 0.85}]
    c = _result(None, np.array([12.0, 30.0]), {2: "twice", 0: "none"})
    assert c.columns() == ["multiplier", "layer", "model", "entropy_norm_mean", "saturated_frac",
                           "output_cosine", "perplexity"]
    assert c.model_state == "model with injected bugs (layer 0 none, layer 2 twice)"
    assert [row["perplexity"] for row in c.rows()] == [12.0, 30.0]
    assert all("pooled_cosine" not in row for row in c.rows())
    one = WhatIfResult(np.array([1.0]), 3, np.zeros((1, 1, 1)), np.zeros((1, 1, 1)),
                       np.ones(1), None, None, 0.9, 0.0)
    assert one.rows()[0]["layer"] == 3 and one.injected == {}


# -- the sweep on tiny models ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2():
    from tests.engine.probe.conftest import tiny_gpt2

    return tiny_gpt2(initializer_range=0.3, layers=2)


def _hf_entropy(loaded, ids) -> np.ndarray:
    """(L, H) mean over rows 1.. of H / ln(i + 1) from transformers' own attention weights."""
    with torch.inference_mode():
        out = loaded.model(input_ids=torch.as_tensor([ids]), output_attentions=True)
    rows = []
    for a in out.attentions:
        p = a[0].double().numpy()  # (H, n, n), causal
        h = -(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)).sum(-1)[:, 1:]
        rows.append((h / np.log(np.arange(2, p.shape[1] + 1))).mean(-1))
    return np.array(rows)


def test_the_sweep_on_a_causal_model(gpt2) -> None:
    ms = (4.0, 0.25, 1.0)  # unsorted: the sweep sorts them
    snaps = list(whatif(gpt2, IDS, multipliers=ms, threshold=0.5))
    assert [(s.stage, s.fraction) for s in snaps[:-1]] == [
        ("what-if, m = 0.25", 0.0), ("what-if, m = 1", 1 / 3), ("what-if, m = 4", 2 / 3)]
    assert snaps[-1].stage == "done" and snaps[-1].done and snaps[-1].fraction == 1.0
    r = snaps[-1].result
    assert r.multipliers.tolist() == [0.25, 1.0, 4.0] and r.layer is None
    assert r.threshold == 0.5 and r.model_state == "intact model"
    assert r.pooled_cosine is None and r.entropy_norm.shape == (3, 2, 4)
    # at m = 1: transformers' own weights, the model's own log-likelihood, cosine 1
    np.testing.assert_allclose(r.entropy_norm[1], _hf_entropy(gpt2, IDS), rtol=1e-5)
    with torch.inference_mode():
        h = gpt2.model(input_ids=torch.as_tensor([IDS])).last_hidden_state[0].double()
        logp = torch.log_softmax(h[:-1] @ gpt2.model.wte.weight.double().T, -1)
        nll = -logp[torch.arange(len(IDS) - 1), torch.as_tensor(IDS[1:])].mean()
    assert r.perplexity[1] == pytest.approx(math.exp(float(nll)), rel=1e-6)
    assert r.output_cosine[1] == pytest.approx(1.0, abs=1e-12)
    assert r.output_cosine[0] < 1 - 1e-6 and r.output_cosine[2] < 1 - 1e-6
    # sharper with m: lower entropy, more saturated rows
    assert np.all(r.entropy_norm[0] > r.entropy_norm[1]) and np.all(
        r.entropy_norm[1] > r.entropy_norm[2])
    assert r.saturated[2].mean() > r.saturated[0].mean()
    one = run_whatif(whatif(gpt2, IDS, multipliers=(4.0,), layer=1, threshold=0.5))
    assert one.layer == 1
    np.testing.assert_allclose(one.entropy_norm[0, 0], r.entropy_norm[1, 0], rtol=1e-12)
    assert np.all(one.entropy_norm[0, 1] < r.entropy_norm[1, 1])  # its input is unchanged...
    assert np.all(one.entropy_norm[0, 1] != r.entropy_norm[2, 1])  # ... unlike with all layers
    assert one.output_cosine[0] > r.output_cosine[2]


def test_the_sweep_on_a_model_with_bugs_planted(gpt2) -> None:
    start = time.perf_counter()
    r = run_whatif(whatif(gpt2, IDS, multipliers=(1.0,), bugs={1: "none"}))
    assert 0 < r.sweep_s <= time.perf_counter() - start  # the sweep's own time, not a clock's
    assert r.threshold == 0.99  # the default
    assert r.injected == {1: "none"} and r.model_state.startswith("model with injected bugs")
    assert r.output_cosine[0] == pytest.approx(1.0, abs=1e-12)  # against the same buggy model
    intact = _hf_entropy(gpt2, IDS)
    np.testing.assert_allclose(r.entropy_norm[0, 0], intact[0], rtol=1e-5)
    assert np.all(r.entropy_norm[0, 1] < intact[1])  # unscaled: sharper than 1/sqrt(d_k)


def test_layer_0_alone_and_the_heads_of_the_sites_not_the_config(gpt2) -> None:
    """Layer 0 is a layer; the arrays are as wide as the sites' heads (a config may say
    otherwise), and the config's count when no site was recorded."""
    other = dataclasses.replace(gpt2, info=dataclasses.replace(gpt2.info, n_heads=7))
    r = run_whatif(whatif(other, IDS, multipliers=(2.0,), layer=0))
    assert r.layer == 0 and r.entropy_norm.shape == r.saturated.shape == (1, 2, 4)
    none = dataclasses.replace(gpt2, site_heads=[])
    assert run_whatif(whatif(none, IDS, multipliers=(2.0,))).entropy_norm.shape == (1, 2, 4)


def test_a_cancel_during_a_forward_pass_stops_it(gpt2) -> None:
    """The flag is checked at every site, not only between multipliers: raised during the
    unmodified model's pass, no multiplier is reached."""
    calls = []

    def cancelled() -> bool:
        calls.append(1)
        return len(calls) > 1

    with pytest.raises(Cancelled):
        next(whatif(gpt2, IDS, multipliers=(1.0,), cancelled=cancelled))


def test_a_sweep_that_ends_without_a_result_says_it_is_the_what_if_sweep() -> None:
    with pytest.raises(RuntimeError) as err:
        run_whatif(iter([WhatIfSnapshot("x", 0.5)]))
    assert str(err.value) == "the what-if sweep ended without a result"


def test_an_encoder_gives_the_pooled_cosine(make_bert) -> None:
    bert = make_bert(init=0.3)
    r = run_whatif(whatif(bert, IDS, multipliers=(0.5, 1.0)))
    assert r.perplexity is None and r.pooled_cosine is not None
    assert r.pooled_cosine[1] == pytest.approx(1.0, abs=1e-12)
    with torch.inference_mode():
        base = bert.model(input_ids=torch.as_tensor([IDS])).last_hidden_state[0].double().numpy()
        # m = 0.5 by hand: every query projection halved (exact in binary), the model rerun
        queries = [layer.attention.self.query for layer in bert.model.encoder.layer]
        for q in queries:
            q.weight.mul_(0.5), q.bias.mul_(0.5)
        try:
            half = bert.model(input_ids=torch.as_tensor([IDS])).last_hidden_state[0]
        finally:
            for q in queries:
                q.weight.mul_(2.0), q.bias.mul_(2.0)
    half = half.double().numpy()
    assert base.shape[0] == len(IDS) and r.pooled_cosine[0] < 1 - 1e-9
    a, b = half.mean(0), base.mean(0)  # the pooled embeddings' cosine, not the tokens' mean
    assert r.pooled_cosine[0] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b),
                                               abs=1e-7)
    per_token = (half * base).sum(-1) / np.linalg.norm(half, axis=-1) / np.linalg.norm(base, axis=-1)
    assert r.output_cosine[0] == pytest.approx(per_token.mean(), abs=1e-7)
    assert abs(per_token.mean() - r.pooled_cosine[0]) > 1e-3  # the two differ here (by 5e-3)


@pytest.mark.parametrize("kwargs, field, words", [
    ({"multipliers": ()}, "multipliers", "must be positive finite numbers"),
    ({"multipliers": (1.0, 0.0)}, "multipliers", "must be positive finite numbers"),
    ({"multipliers": (1.0, -2.0)}, "multipliers", "must be positive finite numbers"),
    ({"multipliers": (1.0, math.inf)}, "multipliers", "must be positive finite numbers"),
    ({"multipliers": (1.0, math.nan)}, "multipliers", "must be positive finite numbers"),
    ({"layer": 2}, "whatif_layer", "layer 2 is out of range; this model has layers 0..1"),
    ({"layer": -1}, "whatif_layer", "layer -1 is out of range; this model has layers 0..1"),
])
def test_refusals(gpt2, kwargs, field, words) -> None:
    with pytest.raises(ConfigError) as err:
        next(whatif(gpt2, IDS, **kwargs))
    assert (err.value.field, err.value.message) == (field, words)


def test_a_cancelled_sweep_stops(gpt2) -> None:
    stop = {"now": False}
    gen = whatif(gpt2, IDS, multipliers=(1.0, 2.0), cancelled=lambda: stop["now"])
    assert next(gen).fraction == 0.0
    stop["now"] = True
    with pytest.raises(Cancelled):
        next(gen)
