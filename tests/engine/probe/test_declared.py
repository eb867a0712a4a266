"""The declared scale accounts for every factor between the projections and the product: no
false alarm on a correct model, no bug word on a layer that is as declared, and planted bugs
are still found. Each expected factor is written from the architecture's paper or config (the
formula by hand), not from engine.probe.declared."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("transformers")

from engine.probe.audit import audit_ids
from engine.probe.scale_fit import STANDARD, TWICE
from engine.probe.zoo import ZooEntry, build, zoo_ids

SMALL = {"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 64, "max_position_embeddings": 64}
BUG_WORDS = ("scaled twice", "unscaled", "scaled by", "other")


def _audit(config: str, bugs=None, qk_std: float = 0.15, prepare=None, **kwargs):
    loaded = build(ZooEntry(config, config, kwargs, qk_std=qk_std)) if prepare is None else \
        prepare(config, kwargs, qk_std)
    return audit_ids(loaded, zoo_ids(), bugs or {})


def _as_declared_everywhere(r, scale_x_sqrt_dk: float) -> None:
    """Every site as declared, the declaration equal to the documented factor, no bug word."""
    sq = math.sqrt(r.d_k)
    assert r.mismatched_layers() == [], [s.mismatch for s in r.sites]
    for layer, site in enumerate(r.sites):
        assert site.declared_known, site.declared_note
        assert r.declared_scale[layer] * sq == pytest.approx(scale_x_sqrt_dk, rel=1e-9)
        x = r.layer_scale_x_sqrt_dk()[layer]
        assert abs(math.log(x / scale_x_sqrt_dk)) <= r.layer_fits[layer].tol_log[0], x
        for v in [r.layer_verdicts[layer], *r.head_verdicts[layer]]:
            assert not v.startswith(BUG_WORDS), v


def test_esm_scales_q_before_rope_and_passes_1_and_is_as_declared() -> None:
    """ESM multiplies q by head_dim^-1/2 before RoPE and passes scaling 1.0: the whole factor is
    1/sqrt(head_dim) (the ESM papers' attention), as declared (main: MISMATCH, 'measured 0.25 x
    the declared scale')."""
    r = _audit("EsmConfig", **{**SMALL, "num_attention_heads": 2},
               position_embedding_type="rotary", pad_token_id=1)
    _as_declared_everywhere(r, 1.0)
    assert r.layer_verdicts == [STANDARD] * 2
    assert all("q pre-scaled x0.25" in s.features for s in r.sites)


def test_falcon_h1_key_multiplier_is_part_of_the_declared_scale() -> None:
    """Falcon-H1 multiplies k by key_multiplier after k_proj: the logits carry it (main:
    MISMATCH, and the verdict 'scaled by 1/sqrt(d_model)' on a layer that is as declared)."""
    r = _audit("FalconH1Config", **SMALL, num_key_value_heads=2, head_dim=8, mamba_d_ssm=32,
               mamba_n_heads=4, mamba_d_head=8, mamba_n_groups=1, mamba_d_state=8,
               key_multiplier=0.5)
    _as_declared_everywhere(r, 0.5)
    assert all("k pre-scaled x0.5" in s.features for s in r.sites)


def _llama_with_q_and_k_pre_scaled(config: str, kwargs: dict, qk_std: float):
    """A Llama whose attention multiplies q and k each by head_dim^-1/4 after their projections
    and passes scaling 1 (a convention no config key names): correct by design."""
    import torch

    d = kwargs["hidden_size"] // kwargs["num_attention_heads"]

    def quarter(_m, _a, out):
        return out * d**-0.25

    entry = ZooEntry(config, config, kwargs, qk_std=qk_std)
    from transformers.models.llama import modeling_llama

    real = modeling_llama.LlamaAttention.__init__

    def init(self, *a, **k):
        real(self, *a, **k)
        self.scaling = 1.0
        self.q_proj.register_forward_hook(quarter)
        self.k_proj.register_forward_hook(quarter)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(modeling_llama.LlamaAttention, "__init__", init)
        loaded = build(entry)
    assert isinstance(loaded.model.layers[0].self_attn.q_proj, torch.nn.Linear)
    return loaded


def test_q_and_k_each_scaled_by_d_to_the_minus_quarter_is_no_false_alarm() -> None:
    """The code's factors (q x d^-1/4, k x d^-1/4, scaling 1) give the standard scale and nothing
    in the config declares them: 'declared: unknown', not a MISMATCH the audit cannot back (main:
    MISMATCH on every layer)."""
    r = _audit("LlamaConfig", prepare=_llama_with_q_and_k_pre_scaled, **SMALL,
               num_key_value_heads=4)
    assert r.mismatched_layers() == [], [s.mismatch for s in r.sites]
    for site in r.sites:
        assert not site.declared_known
        assert "q x0.5946" in site.declared_note and "k x0.5946" in site.declared_note
    assert np.all(np.isnan(r.declared_scale))
    assert r.layer_verdicts == [STANDARD] * 2


def test_a_planted_bug_is_found_where_the_declaration_is_unknown() -> None:
    """Weights that are not what the code passes are a finding even without a declaration."""
    r = _audit("LlamaConfig", {1: "twice"}, prepare=_llama_with_q_and_k_pre_scaled, **SMALL,
               num_key_value_heads=4)
    assert r.mismatched_layers() == [1]
    assert "the factors the code applies" in r.sites[1].mismatch
    assert r.layer_verdicts[1] == TWICE


def test_longrope_attention_factor_on_cos_and_sin_is_declared() -> None:
    """Phi-3's LongRoPE multiplies cos and sin by sqrt(1 + ln(s) / ln(L0)), s = max positions /
    original ones: q.k by its square, 1 + ln 4 / ln 16 = 1.5 here (main: MISMATCH)."""
    r = _audit("Phi3Config", **{**SMALL, "num_key_value_heads": 4}, pad_token_id=0,
               original_max_position_embeddings=16,
               rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                "short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
                                "original_max_position_embeddings": 16})
    _as_declared_everywhere(r, 1 + math.log(4) / math.log(16))


def test_openai_privacy_filter_scales_q_and_k_by_its_scaling_attribute() -> None:
    """OpenAI's privacy filter keeps scaling = head_dim^-1/4, multiplies q and k each by it and
    passes 1; with its YaRN (factor 32 by default) the logits carry
    head_dim^-1/2 (0.1 ln 32 + 1)^2."""
    r = _audit("OpenAIPrivacyFilterConfig", **{**SMALL, "intermediate_size": 32},
               num_key_value_heads=2, head_dim=16, num_local_experts=2, num_experts_per_tok=1,
               sliding_window=8, pad_token_id=0)
    _as_declared_everywhere(r, (0.1 * math.log(32) + 1) ** 2)


def test_gemma2_query_pre_attn_scalar_256_at_head_dim_16_is_not_scaled_twice() -> None:
    """query_pre_attn_scalar 256 at head_dim 16 is 1/16 = 1/d_k: as declared, and no 'scaled
    twice' (main printed it on both intact layers); a planted 'twice' is named so."""
    kw = {**SMALL, "hidden_size": 64, "num_key_value_heads": 2, "head_dim": 16,
          "query_pre_attn_scalar": 256}
    r = _audit("Gemma2Config", qk_std=0.6, **kw)
    _as_declared_everywhere(r, math.sqrt(16 / 256))
    assert r.layer_verdicts == ["as declared (query_pre_attn_scalar 256)"] * 2
    bug = _audit("Gemma2Config", {1: "twice"}, qk_std=0.6, **kw)
    assert bug.mismatched_layers() == [1]
    assert bug.layer_verdicts[0] == "as declared (query_pre_attn_scalar 256)"
    assert bug.layer_verdicts[1] == TWICE


def test_gemma3_is_not_scaled_by_one_over_sqrt_d_model() -> None:
    """Gemma 3's query_pre_attn_scalar 32 = d_model here: as declared, no bug word."""
    r = _audit("Gemma3TextConfig", **SMALL, num_key_value_heads=2, head_dim=8,
               query_pre_attn_scalar=32)
    _as_declared_everywhere(r, math.sqrt(8 / 32))


# -- YaRN with mscale_all_dim --------------------------------------------------------------------

def _mscale(s: float, m: float) -> float:
    """YaRN's mscale(s, m) = 0.1 m ln s + 1 (DeepSeek-V3's yarn_get_mscale), by hand."""
    return 0.1 * m * math.log(s) + 1.0 if s > 1 else 1.0


_DEEPSEEK = {**SMALL, "num_key_value_heads": 4, "moe_intermediate_size": 16,
             "n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1,
             "first_k_dense_replace": 2, "q_lora_rank": 16, "kv_lora_rank": 16,
             "qk_rope_head_dim": 4, "qk_nope_head_dim": 8, "v_head_dim": 8,
             "max_position_embeddings": 640}


def _yarn(mscale: float, mscale_all_dim: float) -> dict:
    return {"rope_type": "yarn", "factor": 40.0, "rope_theta": 10000.0,
            "original_max_position_embeddings": 16, "mscale": mscale,
            "mscale_all_dim": mscale_all_dim, "beta_fast": 32.0, "beta_slow": 1.0}


@pytest.mark.parametrize("mscale, mscale_all_dim", [(1.0, 1.0), (0.707, 1.0), (1.0, 0.707)])
def test_deepseek_mscale_all_dim_multiplies_the_softmax_scale_by_its_square(
        mscale: float, mscale_all_dim: float) -> None:
    """DeepSeek-V3: softmax scale x mscale(s, mscale_all_dim)^2 at the product, cos/sin x
    mscale(s, mscale) / mscale(s, mscale_all_dim); 1.874 on the logits at s = 40 with both 1.
    Dropping either factor (the mobius #548 bug) fails this."""
    import transformers

    from engine.probe.declared import declare

    cfg = transformers.DeepseekV3Config(**_DEEPSEEK, rope_parameters=_yarn(mscale, mscale_all_dim))
    d = declare(cfg, None, 12, model_type="deepseek_v3")
    assert d.product * math.sqrt(12) == pytest.approx(_mscale(40, mscale_all_dim) ** 2, rel=1e-12)
    assert d.cos_sin == pytest.approx(_mscale(40, mscale) / _mscale(40, mscale_all_dim), rel=1e-12)
    assert d.value * math.sqrt(12) == pytest.approx(_mscale(40, mscale) ** 2, rel=1e-12)
    if mscale == mscale_all_dim:
        assert d.value * math.sqrt(12) == pytest.approx(1.874, abs=5e-4)


def test_deepseek_v3_at_factor_40_declares_1874_on_the_logits() -> None:
    """The config alone (no module at hand, as for a port): 1/sqrt(head_dim) x mscale(40, 1)^2
    = 1.874 / sqrt(head_dim)."""
    import transformers

    from engine.probe.declared import declared_scale

    cfg = transformers.DeepseekV3Config(**_DEEPSEEK, rope_parameters=_yarn(1.0, 1.0))
    value, source = declared_scale(cfg, None, 12)
    assert value * math.sqrt(12) == pytest.approx(_mscale(40, 1.0) ** 2, rel=1e-12)
    assert value * math.sqrt(12) == pytest.approx(1.874, abs=5e-4)
    assert "mscale_all_dim" in source


def test_a_tiny_deepseek_v3_at_factor_40_measures_1874_as_declared() -> None:
    r = _audit("DeepseekV3Config", **_DEEPSEEK, rope_parameters=_yarn(1.0, 1.0))
    assert r.mismatched_layers() == []
    for layer in range(2):
        x = r.layer_scale_x_sqrt_dk()[layer]
        assert abs(math.log(x / _mscale(40, 1.0) ** 2)) <= r.layer_fits[layer].tol_log[0], x
        assert r.declared_scale[layer] * math.sqrt(r.d_k) == pytest.approx(1.874, abs=5e-4)


def test_mscale_all_dim_outside_deepseeks_family_is_not_a_softmax_factor() -> None:
    """Ministral 3 keeps mscale_all_dim in its YaRN parameters but its attention does not
    multiply the softmax scale by it (transformers passes head_dim^-1/2; cos/sin carry
    mscale / mscale_all_dim = 1): as declared (main: MISMATCH 0.7713 x)."""
    rope = {**_yarn(1.0, 1.0), "factor": 4.0, "original_max_position_embeddings": 16,
            "llama_4_scaling_beta": 0.0}
    r = _audit("Ministral3Config", **SMALL, num_key_value_heads=2, head_dim=8,
               rope_parameters=rope)
    _as_declared_everywhere(r, 1.0)


# -- labels ----------------------------------------------------------------------------------------

def test_deepseek_mla_layers_are_called_mla_not_qk_norm() -> None:
    """The norm inside DeepSeek's attention is on the compressed key latent, not on q and k."""
    r = _audit("DeepseekV3Config", **_DEEPSEEK)
    for site in r.sites:
        assert any(f.startswith("MLA") for f in site.features), site.features
        assert "QK-norm" not in site.features


def test_clip_text_encoder_is_a_causal_encoder_not_a_decoder() -> None:
    r = _audit("CLIPTextConfig", **SMALL)
    assert [s.block for s in r.sites] == ["causal encoder"] * 2
    assert all("causal" in s.features for s in r.sites)
