"""Captured q/k of tiny random BERT and GPT-2 models reproduce the models' own attention."""

from __future__ import annotations

import numpy as np
import pytest

from engine.probe.analyze import analyze_capture, run_to_result
from engine.probe.capture import capture
from engine.probe.config import ProbeConfig

pytest.importorskip("transformers")

TOL = 1e-5  # float32 model vs our float64 recomputation


def _ids(n: int, vocab: int = 64, seed: int = 0) -> list[int]:
    return [int(i) for i in np.random.default_rng(seed).integers(1, vocab, n)]


def _result(loaded, ids, mask=None, **cfg):
    cap = capture(loaded, ids, mask)
    return cap, run_to_result(analyze_capture(ProbeConfig(text="x", bootstrap=cfg.pop("bootstrap", 0),
                                                          **cfg), loaded, cap, ids))


def _large_init(request, arch: str):
    """A tiny model with large random weights: attention far from uniform, so checks have teeth."""
    if arch == "bert":
        return request.getfixturevalue("make_bert")(init=0.3)
    return request.getfixturevalue("make_gpt2")(initializer_range=0.3)


@pytest.mark.parametrize("arch", ["bert", "gpt2"])
def test_recomputed_attention_equals_the_models_own(request, arch: str) -> None:
    loaded = _large_init(request, arch)
    cap, res = _result(loaded, _ids(12))
    assert res.attn_max_abs_diff.shape == (2, 4)
    assert np.all(res.attn_max_abs_diff < TOL)
    assert res.head_mean("model", "top_weight").max() > 0.5
    np.testing.assert_allclose(cap.scale, 1 / np.sqrt(8))


def test_gpt2_causal_mask_is_respected(make_gpt2) -> None:
    loaded = make_gpt2(initializer_range=0.3)
    cap, res = _result(loaded, _ids(10))
    assert cap.causal
    np.testing.assert_array_equal(res.pair_mask, np.tril(np.ones((10, 10), dtype=bool)))
    assert np.all(np.triu(cap.model_attn, k=1) < 1e-7)  # the model hides the future too
    assert not res.rows["none"].row_ok[0] and res.rows["none"].row_ok[1:].all()
    assert np.all(res.attn_max_abs_diff < TOL)


def test_gpt2_scale_is_read_from_the_model(make_gpt2) -> None:
    """scale_attn_by_inverse_layer_idx divides by layer + 1: the 'model' rule follows it."""
    loaded = make_gpt2(layers=3, initializer_range=0.3, scale_attn_by_inverse_layer_idx=True)
    cap, res = _result(loaded, _ids(9))
    np.testing.assert_allclose(cap.scale, 1 / np.sqrt(8) / np.arange(1, 4))
    assert np.all(res.attn_max_abs_diff < TOL)


@pytest.mark.parametrize("arch", ["bert", "gpt2"])
def test_padding_is_masked_and_changes_nothing(request, arch: str) -> None:
    loaded = _large_init(request, arch)
    ids = _ids(9)
    _, plain = _result(loaded, ids)
    padded_ids = ids + [0, 0, 0, 0]
    cap, padded = _result(loaded, padded_ids, [1] * 9 + [0] * 4)
    assert cap.q.shape[2] == 9  # padding dropped
    assert np.all(cap.masked_mass < 1e-7)  # the model put no weight on padding keys
    assert np.all(padded.attn_max_abs_diff < TOL)
    np.testing.assert_allclose(padded.scores, plain.scores, atol=1e-4, rtol=1e-4)
    for rule in ("model", "none", "dk"):
        np.testing.assert_allclose(padded.head_mean(rule, "entropy_norm"),
                                   plain.head_mean(rule, "entropy_norm"), atol=1e-4)


def test_random_weights_match_the_iid_prediction_within_uncertainty(make_bert) -> None:
    """Random i.i.d. weights: q and k carry no trained alignment, so the measured spread equals
    the i.i.d. prediction up to sampling noise (tokens, and the random weights of each head)."""
    ratios, ses = [], []
    for seed in range(2):
        loaded = make_bert(seed=seed, layers=3, width=64, vocab=1000, positions=160)
        _, res = _result(loaded, _ids(150, vocab=1000, seed=seed), bootstrap=100, seed=seed)
        ratios.append(res.score_stats.std_ratio.ravel())
        ses.append(res.score_stats.std_ratio_se.ravel())
    r = np.concatenate(ratios)
    assert np.all(np.abs(r - 1.0) < 0.15), r
    t = (r.mean() - 1.0) / (r.std(ddof=1) / np.sqrt(r.size))  # over heads: weight noise included
    assert abs(t) < 4.0, (r.mean(), t)
    assert np.all(np.concatenate(ses) > 0)


def test_two_token_gpt2_text_gives_finite_figures(make_gpt2) -> None:
    """Two tokens under a causal mask: one counted row (the first sees only itself)."""
    from engine.probe.analyze import head_detail
    from engine.probe.export import head_table

    loaded = make_gpt2(initializer_range=0.3)
    with np.errstate(all="raise"):
        _, res = _result(loaded, _ids(2), bootstrap=10)
        table = head_table(res)
        detail = head_detail(res, 1, 3, "none")
    assert all(np.all(np.isfinite(v)) for v in table.values())
    assert detail.row_ok.tolist() == [False, True]
    # the per-head mean is the one counted row's value, not diluted by the uncounted first row
    np.testing.assert_allclose(table["entropy_norm_model"], res.rows["model"].entropy_norm[:, :, 1])
    assert np.all(res.attn_max_abs_diff < TOL)


def test_an_architecture_outside_the_interface_without_adapter_is_refused_by_name() -> None:
    """XLNet computes attention inline (outside transformers' attention interface): the tap
    sees no call, and the refusal names the architecture and why."""
    import torch
    import transformers

    from engine.errors import ConfigError
    from engine.probe.loader import info_from_config, wrap_model

    torch.manual_seed(0)
    cfg = transformers.XLNetConfig(vocab_size=64, d_model=32, n_layer=2, n_head=4, d_inner=64)
    net = transformers.XLNetModel(cfg)
    with pytest.raises(ConfigError) as err:
        wrap_model(net, info_from_config(net.config, "tiny-xlnet"))
    msg = err.value.message
    assert err.value.field == "model" and "xlnet" in msg and "interface" in msg, msg


@pytest.mark.parametrize("name", ["T5", "Gemma 2", "gpt-oss", "Bloom", "OPT", "Qwen2"])
def test_the_probe_recomputes_the_attention_of_other_architectures(name: str) -> None:
    """Bias (T5, ALiBi), soft-cap, sinks, pre-scaled q, grouped keys: the probe's 'model' rule
    recomputes each model's own weights from the projections' q and k."""
    from engine.probe.zoo import ZOO, build, zoo_ids

    loaded = build(next(e for e in ZOO if e.name == name))
    ids = zoo_ids()
    _cap, res = _result(loaded, ids)
    assert np.all(res.attn_max_abs_diff < 1e-5), res.attn_max_abs_diff
    assert res.pair_masks.shape == (loaded.n_sites, len(ids), len(ids))


def test_a_model_that_reads_no_token_ids_is_refused_by_name() -> None:
    import transformers

    from engine.errors import ConfigError
    from engine.probe.loader import info_from_config, wrap_model

    net = transformers.WhisperModel(transformers.WhisperConfig(
        vocab_size=64, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, pad_token_id=0,
        decoder_start_token_id=1, bos_token_id=1, eos_token_id=2))
    with pytest.raises(ConfigError, match="whisper reads input_features"):
        wrap_model(net, info_from_config(net.config, "tiny-whisper"))
