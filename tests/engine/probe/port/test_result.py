"""The port audit's rows: hand-made fitted sites (and a hand-made source), so each column is read
off the inputs: the scale and the declared scale as x 1/sqrt(d_k), the band as a relative
tolerance, the block, the comparison with the source only where the layer counts agree."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from engine.probe.port.result import PortAudit, _tol_rel, build_layers
from engine.probe.scale_fit import NOT_AUDITABLE
from tests.engine.probe.port.test_compare import _fit

TOL = math.log(1.5)


def _site(scale, d_k=16, heads=4, tol=TOL, declared=None, cross=False, causal=False,
          verdict="v", name="n"):
    fit = SimpleNamespace(head=_fit([scale] * heads, tol), layer=_fit(scale, tol),
                          layer_verdict=verdict)
    return SimpleNamespace(name=name, kind="unfused", d_k=d_k, fit=fit, declared=declared,
                           declared_source="graph constants", features=("causal", "RoPE"),
                           cross=cross, causal=causal)


def _source(scales, d_k=16, heads=4, blocks=None, verdict="1/sqrt(d_k)"):
    return SimpleNamespace(
        n_layers=len(scales), d_k=d_k, head_fits=[_fit([s] * heads) for s in scales],
        layer_fits=[_fit(s) for s in scales], layer_verdicts=[verdict] * len(scales),
        sites=[SimpleNamespace(block=b) for b in blocks] if blocks else [])


def test_the_relative_band_is_expm1_of_the_log_band() -> None:
    assert _tol_rel(math.log(1.5)) == pytest.approx(0.5, rel=1e-12)
    assert _tol_rel(0.0) == 0.0
    assert _tol_rel(math.inf) == math.inf
    assert _tol_rel(math.nan) == math.inf


def test_rows_without_a_source() -> None:
    """d_k 16: s 0.25 is x1 (1/sqrt(16)), 0.3 is x1.2; a declared 0.125 is x0.5."""
    sites = [_site(0.25, declared=0.125, verdict="1/sqrt(d_k)", name="a"),
             _site(0.3, causal=True, name="b"), _site(0.25, cross=True, causal=True, name="c"),
             _site(0.25, d_k=64, tol=math.inf, name="d")]
    rows, findings = build_layers(sites, None)
    assert findings == []
    assert [r.layer for r in rows] == [0, 1, 2, 3]
    assert [r.name for r in rows] == ["a", "b", "c", "d"]
    assert [r.block for r in rows] == ["encoder", "decoder", "cross", "encoder"]
    assert rows[0].port_x == pytest.approx(1.0, rel=1e-12)
    assert rows[1].port_x == pytest.approx(1.2, rel=1e-12)
    assert rows[3].port_x == pytest.approx(2.0, rel=1e-12)  # 0.25 * sqrt(64)
    assert rows[0].port_tol_rel == pytest.approx(0.5, rel=1e-12)
    assert rows[3].port_tol_rel == math.inf
    assert rows[0].declared_x == pytest.approx(0.5, rel=1e-12)
    assert math.isnan(rows[1].declared_x)
    assert rows[0].port_verdict == "1/sqrt(d_k)" and rows[0].declared_source == "graph constants"
    assert rows[0].features == ("causal", "RoPE") and rows[0].kind == "unfused"
    for r in rows:
        assert math.isnan(r.source_x) and math.isnan(r.ratio)
        assert r.state == "" and r.finding == "" and r.source_verdict == ""


def test_rows_beside_a_source_of_as_many_layers() -> None:
    """Layer 1 of the port applies sqrt(2) the source's 1/sqrt(d_k): flagged there only, with
    the factor; the source's blocks replace the port's."""
    s = 0.25
    sites = [_site(s, tol=0.01), _site(s * math.sqrt(2), tol=0.01)]
    source = _source([s, s], blocks=["decoder", "cross"])
    rows, findings = build_layers(sites, source)
    assert [r.state for r in rows] == ["as the source", "MISMATCH"]
    assert [r.block for r in rows] == ["decoder", "cross"]
    assert rows[0].source_x == pytest.approx(1.0, rel=1e-12)
    assert rows[0].source_verdict == "1/sqrt(d_k)"
    assert rows[1].ratio == pytest.approx(math.sqrt(2), rel=1e-12)
    assert rows[0].ratio == pytest.approx(1.0, rel=1e-12)
    want = "layer 1: the port applies x1.414 the source's scale (all heads)"
    assert rows[1].finding == want and rows[0].finding == ""
    assert findings == [want]


def test_the_source_scale_column_uses_the_sources_width() -> None:
    """A port of width 16 against a source of width 64: another width is a mismatch, and the
    source's column is its own s * sqrt(64)."""
    rows, findings = build_layers([_site(0.25)], _source([0.125], d_k=64))
    assert rows[0].source_x == pytest.approx(1.0, rel=1e-12)
    assert rows[0].state == "MISMATCH"
    assert findings == ["layer 0: the port has 4 heads of width 16, the source 4 of width 64"]


def test_a_source_without_sites_keeps_the_ports_blocks() -> None:
    rows, _ = build_layers([_site(0.25, causal=True)], _source([0.25]))
    assert rows[0].block == "decoder" and rows[0].state == "as the source"


def test_a_layer_not_auditable_on_both_sides_is_no_finding() -> None:
    site = _site(0.25)
    site.fit = SimpleNamespace(head=_fit([0.25] * 4, ident=False),
                               layer=_fit(0.25, ident=False), layer_verdict=NOT_AUDITABLE)
    rows, findings = build_layers([site], _source([0.5]))
    assert rows[0].state == NOT_AUDITABLE and findings == []


def test_other_layer_counts_are_a_finding_and_no_comparison() -> None:
    rows, findings = build_layers([_site(0.25)] * 3, _source([0.25] * 2, blocks=["a", "b"]))
    assert findings == ["the port has 3 attention layers, the source 2: layers are not compared"]
    assert [r.state for r in rows] == [""] * 3
    assert all(math.isnan(r.source_x) for r in rows)
    assert [r.block for r in rows] == ["encoder"] * 3


def test_series_are_the_columns_per_layer() -> None:
    rows, _ = build_layers([_site(0.25), _site(0.5)], _source([0.25, 0.25]))
    audit = PortAudit(kind="onnx", path="p", source_name="s", layers=rows, sites=(), source=None,
                      n_tokens=2, tokens=(), id_source="", findings=(), timings={})
    got = audit.series()
    np.testing.assert_allclose(got["port"], [1.0, 2.0], rtol=1e-12)
    np.testing.assert_allclose(got["source"], [1.0, 1.0], rtol=1e-12)
    assert audit.meta == {} and audit.note == "" and audit.metadata == ()
