"""The GGUF audit's metadata rows on hand-made metadata, configs and source fits (no model): each
row passes when the file agrees with the source and is flagged when a value is off by a small
factor, its band bracketed from both sides; expected factors and texts are worked out by hand
from llama.cpp's rules (see test_llama_cpp.py) and the source's numbers given here."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from engine.errors import Cancelled, ConfigError
from engine.probe.port.gguf_audit import NOTE, MetaRow, compare_meta
from engine.probe.port.gguf_meta import GgufMeta

LN40 = math.log(40.0)


def _meta(arch: str, **values) -> GgufMeta:
    return GgufMeta(Path("x.gguf"), arch, {k.replace("__", "."): v for k, v in values.items()}, {})


def _source(measured, tol, d_k: int = 64):
    """A source audit's per-layer fits: measured s and its log tolerance."""
    tol = np.broadcast_to(tol, np.shape(measured))
    return SimpleNamespace(d_k=d_k, layer_fits=[
        SimpleNamespace(scale=np.array([m]), tol_log=np.array([t])) for m, t in zip(measured, tol)])


def _row(rows, key) -> MetaRow:
    return next(r for r in rows if r.key.startswith(key))


def _findings(rows) -> list[str]:
    return [r.finding for r in rows if r.finding]


LLAMA = dict(attention__key_length=64)  # kq_scale 1/8


# ---- the attention scale: llama.cpp's against the one the source audit measures per layer ----

def test_the_scale_band_is_the_source_fits_own_on_both_sides() -> None:
    """tol_log 0.05: a layer measured exp(+-0.049) off llama.cpp's 1/8 agrees, exp(0.051) does
    not (whichever side), and only that layer is named."""
    meta = _meta("llama", **LLAMA)
    inside = compare_meta(meta, None, _source([0.125 * math.exp(-0.049),
                                               0.125 * math.exp(0.049)], 0.05))
    assert _findings(inside) == []
    assert _row(inside, "attention scale").factor == pytest.approx(1.0, abs=1e-12)
    for off in (0.051, -0.051):
        rows = compare_meta(meta, None, _source([0.125, 0.125 * math.exp(off)], 0.05))
        row = _row(rows, "attention scale")
        assert row.finding.endswith("in layers 1"), off
        # median over two layers: the mean of the two log ratios, 0 and -off
        assert row.factor == pytest.approx(math.exp(-off / 2), rel=1e-12)


def test_a_layer_exactly_at_its_band_edge_agrees() -> None:
    """|log(s / measured)| equal to tol_log is inside the band (the band is closed)."""
    measured = 0.125 * 1.07
    gap = float(np.abs(np.log(0.125 / np.array([measured])))[0])
    rows = compare_meta(_meta("llama", **LLAMA), None, _source([measured], gap))
    assert _findings(rows) == []
    rows = compare_meta(_meta("llama", **LLAMA), None, _source([measured], np.nextafter(gap, 0)))
    assert len(_findings(rows)) == 1


def test_the_factor_is_the_median_over_layers_and_the_text_names_it() -> None:
    """Three layers at 1, 1.05 and 1.2 x 1/8 (tol 0.01): layers 1 and 2 are off; the factor is the
    median ratio 1/1.05 (the mean would be 1/1.082)."""
    rows = compare_meta(_meta("llama", **LLAMA), None, _source(
        [0.125, 0.125 * 1.05, 0.125 * 1.2], 0.01))
    row = _row(rows, "attention scale")
    assert row.factor == pytest.approx(1 / 1.05, rel=1e-12)
    assert row.file == "1 x 1/sqrt(d_k) (1/sqrt(key_length 64))"
    assert row.source == "1.05 x 1/sqrt(d_k) (measured)"
    assert row.effect == "llama.cpp's kq_scale"
    assert row.finding == ("attention scale: llama.cpp applies 1/sqrt(key_length 64) = 1 x "
                           "1/sqrt(d_k), the source 1.05 x 1/sqrt(d_k) (measured): logits x0.9524 "
                           "in layers 1, 2")


def test_every_layer_off_says_so_and_an_unidentified_layer_is_never_flagged() -> None:
    meta = _meta("llama", **LLAMA)
    row = _row(compare_meta(meta, None, _source([0.125 * 1.1] * 2, 0.01)), "attention scale")
    assert row.finding.endswith(": logits x0.9091 in every layer")
    # tol_log inf (the layer's scale is not identifiable): however far off, not a finding
    row = _row(compare_meta(meta, None, _source([0.125 * 1.1] * 2, [math.inf, 0.01])),
               "attention scale")
    assert row.finding.endswith("in layers 1")
    row = _row(compare_meta(meta, None, _source([0.125 * 3] * 2, math.inf)), "attention scale")
    assert row.finding == "" and row.factor == pytest.approx(1 / 3)


def test_a_source_with_other_head_width_is_the_key_length_finding() -> None:
    rows = compare_meta(_meta("llama", **LLAMA), None, _source([0.125], 0.01, d_k=128))
    row = rows[0]
    assert (row.key, row.file, row.source) == ("attention.key_length", "64", "128")
    assert row.effect == "1/sqrt(key_length 64)"
    assert row.factor == pytest.approx(math.sqrt(2))
    assert row.finding == ("llama.attention.key_length: the file has 64, the source's heads are "
                           "128 wide")


def test_yarn_on_every_dimension_is_the_magnitude_squared_on_the_scale() -> None:
    """Qwen2 YaRN x4: cos/sin x m = 1 + 0.1 ln 4 on q and k, so the logits carry m^2 / 8; a source
    measured at m^2 / 8 agrees, one at 1/8 (no YaRN magnitude) is x m^2 off."""
    m = 1 + 0.1 * math.log(4)
    meta = _meta("qwen2", attention__key_length=64, rope__scaling__type="yarn",
                 rope__scaling__factor=4.0)
    row = _row(compare_meta(meta, None, _source([m * m / 8] * 2, 0.01)), "attention scale")
    assert row.finding == "" and row.factor == pytest.approx(1.0, rel=1e-9)
    assert row.file == (f"{m * m:.6g} x 1/sqrt(d_k) (1/sqrt(key_length 64) x rotary cos/sin "
                        f"x{m:.4g} (YaRN x4)^2)")
    row = _row(compare_meta(meta, None, _source([1 / 8] * 2, 0.01)), "attention scale")
    assert row.factor == pytest.approx(m * m, rel=1e-9) and "every layer" in row.finding
    # without a source: the file's side alone
    row = compare_meta(meta, None, None)[0]
    assert (row.key, row.source, row.effect, row.finding) == ("attention scale", "", "", "")
    assert math.isnan(row.factor) and row.file.startswith(f"{m * m:.6g} x 1/sqrt(d_k)")


def test_a_plain_file_without_source_has_no_rope_suffix() -> None:
    row = compare_meta(_meta("llama", **LLAMA), None, None)[0]
    assert row.file == "1 x 1/sqrt(d_k) (1/sqrt(key_length 64))"


# ---- the rotary magnitude where only part of a head rotates (DeepSeek) ----

DS = dict(attention__key_length=192, rope__dimension_count=64, rope__scaling__type="yarn",
          rope__scaling__factor=40.0)


def _ds_rotary(config, log_mul: float | None = 0.1) -> MetaRow:
    extra = {} if log_mul is None else {"rope__scaling__yarn_log_multiplier": log_mul}
    return _row(compare_meta(_meta("deepseek2", **DS, **extra), config, None), "rotary magnitude")


def _cfg(rope: dict | None = None, **attrs):
    return SimpleNamespace(rope_parameters=rope, **attrs)


def test_rotary_row_as_declared_and_without_the_log_multiplier() -> None:
    """With yarn_log_multiplier 0.1 llama.cpp's cos/sin carry 1; DeepSeek-V3's source (mscale =
    mscale_all_dim = 1) too. Without it they carry 1 + 0.1 ln 40: the rotary part x1.874."""
    v3 = {"rope_type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 1.0}
    row = _ds_rotary(_cfg(v3))
    assert row.key == "rotary magnitude (64 of 192 dims)"
    assert (row.file, row.source, row.effect) == ("rotary cos/sin x1 (YaRN x40)",
                                                   "rotary cos/sin x1", "rotary cos/sin")
    assert row.finding == "" and row.factor == pytest.approx(1.0, rel=1e-9)
    bad = _ds_rotary(_cfg(v3), log_mul=None)
    assert bad.factor == pytest.approx((1 + 0.1 * LN40) ** 2, rel=1e-9)
    assert bad.finding == ("deepseek2.rope.scaling: llama.cpp's rotary cos/sin x1.369 (YaRN x40), "
                           "the source's x1: the rotary part of the logits (64 of 192 dims) x1.874")
    # a full-rotary file has no such row; no config: the file's side alone
    assert not any(r.key.startswith("rotary") for r in compare_meta(
        _meta("deepseek2", attention__key_length=64, rope__scaling__type="yarn",
              rope__scaling__factor=40.0), _cfg(v3), None))
    row = _ds_rotary(None)
    assert (row.file, row.source, row.effect, row.finding) == ("rotary cos/sin x1 (YaRN x40)",
                                                               "", "", "")
    assert math.isnan(row.factor)


@pytest.mark.parametrize("rel, flagged", [(2e-5, True), (-2e-5, True), (5e-6, False),
                                          (-5e-6, False)])
def test_the_rotary_band_is_same_rel_on_both_sides(rel, flagged) -> None:
    """The file's cos/sin carry 1; a source attention_factor of 1/sqrt(1 + rel) makes the factor
    1 + rel: flagged beyond 1e-5 either way, not within it."""
    cfg = _cfg({"rope_type": "yarn", "factor": 40.0, "attention_factor": (1 + rel) ** -0.5})
    row = _ds_rotary(cfg)
    assert row.factor == pytest.approx(1 + rel, rel=1e-12)
    assert bool(row.finding) is flagged


def test_a_config_with_rope_scaling_only() -> None:
    """Older configs have no rope_parameters attribute at all."""
    row = _ds_rotary(SimpleNamespace(rope_scaling={"rope_type": "yarn", "factor": 40.0}))
    assert row.factor == pytest.approx((1 + 0.1 * LN40) ** -2, rel=1e-12)
    row = _rope("yarn", 4.0)
    rows = compare_meta(_meta("qwen2", **LLAMA, rope__scaling__type="yarn",
                              rope__scaling__factor=4.0),
                        SimpleNamespace(rope_scaling={"rope_type": "yarn", "factor": 4.0}), None)
    assert _row(rows, "rope.scaling").finding == "" and row.finding


@pytest.mark.parametrize("rope, src", [
    ({"rope_type": "linear", "factor": 4.0}, 1.0),
    ({"rope_type": "yarn", "factor": 40.0}, 1 + 0.1 * LN40),
    ({"type": "yarn", "factor": 40.0}, 1 + 0.1 * LN40),
    ({"rope_type": "yarn", "factor": 40.0, "attention_factor": 0.9}, 0.9),
    ({"rope_type": "yarn", "factor": 40.0, "attention_factor": None}, 1 + 0.1 * LN40),
    ({"rope_type": "yarn", "factor": 40.0, "mscale": 0.707, "mscale_all_dim": 1.0},
     (1 + 0.0707 * LN40) / (1 + 0.1 * LN40)),
    ({"rope_type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 0.5},
     (1 + 0.1 * LN40) / (1 + 0.05 * LN40)),
    ({"rope_type": "yarn", "factor": 40.0, "mscale_all_dim": 1.0}, 1 + 0.1 * LN40),
    ({"rope_type": "yarn", "factor": 40.0, "mscale": 0.707}, 1 + 0.1 * LN40),
    ({"rope_type": "yarn"}, 1.0),
    ({"rope_type": "yarn", "factor": 0.5}, 1.0),
])
def test_the_source_rotary_magnitude_as_transformers_computes_it(rope, src) -> None:
    """transformers' yarn attention_factor: given, else get_mscale(f, mscale) /
    get_mscale(f, mscale_all_dim) when both are set, else 0.1 ln f + 1 (1 for f <= 1)."""
    row = _ds_rotary(_cfg(rope))
    assert row.factor == pytest.approx(src**-2, rel=1e-12)
    assert row.source == f"rotary cos/sin x{src:.4g}"
    # read from rope_scaling where rope_parameters is absent
    old = _ds_rotary(SimpleNamespace(rope_parameters=None, rope_scaling=rope))
    assert old.factor == pytest.approx(src**-2, rel=1e-12)


# ---- the soft-caps llama.cpp applies against the source's ----

def _caps(meta, config):
    rows = compare_meta(meta, config, None)
    return _row(rows, "attn_logit"), _row(rows, "final_logit")


def test_gemma2_default_caps_against_the_source() -> None:
    g = _meta("gemma2", attention__key_length=8)
    attn, final = _caps(g, _cfg(attn_logit_softcapping=50.0, final_logit_softcapping=30.0))
    assert (attn.file, attn.source, attn.finding) == ("absent", "50", "")
    assert attn.effect == "caps the attention logits at 50 (llama.cpp's default: the file has no key)"
    assert (final.source, final.finding) == ("30", "")
    assert final.effect == "caps the output logits at 30 (llama.cpp's default: the file has no key)"
    assert math.isnan(attn.factor)
    # a source that does not cap (None or 0)
    for off in (None, 0.0):
        attn, final = _caps(g, _cfg(attn_logit_softcapping=off, final_logit_softcapping=30.0))
        assert attn.source == "absent" and final.finding == ""
        assert attn.finding == ("gemma2.attn_logit_softcapping: llama.cpp caps the attention "
                                "logits at 50 (llama.cpp's default: the file has no key), the "
                                "source does not")
    # without a config: the file's side only
    attn, final = _caps(_meta("gemma2", attention__key_length=8, attn_logit_softcapping=40.0),
                        None)
    assert (attn.file, attn.source, attn.finding, final.finding) == ("40", "", "", "")


@pytest.mark.parametrize("rel, flagged", [(2e-5, True), (-2e-5, True), (5e-6, False),
                                          (-5e-6, False)])
def test_the_cap_band_is_same_rel_on_both_sides(rel, flagged) -> None:
    g = _meta("gemma2", attention__key_length=8, final_logit_softcapping=20.0)
    attn, final = _caps(g, _cfg(attn_logit_softcapping=50.0 * (1 + rel),
                                final_logit_softcapping=20.0 * (1 - rel)))
    assert bool(attn.finding) is flagged and bool(final.finding) is flagged
    if flagged:
        assert attn.finding == (f"gemma2.attn_logit_softcapping: llama.cpp caps the attention "
                                f"logits at 50 (llama.cpp's default: the file has no key), the "
                                f"source at {50.0 * (1 + rel):g} (x{1 / (1 + rel):.4g})")
        assert final.finding.startswith("gemma2.final_logit_softcapping: llama.cpp caps the "
                                        "output logits at 20 (the file's key), the source at ")


def test_a_source_cap_llama_cpp_does_not_apply() -> None:
    ll = _meta("llama", attention__key_length=8, attn_logit_softcapping=50.0)
    attn, final = _caps(ll, _cfg(attn_logit_softcapping=50.0))
    why = ("not applied: llama.cpp's llama graph has no soft-cap (attn_logit_softcapping in the "
           "file is not read)")
    assert attn.effect == why and attn.file == "50"
    assert attn.finding == f"llama.attn_logit_softcapping: the source caps the attention logits at 50, llama.cpp does not ({why})"
    assert final.finding == "" and final.source == "absent"


# ---- head counts, sliding window, rope scaling ----

def test_head_counts_agree_and_disagree() -> None:
    meta = _meta("llama", attention__key_length=16, attention__head_count=4,
                 attention__head_count_kv=2)
    rows = compare_meta(meta, _cfg(num_attention_heads=4, num_key_value_heads=2), None)
    heads, kv = _row(rows, "attention.head_count"), _row(rows, "attention.head_count_kv")
    assert (heads.file, heads.source, heads.finding, kv.file, kv.source, kv.finding) == (
        "4", "4", "", "2", "2", "")
    assert heads.effect == "" and math.isnan(heads.factor)
    rows = compare_meta(meta, _cfg(num_attention_heads=8, num_key_value_heads=2), None)
    assert _findings(rows) == ["llama.attention.head_count: the file has 4, the source "
                               "num_attention_heads 8"]
    # a config without num_key_value_heads has as many key heads as query heads
    rows = compare_meta(meta, _cfg(num_attention_heads=4), None)
    assert _findings(rows) == ["llama.attention.head_count_kv: the file has 2, the source "
                               "num_key_value_heads 4"]
    assert _row(rows, "attention.head_count_kv").source == "4"
    # per-layer lists: the first entry; no config: file side only
    rows = compare_meta(_meta("llama", attention__key_length=16, attention__head_count=[4, 4],
                              attention__head_count_kv=[2, 2]), None, None)
    assert _row(rows, "attention.head_count_kv").file == "2" and _findings(rows) == []
    assert _row(rows, "attention.head_count").source == ""


def test_sliding_window() -> None:
    def found(meta_window, **cfg):
        extra = {} if meta_window is None else {"attention__sliding_window": meta_window}
        rows = compare_meta(_meta("llama", **LLAMA, **extra), _cfg(**cfg), None)
        return _row(rows, "attention.sliding_window"), _findings(rows)

    row, f = found(4096, sliding_window=4096)
    assert (row.file, row.source, f) == ("4096", "4096", [])
    row, f = found(None, sliding_window=4096)
    assert f == ["llama.attention.sliding_window: the file has absent, the source sliding_window "
                 "4096"]
    _, f = found(2048, sliding_window=4096)
    assert f == ["llama.attention.sliding_window: the file has 2048, the source sliding_window "
                 "4096"]
    # Qwen2 keeps a window it does not use
    row, f = found(None, sliding_window=4096, use_sliding_window=False)
    assert f == [] and row.source == "absent"
    _, f = found(None, sliding_window=4096, use_sliding_window=True)
    assert len(f) == 1
    # the source without a window: the file's (which llama.cpp would apply) is not compared
    _, f = found(4096, sliding_window=None)
    assert f == []


def _rope(meta_type=None, meta_factor=None, rope=None):
    extra = {}
    if meta_type is not None:
        extra["rope__scaling__type"] = meta_type
    if meta_factor is not None:
        extra["rope__scaling__factor"] = meta_factor
    rows = compare_meta(_meta("qwen2", **LLAMA, **extra), _cfg(rope), None)
    return _row(rows, "rope.scaling")


def test_rope_scaling_rows() -> None:
    row = _rope()
    assert (row.file, row.source, row.effect, row.finding) == ("none", "none", "rotary scaling", "")
    row = _rope("yarn", 4.0, {"rope_type": "yarn", "factor": 4.0})
    assert (row.file, row.source, row.finding) == ("yarn x4", "yarn x4", "")
    row = _rope("linear", 4.0, {"rope_type": "yarn", "factor": 4.0})
    assert row.finding == "qwen2.rope.scaling: the file has linear x4, the source yarn x4"
    row = _rope(None, None, {"rope_type": "yarn", "factor": 4.0})
    assert row.finding == "qwen2.rope.scaling: the file has none, the source yarn x4"
    row = _rope("yarn", 4.0, None)
    assert row.finding == "qwen2.rope.scaling: the file has yarn x4, the source none"
    # old configs: rope_scaling with "type"; a "default" type is none whatever its factor
    old = SimpleNamespace(rope_parameters=None, rope_scaling={"type": "linear", "factor": 2.0})
    row = _row(compare_meta(_meta("qwen2", **LLAMA, rope__scaling__type="linear",
                                  rope__scaling__factor=2.0), old, None), "rope.scaling")
    assert (row.source, row.finding) == ("linear x2", "")
    row = _rope(None, None, {"rope_type": "default", "factor": 8.0})
    assert (row.source, row.finding) == ("none", "")
    # "none" on both sides: factors left in either are not compared
    row = _rope("none", 4.0, {"rope_type": "default", "factor": 8.0})
    assert (row.file, row.source, row.finding) == ("none x4", "none", "")
    assert math.isnan(row.factor)
    row = _rope("", None, {"rope_type": None})
    assert (row.file, row.source, row.finding) == ("none", "none", "")
    # a factor missing on either side is not compared
    assert _rope("yarn", None, {"rope_type": "yarn", "factor": 4.0}).finding == ""
    assert _rope("yarn", 4.0, {"rope_type": "yarn"}).finding == ""
    assert _rope("yarn", None, None).file == "yarn"
    row = compare_meta(_meta("qwen2", **LLAMA, rope__scaling__type="yarn",
                             rope__scaling__factor=4.0), None, None)[-1]
    assert (row.key, row.file, row.source, row.effect, row.finding) == (
        "rope.scaling", "yarn x4", "", "", "")
    assert math.isnan(row.factor)


@pytest.mark.parametrize("rel, flagged", [(2e-6, True), (-2e-6, True), (5e-7, False),
                                          (-5e-7, False)])
def test_the_rope_factor_band_on_both_sides(rel, flagged) -> None:
    row = _rope("yarn", 4.0, {"rope_type": "yarn", "factor": 4.0 * (1 + rel)})
    assert bool(row.finding) is flagged


def test_the_rows_in_order() -> None:
    keys = [r.key for r in compare_meta(_meta("deepseek2", **DS), _cfg(), None)]
    assert keys == ["attention scale", "rotary magnitude (64 of 192 dims)",
                    "attn_logit_softcapping", "final_logit_softcapping", "attention.head_count",
                    "attention.head_count_kv", "attention.sliding_window", "rope.scaling"]


# ---- audit_gguf: the file alone, and its plumbing with the source's audit stubbed ----

def _write(path: Path, arch: str = "llama", **keys) -> Path:
    pytest.importorskip("gguf")
    from tests.engine.probe.port.test_gguf_meta import _write as write

    return write(path, arch, **keys)


def test_the_file_alone(tmp_path) -> None:
    from engine.probe.port.gguf_audit import audit_gguf
    from engine.probe.port.onnx_audit import PortConfig

    path = _write(tmp_path / "a.gguf", attention__key_length=16, attention__head_count=2,
                  attention__head_count_kv=2)
    snaps = list(audit_gguf(PortConfig(str(path))))
    assert [(s.stage, s.fraction, s.done) for s in snaps] == [("reading the file", 0.0, False),
                                                               ("done", 1.0, True)]
    res = snaps[-1].result
    assert (res.kind, res.path, res.source_name, res.layers, res.sites, res.source) == (
        "gguf", str(path), None, [], (), None)
    assert (res.n_tokens, res.tokens, res.id_source, res.findings, res.timings) == (
        0, (), "", (), {})
    assert res.meta == {"architecture": "llama", "weights": {}} and res.note == NOTE
    assert res.metadata[0].file == "1 x 1/sqrt(d_k) (1/sqrt(key_length 16))"


def test_a_file_without_head_width_is_refused_before_any_model_loads(tmp_path, monkeypatch) -> None:
    from engine.probe import loader
    from engine.probe.port.gguf_audit import audit_gguf
    from engine.probe.port.onnx_audit import PortConfig

    monkeypatch.setattr(loader, "load_model", lambda *a: pytest.fail("loaded a model"))
    path = _write(tmp_path / "a.gguf", attention__head_count=2)
    with pytest.raises(ConfigError, match="key_length"):
        list(audit_gguf(PortConfig(str(path), reference=str(tmp_path))))


class _Snap(SimpleNamespace):
    pass


def _stubbed(monkeypatch, weights_findings=("w",)):
    """audit_tokens and weights_audit stubbed: what audit_gguf does with their results."""
    from engine.probe import audit
    from engine.probe.port import gguf_weights

    seen = {}
    source = _source([0.25, 0.25], 0.01, d_k=16)  # llama.cpp's 1/4: as the file says

    def tokens(loaded, ids, toks, bugs, cancelled):
        seen["tokens"] = (ids, toks, bugs)
        seen["tokens_args"] = (loaded, cancelled)
        yield _Snap(stage="forward pass", fraction=0.5, result=None)
        yield _Snap(stage="done", fraction=1.0, result=source)

    def weights(meta, loaded, ids, src, cancelled):
        seen["weights"] = (ids, src)
        seen["weights_args"] = (meta.arch, meta.path.name, loaded, cancelled)
        return ["row"], list(weights_findings), {"compared": True}

    monkeypatch.setattr(audit, "audit_tokens", tokens)
    monkeypatch.setattr(gguf_weights, "weights_audit", weights)
    return seen, source


def _loaded(tokenizer=None, heads: int = 2):
    config = SimpleNamespace(num_attention_heads=heads, rope_parameters=None)
    return SimpleNamespace(model=SimpleNamespace(config=config), tokenizer=tokenizer,
                           info=SimpleNamespace(name="tiny"))


def test_with_a_source_the_stages_findings_and_token_ids(tmp_path, monkeypatch) -> None:
    from engine.probe.port.gguf_audit import audit_gguf
    from engine.probe.port.onnx_audit import PortConfig

    seen, source = _stubbed(monkeypatch)
    path = _write(tmp_path / "a.gguf", attention__key_length=16, attention__head_count=4)
    model, never = _loaded(), lambda: False
    snaps = list(audit_gguf(PortConfig(str(path)), model, never, ids=[3, 1, 2]))
    assert seen["tokens_args"] == (model, never)
    assert seen["weights_args"] == ("llama", "a.gguf", model, never)
    assert [(s.stage, s.fraction) for s in snaps] == [
        ("reading the file", 0.0), ("source: forward pass", pytest.approx(0.3)),
        ("source: done", pytest.approx(0.5)), ("the file's weights in the source architecture", 0.6),
        ("done", 1.0)]
    res = snaps[-1].result
    assert seen["tokens"] == ((3, 1, 2), (), {}) and seen["weights"] == ((3, 1, 2), source)
    # the metadata's finding first, then the weights'
    assert res.findings == ("llama.attention.head_count: the file has 4, the source "
                            "num_attention_heads 2", "w")
    assert (res.layers, res.source, res.n_tokens, res.id_source, res.source_name) == (
        ["row"], source, 3, "token ids given", "tiny")
    assert res.meta == {"architecture": "llama", "weights": {"compared": True}}
    assert _row(res.metadata, "attention scale").factor == pytest.approx(1.0)


def test_the_source_model_is_loaded_from_the_reference(tmp_path, monkeypatch) -> None:
    from engine.probe import loader
    from engine.probe.port.gguf_audit import audit_gguf
    from engine.probe.port.onnx_audit import PortConfig

    seen, _ = _stubbed(monkeypatch)
    model = _loaded(heads=4)
    calls = []
    monkeypatch.setattr(loader, "load_model", lambda *a: calls.append(a) or model)
    path = _write(tmp_path / "a.gguf", attention__key_length=16, attention__head_count=4)
    snaps = list(audit_gguf(PortConfig(str(path), reference=str(tmp_path), memory_budget=3.0),
                            ids=[1, 2]))
    assert calls == [(str(tmp_path), 3.0)]
    assert [(s.stage, s.fraction) for s in snaps[:2]] == [("reading the file", 0.0),
                                                         ("loading the source model", 0.05)]
    assert seen["tokens_args"][0] is model and snaps[-1].result.source_name == "tiny"
    # a model given is not loaded again
    list(audit_gguf(PortConfig(str(path), reference=str(tmp_path)), model, ids=[1, 2]))
    assert len(calls) == 1


def test_a_missing_file_is_refused_under_the_gguf_field(tmp_path) -> None:
    from engine.probe.port.gguf_audit import audit_gguf
    from engine.probe.port.onnx_audit import PortConfig

    with pytest.raises(ConfigError) as err:
        list(audit_gguf(PortConfig(str(tmp_path / "none.gguf"))))
    assert err.value.field == "gguf" and "is not a file" in err.value.message


def test_cancel_before_the_weights(tmp_path, monkeypatch) -> None:
    from engine.probe.port.gguf_audit import audit_gguf
    from engine.probe.port.onnx_audit import PortConfig

    seen, _ = _stubbed(monkeypatch)
    path = _write(tmp_path / "a.gguf", attention__key_length=16)
    with pytest.raises(Cancelled):
        list(audit_gguf(PortConfig(str(path)), _loaded(), lambda: True, ids=[1, 2]))
    assert "weights" not in seen


def test_token_ids_from_the_reference_tokenizer(tmp_path, monkeypatch) -> None:
    from engine.probe import loader, texts
    from engine.probe.port.gguf_audit import audit_gguf
    from engine.probe.port.onnx_audit import PortConfig

    seen, _ = _stubbed(monkeypatch, weights_findings=())
    calls = []

    def tokenize(loaded, text, max_tokens):
        assert loaded is model
        calls.append((text, max_tokens))
        return SimpleNamespace(ids=(5, 6), tokens=("a", "b"))

    monkeypatch.setattr(loader, "tokenize", tokenize)
    monkeypatch.setattr(texts, "default_text", lambda: "the default")
    path = _write(tmp_path / "a.gguf", attention__key_length=16)
    model = _loaded(tokenizer=object())
    res = list(audit_gguf(PortConfig(str(path), text="hello", max_tokens=7), model))[-1].result
    assert calls == [("hello", 7)] and seen["tokens"] == ((5, 6), ("a", "b"), {})
    assert (res.tokens, res.id_source, res.n_tokens) == (("a", "b"), "the reference's tokenizer", 2)
    list(audit_gguf(PortConfig(str(path)), model))
    assert calls[-1] == ("the default", None)
    with pytest.raises(ConfigError) as err:
        list(audit_gguf(PortConfig(str(path)), _loaded()))
    assert (err.value.field, err.value.message) == ("reference", "the source model has no tokenizer")
