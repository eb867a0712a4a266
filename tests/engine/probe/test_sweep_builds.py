"""Model types the sweep could not build or audit until the shrinker and the loader learned their
configs: a vocabulary with no default (ESM), experts left None beside an expert width (Dots1),
RoPE parameters empty beside per-layer kinds (Cohere Compass), per-layer attributes that the
global config refuses to give (Gemma 4, Dots3: ``AmbiguousGlobalPerLayerAttributeError``), a
hybrid whose default layers are all Mamba (Granite 4 hybrid) or whose kinds are a stored pattern
behind a derived list (Recurrent Gemma): the tiny model keeps one attention layer; sizes under
other names (T5Gemma's ``cross_attention_hidden_size``, Kimi Linear's ``num_experts_per_token``);
a vocabulary smaller than the sweep's token ids (ESM C: the ids wrap); layers that reuse
earlier layers' keys with no producer left (Gemma 3n: no sharing in the tiny model); sinks
passed to the attention function but applied on the output (Granite SWA: rows that sum to 1 are
read without a sink logit; they read "differs" before).

Each is built as the sweep builds it, audited as declared, and a planted "twice" (q.k divided by
sqrt(d_k) once more) is found in exactly its layer, measured at d_k ** -0.5 times the declared
scale (by hand: the bug's definition, at the layer's own head width).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from engine.probe import sweep as sw
from engine.probe.audit import audit_ids
from engine.probe.loader import info_from_config, wrap_model
from engine.probe.shrink import build, tiny_model

IDS = [int(i) for i in np.random.default_rng(3).integers(5, 60, size=16)]  # (ESM C: 64 tokens)
TYPES = ["esm", "dots1", "cohere_compass_text", "gemma4_text", "gemma4_unified_text",
         "dots3_note_text", "granitemoehybrid", "recurrent_gemma", "t5gemma",
         "kimi_linear", "esmc", "gemma3n_text",
         "granite_swa", "granitemoe_swa"]


@pytest.mark.parametrize("model_type", TYPES)
def test_built_audited_as_declared_and_a_bug_found_in_its_layer(model_type: str) -> None:
    import torch

    torch.manual_seed(0)
    net = build(tiny_model(model_type).config)
    loaded = wrap_model(net, info_from_config(net.config, model_type))
    sw.sharpen(loaded, sw.QK_STD, 1)
    res = audit_ids(loaded, IDS)
    assert res.n_layers >= 1 and res.mismatched_layers() == [], [s.mismatch for s in res.sites]
    last = res.n_layers - 1
    bugged = audit_ids(loaded, IDS, {last: "twice"})
    assert bugged.mismatched_layers() == [last], [s.mismatch for s in bugged.sites]
    ratio = bugged.d_k_at(last) ** -0.5
    assert f"measured {ratio:.4g} x the declared scale" in bugged.sites[last].mismatch
