"""The sweep of every transformers model type: the text rule, the shrinker, the classes, and the
committed table in docs/architectures.md (rerun in chunks: each chunk rebuilds and audits its
model types and compares each class with the table's row)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from engine.errors import Cancelled, ConfigError
from engine.probe import sweep as sw
from engine.probe.shrink import PARAM_BUDGET, default_config, shrink_config, tiny_model

DOC = Path(__file__).resolve().parents[3] / "docs" / "architectures.md"
CHUNKS = 8


def _table() -> dict[str, str]:
    return sw.parse(DOC.read_text(encoding="utf-8"))


# -- the text rule (expected values from what each architecture is, not from the code) ---------

@pytest.mark.parametrize("model_type, text", [
    ("bert", True), ("llama", True), ("t5", True), ("bart", True), ("mamba", True),
    ("gemma3_text", True), ("vit", False), ("whisper", False), ("llava", False),
    ("wav2vec2", False), ("clip", False), ("audioflamingo3", False)])
def test_text_rule(model_type, text):
    assert sw.is_text(model_type) is text


# -- the shrinker -----------------------------------------------------------------------------

@pytest.mark.parametrize("model_type", ["llama", "qwen2", "gemma2", "mistral", "bert", "gpt2"])
def test_shrunk_config_keeps_the_attention_constraints(model_type):
    cfg = shrink_config(default_config(model_type))
    heads = getattr(cfg, "num_attention_heads", None) or cfg.n_head
    hidden = getattr(cfg, "hidden_size", None) or cfg.n_embd
    head_dim = getattr(cfg, "head_dim", None) or hidden // heads
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    assert heads == 4 and head_dim == 8 and hidden == 32
    assert heads % kv == 0
    # grouped-query defaults stay grouped (Mistral 7B: 32 q / 8 kv heads, Gemma 2: 8 / 4);
    # the others have as many key heads as query heads (Llama 2 7B, Qwen2's defaults: 32 / 32)
    assert kv == (2 if model_type in ("gemma2", "mistral") else 4)
    layers = getattr(cfg, "num_hidden_layers", None) or cfg.n_layer
    assert layers == 2


def test_other_head_widths_keep_their_ratio():
    """DeepSeek-V3: q/k nope 128, rope 64, v 128 beside its 7168/128 = 56... head width; the
    rope part stays half the nope part whatever the scale."""
    cfg = shrink_config(default_config("deepseek_v3"))
    assert cfg.qk_rope_head_dim * 2 == cfg.qk_nope_head_dim
    assert cfg.v_head_dim == cfg.qk_nope_head_dim


def test_a_hybrid_keeps_one_layer_of_each_kind():
    cfg = shrink_config(default_config("jamba"))  # attention every 8th layer from 4 by default
    layers = cfg.num_hidden_layers
    attn = [i for i in range(layers)
            if i % cfg.attn_layer_period == cfg.attn_layer_offset]
    assert layers == 2 and attn == [1]


def test_funnel_keeps_one_pooling_step():
    """Funnel's three blocks of 4 layers pool a short text to one token, where its relative
    shift breaks (transformers itself fails on 4 tokens); two blocks of one keep one pooling."""
    cfg = shrink_config(default_config("funnel"))
    assert list(cfg.block_sizes) == [1, 1] and list(cfg.block_repeats) == [1, 1]
    assert tiny_model("funnel").parameters < PARAM_BUDGET


def test_the_budget_is_checked_on_the_meta_device():
    tiny = tiny_model("llama")
    # by hand: embeddings 128 x 32; per layer q,k,v,o 4 x 32 x 32 (kv heads 4 of width 8 = 32),
    # MLP 3 x 32 x 64, two norms 2 x 32; a final norm 32
    per_layer = 4 * 32 * 32 + 3 * 32 * 64 + 2 * 32
    assert tiny.parameters == 128 * 32 + 2 * per_layer + 32
    with pytest.raises(ConfigError, match="over the budget of 1,000"):
        tiny_model("llama", budget=1000)
    assert tiny.parameters < PARAM_BUDGET


def test_an_unknown_model_type_is_refused():
    with pytest.raises(ConfigError, match="not registered"):
        default_config("no-such-architecture")


# -- classes --------------------------------------------------------------------------------

def test_known_classes():
    """Ground truth by architecture: BERT uses the interface and the 2017 rule; Mamba has no
    attention; RWKV mixes tokens by a recurrence, no softmax over q.k (its module's class name
    says attention: the refusal must not read "outside the interface"); ViT is no text model."""
    rows = {r.model_type: r for r in sw.sweep(["bert", "mamba", "rwkv", "vit"])}
    assert rows["bert"].klass == sw.AS_DECLARED
    assert rows["mamba"].klass == sw.REFUSED and rows["mamba"].why == "no attention"
    assert rows["rwkv"].klass == sw.REFUSED and rows["rwkv"].why.startswith("no softmax")
    assert rows["vit"].klass == sw.NOT_TEXT


def test_the_sweep_stops_when_cancelled():
    with pytest.raises(Cancelled):
        list(sw.sweep(["bert", "gpt2"], cancelled=lambda: True))


def test_summary_counts_by_hand():
    rows = [sw.SweepRow("a", sw.AS_DECLARED), sw.SweepRow("b", sw.DIFFERS),
            sw.SweepRow("c", sw.REFUSED), sw.SweepRow("d", sw.NOT_TEXT)]
    text = sw.summary(rows)
    assert text.startswith("3 text model types of 4 registered: 1 as declared, 1 differs, "
                           "1 refused, 0 audit failed, 0 not built; audited 2 of 3 (67 %)")
    table = sw.markdown(rows)
    assert sw.parse(f"{sw.BEGIN}\n{table}\n{sw.END}") == {"a": sw.AS_DECLARED, "b": sw.DIFFERS,
                                                         "c": sw.REFUSED}


# -- the committed table ----------------------------------------------------------------------

def test_the_table_lists_every_text_model_type_and_its_counts():
    table = _table()
    assert set(table) == set(sw.text_model_types()), (
        "docs/architectures.md's sweep table is stale: run "
        "python -m engine.probe.sweep --write docs/architectures.md")
    assert set(table.values()) <= set(sw.CLASSES) - {sw.NOT_TEXT}
    doc = DOC.read_text(encoding="utf-8")
    summary = doc[doc.index(sw.BEGIN):].splitlines()[1]
    n = len(table)
    audited = sum(1 for k in table.values() if k in sw.AUDITED)
    assert summary.startswith(f"{n} text model types of ")
    for klass in sw.CLASSES[:-1]:
        assert f"{sum(1 for k in table.values() if k == klass)} {klass}" in summary
    assert f"audited {audited} of {n} ({100 * audited / n:.0f} %)" in summary
    assert audited / n >= sw.AUDITED_FLOOR
    differs = [mt for mt, k in table.items() if k == sw.DIFFERS]
    assert all(mt in sw.EXPLAINED for mt in differs), differs


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_the_sweep_reproduces_the_table(chunk):
    """Each text model type, rebuilt tiny and audited, falls in the class the doc says, and a
    type that differs from its declaration carries an explanation."""
    table = _table()
    types = sw.text_model_types()[chunk::CHUNKS]
    assert types
    got = {r.model_type: r for r in sw.sweep(types)}
    wrong = {mt: (table.get(mt), r.klass, r.why) for mt, r in got.items()
             if table.get(mt) != r.klass
             and not (mt in sw.ROUNDING_LEVEL and {table.get(mt), r.klass} <= set(sw.AUDITED))}
    assert not wrong, ("docs/architectures.md's sweep table differs from the sweep (run python "
                       f"-m engine.probe.sweep --write docs/architectures.md): {wrong}")
    assert all(mt in sw.EXPLAINED for mt, r in got.items() if r.klass == sw.DIFFERS)
