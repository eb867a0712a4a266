"""Decoder and seq2seq families that compute attention inline (XGLM, MVP, TrOCR, LED's decoder,
FSMT, OpenAI GPT, GPT-NeoX-Japanese, CPM-Ant) through their adapters: audited at their
documented scale, the model's output untouched, and a planted bug found in exactly its layer.

Main refused all eight ("computes attention inline"). The expected scale is written here by hand
from each model's code: q.k divided by sqrt(head_dim) (XGLM, MVP, TrOCR, LED, FSMT: q_proj's output
times head_dim ** -0.5; OpenAI GPT: ``w / sqrt(v.size(-1))``; GPT-NeoX-Japanese:
``alpha = 1 / sqrt(head_size)``; CPM-Ant: ``/ sqrt(dim_head)``), so s * sqrt(d_k) = 1 at the
shrinker's head width 8 (XGLM's ``attention_heads`` and CPM-Ant's ``dim_head`` shrunk too);
"twice" makes it 1/d_k: s * sqrt(d_k) = 8 ** -0.5.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from engine.probe import sweep as sw
from engine.probe.audit import audit_ids
from engine.probe.capture import last_hidden, run_forward
from engine.probe.loader import info_from_config, wrap_model
from engine.probe.shrink import build, tiny_model

IDS = [int(i) for i in np.random.default_rng(3).integers(5, 100, size=16)]
#: model type -> (attention layers the audit reads, of the modules it lists)
TYPES = {"xglm": (2, 2), "mvp": (6, 6), "trocr": (2, 4), "led": (4, 6), "fsmt": (6, 6),
         "openai-gpt": (2, 2), "gpt_neox_japanese": (2, 2), "cpmant": (2, 2)}


def _load(model_type: str):
    import torch

    torch.manual_seed(0)
    net = build(tiny_model(model_type).config)
    loaded = wrap_model(net, info_from_config(net.config, model_type))
    sw.sharpen(loaded, sw.QK_STD, 1)
    return loaded


@pytest.fixture(scope="module", params=sorted(TYPES))
def loaded(request):
    return request.param, _load(request.param)


def test_audited_as_declared_and_output_unchanged(loaded) -> None:
    import torch

    model_type, model = loaded
    res = audit_ids(model, IDS)
    n, m = TYPES[model_type]
    assert (res.n_layers, res.n_attention) == (n, m)
    assert res.mismatched_layers() == [] and res.unknown_layers() == [], \
        [s.mismatch for s in res.sites]
    assert {s.adapter for s in model.sites} == {model_type}
    np.testing.assert_allclose(res.layer_scale_x_sqrt_dk(), 1.0, rtol=1e-3)
    plain = last_hidden(run_forward(model.model, IDS))
    with model.tap.active(lambda call: None):
        tapped = last_hidden(run_forward(model.model, IDS))
    assert torch.equal(plain, tapped)


def test_a_planted_bug_is_found_in_exactly_its_layer(loaded) -> None:
    """"twice" (a factor on q, through the adapter's q hook) in the first layer, "after_softmax"
    (a factor on the weights) in the last; the layers between stay as declared."""
    _model_type, model = loaded
    last = model.n_sites - 1
    res = audit_ids(model, IDS, {0: "twice", last: "after_softmax"})
    assert res.mismatched_layers() == [0, last], [s.mismatch for s in res.sites]
    assert res.d_k == 8
    assert res.layer_scale_x_sqrt_dk()[0] == pytest.approx(8**-0.5, rel=1e-3)
    assert "after the softmax" in res.sites[last].mismatch
