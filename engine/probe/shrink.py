"""Any architecture transformers registers, made tiny: its default config with small sizes.

The sweep (:mod:`engine.probe.sweep`) audits every ``model_type`` of transformers' config
mapping on a random model; nothing is downloaded, so each is built from the config class's own
defaults, which describe the full-size model (billions of parameters). :func:`shrink_config`
rewrites the sizes by what the keys mean, not by architecture: layers 2 (or one of each kind a
``layer_types`` list names), 4 query heads of width 8 (key heads 2 where the model groups them,
1 where it has one), hidden 32 = heads x head width, feed-forward 64, vocabulary 128, a few
experts, small latent ranks; nested sub-configs (a text config, an encoder's, a decoder's) get the
same. Other head widths (DeepSeek's rope/nope parts, Gemma 4's global width) keep their ratio to
the head width. :func:`tiny_model` then counts the result on the meta device (no storage) and
refuses it over a parameter budget before anything is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError

HIDDEN, HEADS, HEAD_DIM, FFN, VOCAB, LAYERS = 32, 4, 8, 64, 128, 2
#: experts of a mixture-of-experts model, and how many each token picks
EXPERTS, TOP_K = 4, 2
#: longest position table kept (learned position embeddings of 128k rows are most of a model)
MAX_POSITIONS = 512
#: the parameter budget a tiny model must fit (checked on the meta device before allocation)
PARAM_BUDGET = 5_000_000

_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers",
           "decoder_layers", "num_decoder_layers", "num_encoder_layers", "num_hidden_groups")
_HEADS = ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads",
          "decoder_attention_heads", "n_heads", "num_decoder_attention_heads",
          "attention_heads")
_KV = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num",
       "num_key_value_groups_heads")
_HIDDEN = ("hidden_size", "n_embd", "d_model", "dim", "embed_dim", "word_embed_proj_dim",
           "embedding_size", "d_embed", "encoder_hidden_size", "hidden_dim", "model_dim",
           "emb_dim", "lru_width", "entity_emb_size", "cross_attention_hidden_size")
_FFN = ("intermediate_size", "attention_hidden_size", "ffn_dim", "d_ff", "n_inner", "encoder_ffn_dim", "decoder_ffn_dim",
        "ffn_hidden_size", "dim_feedforward", "inner_hidden_size", "mlp_dim")
_MOE_FFN = ("moe_intermediate_size", "expert_ffn_hidden_size", "hidden_size_per_layer_input", "shared_expert_intermediate_size", "expert_dim",
            "moe_ffn_hidden_size", "expert_intermediate_size")
_HEAD_DIM = ("head_dim", "d_kv", "kv_channels", "attention_head_size", "d_head", "head_size",
             "dim_head")
#: widths that keep their ratio to the head width (other parts of a head)
_HEAD_PARTS = ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "global_head_dim",
               "qk_head_dim", "linear_key_head_dim", "linear_value_head_dim", "index_head_dim",
               "attention_key_size", "attention_value_size", "rotary_dim", "rotary_emb_dim")
_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts",
            "num_experts_routed")
_TOPK = ("num_experts_per_tok", "moe_topk", "top_k", "moe_k", "num_selected_experts",
         "num_experts_per_token")
_RANKS = ("kv_lora_rank", "q_lora_rank", "o_lora_rank", "linear_conv_kernel_dim_unused")
_POSITIONS = ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len",
              "max_sequence_length")
_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
              "sep_token_id", "cls_token_id", "mask_token_id", "unk_token_id",
              "forced_bos_token_id", "forced_eos_token_id", "image_token_id",
              "boi_token_id", "eoi_token_id")
#: a sliding window narrower than the audit's text, so that the window shows in the weights
WINDOW = 8
_WINDOWS = ("sliding_window", "window_size", "attention_window_size", "local_window_size")
#: keys naming how many heads sit in one other head group (must stay consistent)
_ONE = ("n_group", "topk_group", "n_shared_experts", "first_k_dense_replace",
        "num_shared_experts", "moe_layer_start_index")


@dataclass(frozen=True)
class TinyModel:
    """A tiny model's config and what it counted on the meta device."""

    config: Any
    parameters: int
    largest: str


def default_config(model_type: str) -> Any:
    """transformers' default config of ``model_type`` (ConfigError when it has none)."""
    from transformers import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        raise ConfigError("model_type", f"{model_type!r} is not registered in transformers")
    try:
        return CONFIG_MAPPING[model_type]()
    except Exception as exc:
        raise ConfigError("model_type", f"its config class has no defaults ({_one_line(exc)})"
                          ) from None


def shrink_config(config: Any) -> Any:
    """``config`` (modified in place and returned) with every size it names made tiny."""
    _shrink(config, depth=0)
    return config


def _is_config(value: Any) -> bool:
    from transformers import PretrainedConfig

    return isinstance(value, PretrainedConfig)


def _set(config: Any, key: str, value: Any) -> None:
    try:
        setattr(config, key, value)
    except Exception:  # a read-only property (derived from other keys): leave it
        pass


def _get_int(config: Any, key: str) -> int | None:
    v = config.__dict__.get(key, None)
    if v is None:
        try:
            v = getattr(config, key, None)
        except Exception:
            return None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _shrink(config: Any, depth: int) -> None:
    keys = set(config.__dict__)
    _shrink_attention(config, keys)
    _shrink_mlp(config, keys)
    _shrink_ssm(config, keys)
    for key in _ONE:
        if key in keys and _get_int(config, key):
            _set(config, key, 1)
    for key in _RANKS:
        if key in keys and _get_int(config, key):
            _set(config, key, 16)
    _shrink_tokens(config, keys)
    _shrink_layers(config, keys)
    for key in sorted(keys):
        value = config.__dict__.get(key)
        if _is_config(value) and depth < 4:
            _shrink(value, depth + 1)


def _shrink_attention(config: Any, keys: set[str]) -> None:
    """Heads, key heads, hidden and head widths (other head widths keep their ratio to it),
    sliding windows."""
    heads = next((v for k in _HEADS if (v := _get_int(config, k))), None)
    hidden = next((v for k in _HIDDEN if (v := _get_int(config, k))), None)
    head_dim = next((v for k in _HEAD_DIM if (v := _get_int(config, k))), None)
    if head_dim is None and heads and hidden and hidden % heads == 0:
        head_dim = hidden // heads
    for key in _HEADS:
        if key in keys and _get_int(config, key):
            _set(config, key, HEADS)
    for key in _KV:
        v = _get_int(config, key)
        if key in keys and v:
            _set(config, key, 1 if v == 1 else (HEADS if heads and v >= heads else 2))
    if heads:  # a default of None that the full-size model fills elsewhere (Ministral,
        # Nemotron: as many key heads as query heads; filled after the key heads' shrink, which
        # would read the 4 as fewer than the full model's heads and group them)
        for key in ("head_dim", "num_key_value_heads"):
            if key in keys and config.__dict__.get(key) is None:
                _set(config, key, HEAD_DIM if key == "head_dim" else HEADS)
    for key in _HIDDEN:
        if key in keys and _get_int(config, key):
            _set(config, key, HIDDEN)
    for key in _HEAD_DIM:
        if key in keys and _get_int(config, key):
            _set(config, key, HEAD_DIM)
    ratio = HEAD_DIM / head_dim if head_dim else None
    for key in _HEAD_PARTS:
        v = _get_int(config, key)
        if key in keys and v:
            _set(config, key, max(2, 2 * round(v * ratio / 2)) if ratio else HEAD_DIM)
    for key in _WINDOWS:
        v = _get_int(config, key)
        if key in keys and v and v > WINDOW:
            _set(config, key, WINDOW)


def _shrink_mlp(config: Any, keys: set[str]) -> None:
    """Feed-forward widths, experts and the router's top-k."""
    for key in _FFN:
        if key in keys and _get_int(config, key):
            _set(config, key, FFN)
    for key in _MOE_FFN:
        if key in keys and _get_int(config, key):
            _set(config, key, FFN // 2)
    for key in _EXPERTS:
        if key in keys and _get_int(config, key):
            _set(config, key, EXPERTS)
    if _get_int(config, "moe_intermediate_size"):  # experts left None beside an expert width
        for key in _EXPERTS:  # (Dots1's n_routed_experts: the full model does not build)
            if key in keys and config.__dict__.get(key, 0) is None:
                _set(config, key, EXPERTS)
        if "n_shared_experts" in keys and config.__dict__.get("n_shared_experts", 0) is None:
            _set(config, "n_shared_experts", 1)
    has_experts = any(_get_int(config, k) for k in _EXPERTS)
    for key in _TOPK:
        if key in keys and (_get_int(config, key) or has_experts):
            # a default of None beside experts leaves the router without a k (DeepSeek-V2)
            _set(config, key, min(TOP_K, _get_int(config, key) or TOP_K))


def _shrink_tokens(config: Any, keys: set[str]) -> None:
    """Vocabularies, positions and the special token ids inside the smaller vocabulary."""
    for key in keys:
        v = _get_int(config, key)
        if "vocab" in key and key != "type_vocab_size" and v and v > VOCAB:
            _set(config, key, VOCAB)
    if "vocab_size" in keys and config.__dict__.get("vocab_size", 0) is None:  # ESM: no default
        _set(config, "vocab_size", VOCAB)  # (its special ids neither: padding and mask)
        for key, value in (("pad_token_id", 1), ("mask_token_id", VOCAB - 1)):
            if key in keys and config.__dict__.get(key) is None:
                _set(config, key, value)
    for key in _POSITIONS:
        v = _get_int(config, key)
        if key in keys and v and v > MAX_POSITIONS and not _long_rope(config):
            _set(config, key, MAX_POSITIONS)
    for key in _TOKEN_IDS:
        v = config.__dict__.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v >= VOCAB:
            _set(config, key, VOCAB - 1)
        elif isinstance(v, list) and any(isinstance(x, int) and x >= VOCAB for x in v):
            _set(config, key, [min(int(x), VOCAB - 1) for x in v])


def _shrink_ssm(config: Any, keys: set[str]) -> None:
    """A state-space mixer beside attention (Bamba, Zamba 2, Granite hybrids): its heads times
    head width must equal its expansion of the hidden size; its state and chunks small."""
    expand = _get_int(config, "mamba_expand") or 2
    if "mamba_n_heads" in keys and "mamba_d_head" in keys:
        _set(config, "mamba_d_head", 16)
        _set(config, "mamba_n_heads", max(1, expand * HIDDEN // 16))
    if "mamba_d_ssm" in keys and _get_int(config, "mamba_d_ssm"):
        _set(config, "mamba_d_ssm", expand * HIDDEN)
    if "mamba_headdim" in keys and _get_int(config, "n_mamba_heads"):  # Zamba 2
        _set(config, "mamba_headdim", expand * HIDDEN // (_get_int(config, "n_mamba_heads") or 1))
    if "attention_head_dim" in keys and "attention_hidden_size" in keys:  # Zamba: 2 x hidden
        _set(config, "attention_hidden_size", 2 * HIDDEN)
        _set(config, "attention_head_dim", 2 * HIDDEN // HEADS)
    if "mamba_dt_rank" in keys and _get_int(config, "mamba_dt_rank"):
        _set(config, "mamba_dt_rank", 4)
    for key in ("mamba_d_state", "state_size", "ssm_state_size", "d_state"):
        if key in keys and _get_int(config, key):
            _set(config, key, 16)
    for key in ("mamba_chunk_size", "chunk_size"):
        if key in keys and _get_int(config, key):
            _set(config, key, 16)


def _long_rope(config: Any) -> bool:
    """A rope scaling that reads the position table's length (YaRN's original length,
    LongRoPE's factor lists): keep the table as it is."""
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    return isinstance(rope, dict) and rope.get("rope_type", rope.get("type")) not in (
        None, "default", "linear", "dynamic")


#: per-layer lists of layer kinds (attention, linear attention, mamba, hybrid, ...)
_KIND_LISTS = ("layer_types", "layers_block_type", "block_types")
#: a hybrid's attention layers every ``period`` layers from ``offset``: 2 and 1 keep one
_PERIODS = (("attn_layer_period", "attn_layer_offset"), ("expert_layer_period", "expert_layer_offset"))


def _kinds(config: Any) -> tuple[str, list[Any]] | None:
    for key in _KIND_LISTS:
        value = config.__dict__.get(key)
        if value is None:
            try:
                value = getattr(config, key, None)
            except Exception:
                value = None
        if isinstance(value, (list, tuple)) and value:
            return key, list(value)
    return None


def _softmax_kind(kind: Any) -> bool:
    k = str(kind).lower()
    return ("attention" in k and "linear" not in k) or k in ("attn", "hybrid", "global", "local")


def _shrink_layers(config: Any, keys: set[str]) -> None:
    """Layers 2, or one of each kind when a per-layer list (``layer_types``) names kinds; the
    lists that have one entry per layer are cut to match; a hybrid keeps an attention layer."""
    kinds = _kinds(config)
    n = LAYERS
    new_types = None
    if kinds is not None:
        distinct = list(dict.fromkeys(kinds[1]))
        if kinds[0] == "layer_types" and _get_int(config, "num_attention_heads") and \
                "attn_layer_indices" not in keys and not any(_softmax_kind(k) for k in distinct):
            distinct.append("full_attention")  # a hybrid whose defaults keep no attention layer
            # (Granite 4's: every layer Mamba)
        n = max(LAYERS, len(distinct))
        new_types = distinct + [kinds[1][0]] * (n - len(distinct))
    for key in _LAYERS:
        v = _get_int(config, key)
        if key in keys and v:
            _set(config, key, min(v, n))
    if kinds is not None and new_types is not None:
        _set(config, kinds[0], new_types)
        stored = next((k for k in _KIND_LISTS if isinstance(config.__dict__.get(k), list)), None)
        if config.__dict__.get(kinds[0]) is None and stored is not None:
            # a list derived from a stored pattern (Recurrent Gemma's layer_types cycles
            # block_types): one of each kind of the pattern, in its own names
            pattern = list(dict.fromkeys(config.__dict__[stored]))
            _set(config, stored, pattern + [pattern[0]] * (n - len(pattern)))
        if "hybrid_layer_ids" in keys:
            _set(config, "hybrid_layer_ids", [i for i, t in enumerate(new_types) if t == "hybrid"])
    for period, offset in _PERIODS:
        if period in keys and _get_int(config, period):
            _set(config, period, 2)
            _set(config, offset, 1)
    rope = config.__dict__.get("rope_parameters")
    if rope == {} and kinds is not None and new_types is not None:  # Cohere Compass: none per kind
        _set(config, "rope_parameters", {str(k): {"rope_type": "default", "rope_theta": 10000.0}
                                         for k in dict.fromkeys(new_types)})
    if _get_int(config, "num_kv_shared_layers"):  # Gemma 3n: later layers reuse earlier ones'
        try:  # keys; with one layer of each kind left no kind has a producer before its users
            getattr(config, "kv_sharing_modes", None)
        except ValueError:
            _set(config, "num_kv_shared_layers", 0)
    sizes = config.__dict__.get("block_sizes")
    if isinstance(sizes, (list, tuple)) and len(sizes) > 1:  # Funnel: layers per pooled block;
        # two blocks of one keep one pooling step (three pool a short text down to one token,
        # where its relative-shift attention breaks)
        _set(config, "block_sizes", [1] * LAYERS)
        if "block_repeats" in keys:
            _set(config, "block_repeats", [1] * LAYERS)
    if "attn_layer_indices" in keys:  # Bamba: None (all Mamba) by default; keep one attention
        _set(config, "attn_layer_indices", [1])
    for key, value in list(config.__dict__.items()):
        if key in _KIND_LISTS or not isinstance(value, list) or len(value) < 4:
            continue
        total = next((v for k in _LAYERS if (v := _get_int(config, k))), None)
        if key.endswith(("_layers", "layer_types", "_per_layer", "_pattern", "block_types")) \
                and total is not None and len(value) > total:
            _set(config, key, value[:total])


def tiny_model(model_type: str, budget: int = PARAM_BUDGET) -> TinyModel:
    """The shrunk default config of ``model_type``, counted on the meta device; ConfigError
    ("model_type") when it cannot be built there or holds more than ``budget`` parameters."""
    import torch

    from engine.probe.memory import count_tensors

    config = shrink_config(default_config(model_type))
    try:
        with torch.device("meta"):
            net = build(config)
    except Exception as exc:
        raise ConfigError("model_type", f"the shrunk config does not build: {_one_line(exc)}"
                          ) from None
    mem = count_tensors(net)
    if mem.parameters > budget:
        raise ConfigError("model_type", f"{mem.parameters:,} parameters after shrinking, over "
                          f"the budget of {budget:,} (the largest: {mem.largest})")
    return TinyModel(config, mem.parameters, mem.largest)


def build(config: Any) -> Any:
    """The model of ``config`` (eager attention): the base model, or for an architecture that
    registers none (TrOCR's decoder) its causal, seq2seq or masked LM."""
    import transformers

    if getattr(config, "architectures", None) is None:  # (transformers iterates it where a
        config.architectures = []  # type has several base models: Funnel's)
    last: Exception | None = None
    for auto in ("AutoModel", "AutoModelForCausalLM", "AutoModelForSeq2SeqLM",
                 "AutoModelForMaskedLM"):
        try:
            return getattr(transformers, auto).from_config(config, attn_implementation="eager")
        except ValueError as exc:
            if "Unrecognized configuration class" not in str(exc):
                raise
            last = exc
    assert last is not None
    raise last


def _one_line(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "…"
