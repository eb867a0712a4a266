"""The shrinker key by key, on hand-made configs: every expected size is worked out by hand from
the module's documented targets (layers 2, 4 heads of width 8, hidden 32, feed-forward 64,
vocabulary 128, 4 experts picking 2, ranks 16, windows 8, positions 512); only the budget and
the build tests construct a model (on the meta device)."""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")

from engine.errors import ConfigError  # noqa: E402
from engine.probe import shrink  # noqa: E402
from engine.probe.shrink import shrink_config  # noqa: E402


def _cfg(**keys) -> transformers.PretrainedConfig:
    """A config holding ``keys`` as stored (set past PretrainedConfig's own checks, which would
    drop generation keys such as top_k and check a rope table's keys)."""
    cfg = transformers.PretrainedConfig()
    cfg.__dict__.update(keys)
    return cfg


def _as(cls: type, **keys) -> transformers.PretrainedConfig:
    """A config of class ``cls`` (its properties in force) holding ``keys`` as stored."""
    cfg = _cfg(**keys)
    cfg.__class__ = cls
    return cfg


def _shrunk(**keys) -> dict:
    """The keys given, after shrinking (the rest of PretrainedConfig's keys left out)."""
    cfg = _cfg(**keys)
    assert shrink_config(cfg) is cfg  # in place
    return {k: cfg.__dict__.get(k) for k in keys}


# -- heads, key heads, widths, head parts, windows ---------------------------------------------

def test_heads_hidden_and_head_width_are_4_32_and_8_under_every_name():
    got = _shrunk(num_attention_heads=32, n_head=32, num_heads=32, encoder_attention_heads=32,
                  decoder_attention_heads=16, attention_heads=32, hidden_size=4096, n_embd=4096,
                  d_model=4096, embed_dim=4096, head_dim=128, d_kv=128, kv_channels=128)
    assert got == {"num_attention_heads": 4, "n_head": 4, "num_heads": 4,
                   "encoder_attention_heads": 4, "decoder_attention_heads": 4,
                   "attention_heads": 4, "hidden_size": 32, "n_embd": 32, "d_model": 32,
                   "embed_dim": 32, "head_dim": 8, "d_kv": 8, "kv_channels": 8}


@pytest.mark.parametrize("kv, expected", [(1, 1), (2, 2), (8, 2), (31, 2), (32, 4), (64, 4)])
def test_key_heads_stay_one_grouped_or_equal(kv, expected):
    """One key head stays one (multi-query); fewer than the 32 query heads: 2 (grouped); as many
    or more: 4 (one per query head)."""
    got = _shrunk(num_attention_heads=32, hidden_size=4096, num_key_value_heads=kv,
                  num_kv_heads=kv, multi_query_group_num=kv)
    assert got["num_key_value_heads"] == got["num_kv_heads"] == got["multi_query_group_num"] \
        == expected


def test_key_heads_without_query_heads_are_grouped():
    assert _shrunk(num_key_value_heads=8, n_kv_heads=1) == {"num_key_value_heads": 2,
                                                            "n_kv_heads": 1}


def test_sizes_a_config_leaves_none_are_filled_only_beside_heads():
    """Ministral, Nemotron: head_dim and num_key_value_heads None by default, filled by the
    full-size model: 8 and 4 (as many key heads as query heads; the filled 4 used to be shrunk
    once more as "fewer than the 48 query heads", grouping the tiny Nemotron's keys 4 / 2)."""
    assert _shrunk(num_attention_heads=32, head_dim=None, num_key_value_heads=None) == {
        "num_attention_heads": 4, "head_dim": 8, "num_key_value_heads": 4}
    assert _shrunk(head_dim=None, num_key_value_heads=None) == {"head_dim": None,
                                                                "num_key_value_heads": None}
    assert _shrunk(num_attention_heads=32, head_dim=64, num_key_value_heads=0)["head_dim"] == 8


def test_other_head_widths_keep_their_ratio_to_the_head_width():
    """head_dim 128 -> 8 is a ratio of 1/16: 64 -> 4, 128 -> 8, 100 -> 6.25 -> 6 (even), 3 -> 2
    (at least 2)."""
    got = _shrunk(num_attention_heads=32, hidden_size=4096, head_dim=128, qk_rope_head_dim=64,
                  qk_nope_head_dim=128, v_head_dim=100, rotary_dim=3, global_head_dim=256,
                  index_head_dim=0)
    assert (got["qk_rope_head_dim"], got["qk_nope_head_dim"], got["v_head_dim"],
            got["rotary_dim"], got["global_head_dim"], got["index_head_dim"]) == (4, 8, 6, 2, 16, 0)


def test_without_a_head_width_key_it_is_the_hidden_size_over_the_first_heads_key():
    # 4096 / 32 = 128 (num_attention_heads comes before num_heads): 64 -> 4; 4096 / 16 would give 8
    assert _shrunk(num_attention_heads=32, num_heads=16, hidden_size=4096,
                   qk_rope_head_dim=64)["qk_rope_head_dim"] == 4
    # hidden_size before d_model: 2048 / 32 = 64, so 64 -> 8
    assert _shrunk(num_attention_heads=32, hidden_size=2048, d_model=4096,
                   qk_rope_head_dim=64)["qk_rope_head_dim"] == 8
    # head_dim before d_kv: 32 -> ratio 1/4
    assert _shrunk(head_dim=32, d_kv=128, v_head_dim=64)["v_head_dim"] == 16
    # heads that do not divide the width, or no heads: no ratio, the part is the head width 8
    assert _shrunk(num_attention_heads=30, hidden_size=4096, v_head_dim=100)["v_head_dim"] == 8
    assert _shrunk(hidden_size=4096, v_head_dim=100)["v_head_dim"] == 8


@pytest.mark.parametrize("window, expected", [(4096, 8), (9, 8), (8, 8), (5, 5), (0, 0),
                                              (None, None)])
def test_a_sliding_window_wider_than_8_is_cut_to_8(window, expected):
    got = _shrunk(sliding_window=window, window_size=window, attention_window_size=window,
                  local_window_size=window)
    assert set(got.values()) == {expected}


# -- the feed-forward part and the experts ------------------------------------------------------

def test_feed_forward_widths_experts_and_their_top_k():
    got = _shrunk(intermediate_size=11008, ffn_dim=4096, d_ff=2048, n_inner=3072,
                  moe_intermediate_size=1408, shared_expert_intermediate_size=5632,
                  num_experts=64, n_routed_experts=160, num_experts_per_tok=6, top_k=1,
                  moe_topk=3)
    assert got == {"intermediate_size": 64, "ffn_dim": 64, "d_ff": 64, "n_inner": 64,
                   "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
                   "num_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
                   "top_k": 1, "moe_topk": 2}


def test_experts_left_none_beside_an_expert_width_are_filled():
    """Dots1, DeepSeek-V2: n_routed_experts, n_shared_experts and the router's k None."""
    assert _shrunk(moe_intermediate_size=1408, n_routed_experts=None, n_shared_experts=None,
                   num_experts_per_tok=None) == {
        "moe_intermediate_size": 32, "n_routed_experts": 4, "n_shared_experts": 1,
        "num_experts_per_tok": 2}
    # without an expert width they stay None; a router's k with no experts stays as it is
    assert _shrunk(n_routed_experts=None, n_shared_experts=None, num_experts_per_tok=None) == {
        "n_routed_experts": None, "n_shared_experts": None, "num_experts_per_tok": None}
    assert _shrunk(num_experts=0, top_k=None)["top_k"] is None
    assert _shrunk(moe_topk=3)["moe_topk"] == 2
    assert _shrunk(num_local_experts=8, num_experts_per_tok=None)["num_experts_per_tok"] == 2


def test_groups_and_latent_ranks():
    got = _shrunk(n_group=8, topk_group=4, n_shared_experts=2, first_k_dense_replace=3,
                  num_shared_experts=0, kv_lora_rank=512, q_lora_rank=1536, o_lora_rank=None)
    assert got == {"n_group": 1, "topk_group": 1, "n_shared_experts": 1,
                   "first_k_dense_replace": 1, "num_shared_experts": 0, "kv_lora_rank": 16,
                   "q_lora_rank": 16, "o_lora_rank": None}


# -- a state-space mixer beside attention ----------------------------------------------------------

@pytest.mark.parametrize("expand", [None, 3])
def test_the_mamba_mixer_is_its_expansion_of_the_hidden_size(expand):
    e = expand or 2  # mamba_expand's default
    keys = {"mamba_n_heads": 128, "mamba_d_head": 64, "mamba_d_ssm": 8192, "mamba_dt_rank": 256,
            "mamba_d_state": 128, "state_size": 64, "ssm_state_size": 128, "d_state": 16,
            "mamba_chunk_size": 256, "chunk_size": 64}
    if expand:
        keys["mamba_expand"] = expand
    got = _shrunk(**keys)
    assert (got["mamba_d_head"], got["mamba_n_heads"], got["mamba_d_ssm"]) == (16, e * 2, e * 32)
    assert got["mamba_dt_rank"] == 4
    assert {got[k] for k in ("mamba_d_state", "state_size", "ssm_state_size", "d_state",
                             "mamba_chunk_size", "chunk_size")} == {16}


def test_zamba_widths():
    got = _shrunk(mamba_headdim=64, n_mamba_heads=8, attention_head_dim=224,
                  attention_hidden_size=7168)
    assert got == {"mamba_headdim": 8, "n_mamba_heads": 8, "attention_head_dim": 16,
                   "attention_hidden_size": 64}
    assert _shrunk(mamba_headdim=64)["mamba_headdim"] == 64  # no head count: left
    assert _shrunk(mamba_n_heads=128)["mamba_n_heads"] == 128  # no head width beside it
    assert _shrunk(mamba_d_ssm=None, mamba_dt_rank=0) == {"mamba_d_ssm": None, "mamba_dt_rank": 0}


# -- vocabularies, positions, special ids --------------------------------------------------------

def test_vocabularies_over_128_are_cut_but_not_the_token_types():
    got = _shrunk(vocab_size=32000, target_vocab_size=500, type_vocab_size=200, audio_vocab=100,
                  vocab_file=129)
    assert got == {"vocab_size": 128, "target_vocab_size": 128, "type_vocab_size": 200,
                   "audio_vocab": 100, "vocab_file": 128}
    assert _shrunk(vocab_size=128)["vocab_size"] == 128


def test_a_vocabulary_without_a_default_gets_128_and_its_special_ids():
    """ESM: vocab_size, pad_token_id and mask_token_id all None by default."""
    assert _shrunk(vocab_size=None, pad_token_id=None, mask_token_id=None) == {
        "vocab_size": 128, "pad_token_id": 1, "mask_token_id": 127}
    assert _shrunk(vocab_size=None, pad_token_id=5, mask_token_id=None)["pad_token_id"] == 5


@pytest.mark.parametrize("rope, kept", [
    (None, False), ({}, False), ({"rope_type": "default"}, False), ({"type": "linear"}, False),
    ({"rope_type": "dynamic"}, False), ({"factor": 2.0}, False), ({"rope_type": "yarn"}, True),
    ({"type": "longrope"}, True), ({"rope_type": "llama3", "type": "default"}, True)])
def test_positions_over_512_are_cut_unless_a_rope_scaling_reads_them(rope, kept):
    got = _shrunk(max_position_embeddings=131072, n_positions=513, n_ctx=512, max_seq_len=100,
                  max_sequence_length=4096, rope_parameters=rope)
    cut = 131072 if kept else 512
    assert (got["max_position_embeddings"], got["n_positions"], got["n_ctx"],
            got["max_seq_len"], got["max_sequence_length"]) == (
        cut, 513 if kept else 512, 512, 100, 4096 if kept else 512)


def test_special_ids_are_kept_inside_the_smaller_vocabulary():
    got = _shrunk(vocab_size=32000, pad_token_id=128, bos_token_id=127, eos_token_id=[2, 200, 128],
                  decoder_start_token_id=True, image_token_id=262144, sep_token_id=[1, 2],
                  boi_token_id=None)
    assert got == {"vocab_size": 128, "pad_token_id": 127, "bos_token_id": 127,
                   "eos_token_id": [2, 127, 127], "decoder_start_token_id": True,
                   "image_token_id": 127, "sep_token_id": [1, 2], "boi_token_id": None}


# -- layers ------------------------------------------------------------------------------------

def test_layers_are_two_under_every_name_and_fewer_stay():
    got = _shrunk(num_hidden_layers=32, n_layer=48, num_layers=1, encoder_layers=12,
                  decoder_layers=2, num_decoder_layers=6, num_hidden_groups=3)
    assert got == {"num_hidden_layers": 2, "n_layer": 2, "num_layers": 1, "encoder_layers": 2,
                   "decoder_layers": 2, "num_decoder_layers": 2, "num_hidden_groups": 2}


def test_one_layer_of_each_kind_a_layer_types_list_names():
    kinds = ["sliding_attention"] * 5 + ["full_attention"]
    got = _shrunk(num_hidden_layers=36, layer_types=kinds * 6)
    assert got == {"num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"]}
    three = ["linear_attention", "full_attention", "mamba"] * 4
    assert _shrunk(num_hidden_layers=12, layer_types=three) == {
        "num_hidden_layers": 3, "layer_types": ["linear_attention", "full_attention", "mamba"]}
    # one kind: two layers of it
    assert _shrunk(num_hidden_layers=9, layers_block_type=["attention"] * 9) == {
        "num_hidden_layers": 2, "layers_block_type": ["attention", "attention"]}
    assert _shrunk(num_hidden_layers=9, block_types=("recurrent",) * 9)["block_types"] == [
        "recurrent", "recurrent"]
    assert _shrunk(num_hidden_layers=4, layer_types=[])["layer_types"] == []  # no kinds


def test_a_hybrid_without_an_attention_layer_gets_one():
    """Granite 4's defaults: every layer Mamba; the audit needs a softmax attention layer."""
    assert _shrunk(num_hidden_layers=40, num_attention_heads=32, layer_types=["mamba"] * 40)[
        "layer_types"] == ["mamba", "full_attention"]
    # not without attention heads, nor when the attention layers are listed apart (Bamba),
    # nor for a list under another name
    assert _shrunk(num_hidden_layers=40, layer_types=["mamba"] * 40)["layer_types"] == [
        "mamba", "mamba"]
    assert _shrunk(num_hidden_layers=40, num_attention_heads=32, layer_types=["mamba"] * 40,
                   attn_layer_indices=None)["layer_types"] == ["mamba", "mamba"]
    assert _shrunk(num_hidden_layers=40, num_attention_heads=32,
                   layers_block_type=["mamba"] * 40)["layers_block_type"] == ["mamba", "mamba"]
    for kind in ("hybrid", "global", "local", "attn", "ATTENTION", "sliding_attention"):
        assert _shrunk(num_hidden_layers=4, num_attention_heads=8,
                       layer_types=["mamba", kind])["layer_types"] == ["mamba", kind], kind


def test_hybrid_layer_ids_follow_the_new_kinds():
    got = _shrunk(num_hidden_layers=6, layer_types=["mamba", "hybrid"] * 3,
                  hybrid_layer_ids=[1, 3, 5])
    assert got["layer_types"] == ["mamba", "hybrid"] and got["hybrid_layer_ids"] == [1]


class _Derived(transformers.PretrainedConfig):
    """Recurrent Gemma: layer_types is read-only, cycled from the stored block_types."""

    @property
    def layer_types(self):
        return (self.block_types * 100)[: self.num_hidden_layers]


def test_a_derived_layer_list_is_shrunk_through_its_stored_pattern():
    cfg = _as(_Derived, num_hidden_layers=26, block_types=["recurrent", "recurrent", "attention"])
    shrink_config(cfg)
    assert cfg.block_types == ["recurrent", "attention"] and cfg.num_hidden_layers == 2
    assert cfg.layer_types == ["recurrent", "attention"]


class _Raising(transformers.PretrainedConfig):
    @property
    def layer_types(self):
        raise ValueError("derived from something missing")


def test_a_layer_list_that_cannot_be_read_is_no_list():
    cfg = _as(_Raising, num_hidden_layers=26)
    shrink_config(cfg)
    assert cfg.num_hidden_layers == 2


def test_a_hybrids_period_keeps_one_attention_layer():
    assert _shrunk(attn_layer_period=8, attn_layer_offset=4, expert_layer_period=2,
                   expert_layer_offset=1) == {"attn_layer_period": 2, "attn_layer_offset": 1,
                                              "expert_layer_period": 2, "expert_layer_offset": 1}
    assert _shrunk(attn_layer_period=0, attn_layer_offset=4) == {"attn_layer_period": 0,
                                                                "attn_layer_offset": 4}


def test_an_empty_rope_table_gets_one_default_entry_per_kind():
    """Cohere Compass: rope_parameters {} where one entry per layer kind is needed."""
    got = _shrunk(num_hidden_layers=8, layer_types=["sliding_attention", "full_attention"] * 4,
                  rope_parameters={})
    default = {"rope_type": "default", "rope_theta": 10000.0}
    assert got["rope_parameters"] == {"sliding_attention": default, "full_attention": default}
    assert _shrunk(num_hidden_layers=8, rope_parameters={})["rope_parameters"] == {}
    kept = {"rope_type": "default", "rope_theta": 1e6}
    assert _shrunk(num_hidden_layers=8, layer_types=["full_attention"] * 8,
                   rope_parameters=kept)["rope_parameters"] == kept


class _Shared(transformers.PretrainedConfig):
    """Gemma 3n: the kv-sharing modes are derived and refuse a layout without producers."""

    @property
    def kv_sharing_modes(self):
        if self.num_kv_shared_layers and self.refuse:
            raise ValueError("no producer")
        return []


@pytest.mark.parametrize("refuse, shared", [(True, 0), (False, 10)])
def test_kv_sharing_is_dropped_only_where_it_no_longer_builds(refuse, shared):
    cfg = _as(_Shared, num_hidden_layers=30, num_kv_shared_layers=10, refuse=refuse)
    shrink_config(cfg)
    assert cfg.num_kv_shared_layers == shared


def test_funnel_keeps_two_blocks_of_one_layer():
    assert _shrunk(block_sizes=[4, 4, 4], block_repeats=[2, 2, 2]) == {
        "block_sizes": [1, 1], "block_repeats": [1, 1]}
    assert _shrunk(block_sizes=(4, 4)) == {"block_sizes": [1, 1]}
    assert _shrunk(block_sizes=[4]) == {"block_sizes": [4]}


def test_bamba_keeps_one_attention_layer():
    assert _shrunk(num_hidden_layers=32, attn_layer_indices=None) == {
        "num_hidden_layers": 2, "attn_layer_indices": [1]}


def test_per_layer_lists_are_cut_to_the_layers_left():
    got = _shrunk(num_hidden_layers=6, moe_layers=[0, 1, 2, 3, 4, 5],
                  rope_per_layer=[1, 2, 3, 4, 5], attention_pattern=["a"] * 6,
                  sliding_layer_types=["s"] * 4, other_list=[1, 2, 3, 4, 5],
                  short_layers=[7, 8, 9])
    assert got == {"num_hidden_layers": 2, "moe_layers": [0, 1], "rope_per_layer": [1, 2],
                   "attention_pattern": ["a", "a"], "sliding_layer_types": ["s", "s"],
                   "other_list": [1, 2, 3, 4, 5], "short_layers": [7, 8, 9]}
    # the total is the first layer count left, in the layer keys' order (n_layer before
    # num_layers); none, nothing cut
    assert _shrunk(n_layer=3, moe_layers=[0, 1, 2, 3])["moe_layers"] == [0, 1]
    assert _shrunk(moe_layers=[0, 1, 2, 3])["moe_layers"] == [0, 1, 2, 3]
    assert _shrunk(n_layer=5, num_layers=1, moe_layers=[0, 1, 2, 3])["moe_layers"] == [0, 1]
    assert _shrunk(num_layers=1, encoder_layers=5, moe_layers=[0, 1, 2, 3])["moe_layers"] == [0]


# -- sub-configs, reading and writing keys --------------------------------------------------------

def test_sub_configs_are_shrunk_four_levels_down():
    def nest(depth):
        inner = _cfg(hidden_size=4096)
        for _ in range(depth):
            inner = _cfg(hidden_size=4096, text_config=inner)
        return inner

    cfg = shrink_config(nest(5))
    widths = []
    while cfg is not None:
        widths.append(cfg.hidden_size)
        cfg = cfg.__dict__.get("text_config")
    assert widths == [32, 32, 32, 32, 32, 4096]


class _ReadOnly(transformers.PretrainedConfig):
    @property
    def hidden_size(self):
        return 4096


def test_a_read_only_size_is_left_and_only_whole_numbers_are_sizes():
    cfg = _as(_ReadOnly)
    shrink._set(cfg, "hidden_size", 32)  # no error
    assert cfg.hidden_size == 4096
    cfg = _cfg(a=3, b=True, c=3.0, d="3", e=None)
    assert [shrink._get_int(cfg, k) for k in "abcde"] == [3, None, None, None, None]
    assert shrink._get_int(_as(_ReadOnly), "hidden_size") == 4096  # a property is read
    assert shrink._get_int(_as(_Raising), "layer_types") is None
    assert shrink._get_int(cfg, "missing") is None


# -- the transformers defaults, the build and the budget -----------------------------------------

def test_default_config_is_the_registered_class_defaults(monkeypatch):
    bert = shrink.default_config("bert")
    assert type(bert).__name__ == "BertConfig" and bert.hidden_size == 768
    with pytest.raises(ConfigError) as err:
        shrink.default_config("no-such-type")
    assert (err.value.field, err.value.message) == (
        "model_type", "'no-such-type' is not registered in transformers")

    class NoDefaults:
        def __init__(self):
            raise TypeError("  needs\n   a vision_config  ")

    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    monkeypatch.setitem(CONFIG_MAPPING._extra_content, "no-defaults", NoDefaults)  # registered
    with pytest.raises(ConfigError) as err:
        shrink.default_config("no-defaults")
    assert (err.value.field, err.value.message) == (
        "model_type", "its config class has no defaults (needs a vision_config)")


class _Auto:
    def __init__(self, name, calls, error=None):
        self.name, self.calls, self.error = name, calls, error

    def from_config(self, config, **kwargs):
        self.calls.append((self.name, config.architectures, kwargs))
        if self.error is not None:
            raise self.error
        return self.name


def _autos(monkeypatch, errors):
    calls = []
    for name in ("AutoModel", "AutoModelForCausalLM", "AutoModelForSeq2SeqLM",
                 "AutoModelForMaskedLM"):
        # (each auto class's from_config replaced: transformers' lazy module may hand out the
        # class itself whatever is set on the module)
        fake = _Auto(name, calls, errors.get(name))
        monkeypatch.setattr(getattr(transformers, name), "from_config", fake.from_config)
    return calls


def test_build_tries_the_base_model_then_the_lm_heads_in_order(monkeypatch):
    unrec = ValueError("Unrecognized configuration class X for this kind of AutoModel")
    calls = _autos(monkeypatch, {"AutoModel": unrec, "AutoModelForCausalLM": unrec})
    cfg = _cfg()
    assert cfg.architectures is None
    assert shrink.build(cfg) == "AutoModelForSeq2SeqLM"
    assert calls == [(n, [], {"attn_implementation": "eager"}) for n in (
        "AutoModel", "AutoModelForCausalLM", "AutoModelForSeq2SeqLM")]
    cfg = _cfg(architectures=["Mine"])
    calls = _autos(monkeypatch, {})
    assert shrink.build(cfg) == "AutoModel" and calls[0][1] == ["Mine"]
    # another ValueError is the model's own: raised at once
    other = ValueError("hidden size must divide")
    calls = _autos(monkeypatch, {"AutoModel": other})
    with pytest.raises(ValueError, match="must divide"):
        shrink.build(_cfg())
    assert len(calls) == 1
    # none recognizes it: the last refusal
    last = ValueError("Unrecognized configuration class X for AutoModelForMaskedLM")
    _autos(monkeypatch, {"AutoModel": unrec, "AutoModelForCausalLM": unrec,
                         "AutoModelForSeq2SeqLM": unrec, "AutoModelForMaskedLM": last})
    with pytest.raises(ValueError) as err:
        shrink.build(_cfg())
    assert err.value is last


def test_tiny_model_counts_on_the_meta_device_and_refuses_over_budget(monkeypatch):
    tiny = shrink.tiny_model("llama")
    # by hand: embeddings 128 x 32; per layer q, k, v, o 4 x 32 x 32, MLP 3 x 32 x 64, two
    # norms 2 x 32; a final norm 32
    n = 128 * 32 + 2 * (4 * 32 * 32 + 3 * 32 * 64 + 2 * 32) + 32
    assert tiny.parameters == n and tiny.config.hidden_size == 32
    assert tiny.largest.startswith("embed_tokens")
    assert shrink.tiny_model("llama", budget=n).parameters == n  # the budget itself fits
    with pytest.raises(ConfigError) as err:
        shrink.tiny_model("llama", budget=n - 1)
    assert err.value.field == "model_type"
    assert err.value.message == (f"{n:,} parameters after shrinking, over the budget of "
                                 f"{n - 1:,} (the largest: {tiny.largest})")
    seen = []

    def broken(config):
        import torch

        seen.append(torch.empty(1).device.type)
        raise RuntimeError("  shapes\n  do not match  ")

    monkeypatch.setattr(shrink, "build", broken)
    with pytest.raises(ConfigError) as err:
        shrink.tiny_model("llama")
    assert (err.value.field, err.value.message) == (
        "model_type", "the shrunk config does not build: shapes do not match")
    assert seen == ["meta"]  # built where nothing is allocated


def test_one_line_of_an_error():
    assert shrink._one_line(ValueError(" a \n b\tc ")) == "a b c"
    assert shrink._one_line(ValueError("x" * 200)) == "x" * 200
    assert shrink._one_line(ValueError("x" * 201)) == "x" * 200 + "…"
    assert shrink._one_line(ValueError("x" * 30), limit=10) == "x" * 10 + "…"
    assert shrink._one_line(KeyError()) == "KeyError"


def test_positions_of_a_config_without_any_rope_table_are_cut():
    assert _shrunk(max_position_embeddings=131072) == {"max_position_embeddings": 512}


def test_a_hybrid_of_linear_attention_only_gets_a_softmax_layer():
    """Linear attention is no softmax over q.k: a list of it alone gets a full-attention layer."""
    assert _shrunk(num_hidden_layers=8, num_attention_heads=8,
                   layer_types=["linear_attention"] * 8)["layer_types"] == [
        "linear_attention", "full_attention"]
    assert _shrunk(num_hidden_layers=8, num_attention_heads=8,
                   layer_types=["Linear_Attention", "mamba"] * 4)["layer_types"] == [
        "Linear_Attention", "mamba", "full_attention"]


# -- keys left alone (the survivors of the mutation run) -------------------------------------------

def test_sizes_stored_as_zero_or_none_are_left():
    """Only a stored positive whole number is a size: 0 and None stay under every family's
    names (a None beside no expert width, no heads, no vocabulary default)."""
    keys = dict(n_head=0, embed_dim=None, d_kv=0, ffn_dim=0, mlp_dim=None, expert_dim=0,
                moe_ffn_hidden_size=None, num_experts=0, num_local_experts=None, n_layer=0,
                num_layers=None, mamba_d_state=0, chunk_size=None, kv_lora_rank=0,
                topk_group=None)
    assert _shrunk(**keys) == keys


class _ClassSizes(transformers.PretrainedConfig):
    """Sizes the class holds (not stored in the config): not the config's own keys."""

    n_head, n_embd, d_kv, ffn_dim, expert_dim, num_experts = 16, 64, 16, 128, 64, 8


def test_sizes_only_the_class_holds_are_not_written():
    cfg = _as(_ClassSizes, num_attention_heads=32, hidden_size=4096)
    shrink_config(cfg)
    assert (cfg.num_attention_heads, cfg.hidden_size) == (4, 32)
    for key in ("n_head", "n_embd", "d_kv", "ffn_dim", "expert_dim", "num_experts"):
        assert key not in cfg.__dict__, key


def test_a_stored_zero_beside_an_expert_width_is_no_missing_expert_count():
    """Only None is filled beside moe_intermediate_size: 0 experts and 0 shared experts stay 0
    (the filled shared experts are 1 either way: the group keys are set to 1 after)."""
    assert _shrunk(moe_intermediate_size=1408, num_experts=0, n_routed_experts=None,
                   n_shared_experts=0) == {"moe_intermediate_size": 32, "num_experts": 0,
                                           "n_routed_experts": 4, "n_shared_experts": 0}


class _Shadowed(transformers.PretrainedConfig):
    """A stored value beside a property of the same name (the stored one is the config's)."""

    @property
    def hidden_size(self):
        return 4096


def test_a_stored_key_is_read_before_a_property_of_its_name():
    cfg = _as(_Shadowed, hidden_size=64)
    assert shrink._get_int(cfg, "hidden_size") == 64
    cfg.__dict__["hidden_size"] = None  # (None stored: the property's value)
    assert shrink._get_int(cfg, "hidden_size") == 4096


def test_build_gives_an_object_without_architectures_an_empty_list(monkeypatch):
    import types

    calls = _autos(monkeypatch, {})
    cfg = types.SimpleNamespace()
    assert shrink.build(cfg) == "AutoModel" and cfg.architectures == [] and calls[0][1] == []


def test_a_small_vocabulary_and_its_ids_are_left():
    assert _shrunk(vocab_size=64, pad_token_id=None, mask_token_id=None) == {
        "vocab_size": 64, "pad_token_id": None, "mask_token_id": None}


def test_only_whole_numbers_in_an_id_list_are_ids_and_128_is_outside():
    got = _shrunk(eos_token_id=[2, 128], bos_token_id=[2, 300.0], pad_token_id=[True, 5])
    assert got == {"eos_token_id": [2, 127], "bos_token_id": [2, 300.0],
                   "pad_token_id": [True, 5]}
    assert type(got["pad_token_id"][0]) is bool  # (left, not rewritten as 1)


def test_the_mixers_widths_are_whole_numbers():
    """Head counts and widths are ints (a float 4.0 would be refused by torch's layers)."""
    got = _shrunk(mamba_n_heads=128, mamba_d_head=64, mamba_headdim=64, n_mamba_heads=8,
                  attention_head_dim=224, attention_hidden_size=7168)
    assert got == {"mamba_n_heads": 4, "mamba_d_head": 16, "mamba_headdim": 8,
                   "n_mamba_heads": 8, "attention_head_dim": 16, "attention_hidden_size": 64}
    assert all(type(v) is int for v in got.values()), got
    assert _shrunk(d_state=64)["d_state"] == 16


def test_zambas_attention_widths_are_set_together_only():
    """Zamba's attention is 2 x hidden wide, set with its head width even where the width was
    left None; either key alone is left (a head width alone is no Zamba's)."""
    assert _shrunk(attention_head_dim=224, attention_hidden_size=None) == {
        "attention_head_dim": 16, "attention_hidden_size": 64}
    cfg = _cfg(attention_head_dim=224)
    shrink_config(cfg)
    assert cfg.__dict__["attention_head_dim"] == 224 and "attention_hidden_size" not in cfg.__dict__
    cfg = _cfg(n_mamba_heads=8)  # (a head count without its width: no width added)
    shrink_config(cfg)
    assert "mamba_headdim" not in cfg.__dict__ and cfg.n_mamba_heads == 8


class _Kinds(transformers.PretrainedConfig):
    """A layer list derived from the layer count (three kinds), never stored by the class."""

    @property
    def layer_types(self):
        return (["mamba", "full_attention", "linear_attention"] * 100)[: self.num_hidden_layers]


def test_a_derived_layer_list_is_read_and_a_stored_one_first():
    cfg = _as(_Kinds, num_hidden_layers=12)
    shrink_config(cfg)  # (read through the property: three kinds, three layers)
    assert cfg.num_hidden_layers == 3
    assert cfg.layer_types == ["mamba", "full_attention", "linear_attention"]
    cfg = _as(_Kinds, num_hidden_layers=12, layer_types=["sliding_attention", "full_attention"] * 6)
    shrink_config(cfg)  # (the stored list is the config's: two kinds)
    assert cfg.num_hidden_layers == 2


def test_a_layer_list_of_one_entry_and_a_pattern_of_one_kind_are_padded_with_it():
    # (one layer stays one: the list of its one kind is padded to two)
    assert _shrunk(num_hidden_layers=1, layer_types=["full_attention"]) == {
        "num_hidden_layers": 1, "layer_types": ["full_attention", "full_attention"]}
    cfg = _as(_Derived, num_hidden_layers=26, block_types=["recurrent"] * 3)
    shrink_config(cfg)
    assert cfg.block_types == ["recurrent", "recurrent"] and cfg.num_hidden_layers == 2


def test_an_empty_stored_list_beside_the_kinds_list_is_left():
    """The kinds come from the first non-empty list; an empty layer_types stored before it is
    no pattern to shrink through."""
    assert _shrunk(num_hidden_layers=9, layer_types=[],
                   block_types=["recurrent", "attention", "attention"] * 3) == {
        "num_hidden_layers": 2, "layer_types": [], "block_types": ["recurrent", "attention"]}


def test_kv_sharing_without_its_derived_modes_is_kept():
    assert _shrunk(num_hidden_layers=30, num_kv_shared_layers=10) == {
        "num_hidden_layers": 2, "num_kv_shared_layers": 10}


def test_a_per_layer_list_of_block_types_under_another_name_is_cut():
    assert _shrunk(num_hidden_layers=6, decoder_block_types=["a"] * 6)[
        "decoder_block_types"] == ["a", "a"]
