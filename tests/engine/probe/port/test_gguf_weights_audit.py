"""The GGUF weights audit on hand-made stand-ins (no transformers model, no file): a tiny torch net
with llama's tensor names as the source, the file's tensors as a hand-made dict, the port's and
the source's fits chosen here. Every expected value is read off the inputs: F16's bound at a zero
source element is 2^-25 alone, so a stored element k * 2^-25 is k times the bound; the rows'
scales are s * sqrt(16) = 4 s."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from engine.errors import Cancelled
from engine.probe.port import gguf_weights
from engine.probe.port.gguf_meta import GgufMeta
from engine.probe.port.gguf_weights import gguf_state, weights_audit
from engine.probe.port.result import PortLayer
from engine.probe.scale_fit import ScaleFit

torch = pytest.importorskip("torch")
pytest.importorskip("gguf")
pytest.importorskip("transformers")

UNIT = 2.0**-25  # F16's bound at a source element 0: half its smallest subnormal step
TYPES = {"blk.0.attn_q.weight": "F16", "blk.0.attn_k.weight": "F16",
         "blk.1.attn_q.weight": "Q4_K",  # no bound; blk.1.attn_k is not in the file
         "blk.2.attn_q.weight": "F16", "blk.2.attn_k.weight": "F16",
         "blk.3.attn_q.weight": "F16", "blk.3.attn_k.weight": "Q8_0",
         "token_embd.weight": "F16"}  # blk.4.attn_q.weight: mapped but without a type


class _Attn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q_proj = torch.nn.Linear(32, 2, bias=False)
        self.k_proj = torch.nn.Linear(32, 2, bias=False)


class _Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.self_attn = _Attn()


class _Net(torch.nn.Module):
    """Five layers of q and k (2 x 32, zeros) and a 4 x 32 embedding of ones."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(4, 32)
        self.layers = torch.nn.ModuleList(_Layer() for _ in range(5))
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.fill_(1.0 if name.startswith("embed") else 0.0)


def _at(value: float, shape=(2, 32)) -> torch.Tensor:
    """Zeros but one element."""
    t = torch.zeros(shape)
    t[1, 5] = value
    return t


def _file_state() -> dict[str, torch.Tensor]:
    """The file's tensors, layers out of order (3, 2, 0, 1, 4)."""
    return {
        "layers.3.self_attn.k_proj.weight": torch.zeros(3, 32),  # another shape: inf
        "layers.3.self_attn.q_proj.weight": torch.zeros(2, 32),
        "layers.2.self_attn.q_proj.weight": _at(1.5 * UNIT),  # 1.5 x its bound
        "layers.2.self_attn.k_proj.weight": torch.zeros(2, 32),
        "layers.0.self_attn.q_proj.weight": torch.zeros(2, 32),
        "layers.0.self_attn.k_proj.weight": _at(UNIT),  # exactly at its bound
        "layers.1.self_attn.q_proj.weight": _at(0.5),  # Q4_K: no bound
        "layers.4.self_attn.q_proj.weight": _at(0.25),  # no type in the file: "?"
        "layers.9.self_attn.q_proj.weight": torch.zeros(2, 32),  # not in the source
        "embed_tokens.weight": torch.ones(5, 32),  # another shape, not attention
    }


def _fit(scale, tol=0.01) -> ScaleFit:
    s = np.atleast_1d(np.asarray(scale, dtype=np.float64))
    h = s.size
    return ScaleFit(scale=s, misfit=np.zeros(h), curvature=np.ones(h), tol_log=np.full(h, tol),
                    residual_max_abs=np.zeros(h), residual_probe=np.zeros((h, 2)),
                    worse_probe=np.ones((h, 2)), identifiable=np.ones(h, dtype=bool),
                    weight_sum=np.ones(h), weight_sum_tol=1e-6, rows=8)


def _audit(layer_scales, layer_tols, verdicts, declared=(), sites=(), d_k=16):
    """A port's or source's audit: two heads per layer at the layer's scale."""
    return SimpleNamespace(
        n_layers=len(layer_scales), d_k=d_k, declared_scale=np.asarray(declared, dtype=float),
        head_fits=[_fit([s, s]) for s in layer_scales],
        layer_fits=[_fit(s, t) for s, t in zip(layer_scales, layer_tols)],
        layer_verdicts=list(verdicts), sites=tuple(sites))


def _site(i: int) -> SimpleNamespace:
    return SimpleNamespace(name=f"site{i}", block=f"block{i}", declared_source=f"config{i}",
                           features=(f"feature{i}",))


class _Stubs:
    """gguf_state, wrap_model and audit_ids replaced; what each was given."""

    def __init__(self, monkeypatch, port, state=None) -> None:
        import engine.probe.audit as audit
        import engine.probe.loader as loader

        self.state = _file_state() if state is None else state
        self.calls: dict[str, tuple] = {}
        self.port = port

        def fake_state(meta, net):
            self.calls["state"] = (meta, net)
            return self.state

        def fake_wrap(net, info):
            self.calls["wrap"] = (net, info)
            return ("wrapped", net)

        def fake_audit_ids(loaded, ids, cancelled):
            self.calls["audit"] = (loaded, ids, cancelled, cancelled())
            return self.port

        monkeypatch.setattr(gguf_weights, "gguf_state", fake_state)
        monkeypatch.setattr(loader, "wrap_model", fake_wrap)
        monkeypatch.setattr(audit, "audit_ids", fake_audit_ids)


def _meta(arch: str = "llama", types: dict[str, str] = TYPES) -> GgufMeta:
    return GgufMeta(Path("x.gguf"), arch, {"block_count": 5}, dict(types))


def _loaded() -> SimpleNamespace:
    return SimpleNamespace(model=_Net(), info=object())


# the port: 3 layers (the source has 2, so 2 rows); layer 0 as the source, layer 1 at twice its
# scale with a layer band that is not finite
PORT = dict(layer_scales=[0.25, 0.5, 0.25], layer_tols=[0.01, math.inf, 0.01],
            verdicts=["port0", "port1", "port2"], declared=[0.25, 0.125, 0.25])
SOURCE = dict(layer_scales=[0.25, 0.25], layer_tols=[0.02, 0.02], verdicts=["src0", "src1"])


def test_the_weights_findings_rows_and_info(monkeypatch) -> None:
    stubs = _Stubs(monkeypatch, _audit(**PORT, sites=[_site(0), _site(1), _site(2)]))
    meta, loaded, ids = _meta(), _loaded(), [5, 6, 7]
    original = {k: v.clone() for k, v in loaded.model.state_dict().items()}
    rows, findings, info = weights_audit(meta, loaded, ids, _audit(**SOURCE))

    assert stubs.calls["state"][0] is meta and stubs.calls["state"][1] is loaded.model
    # in layer order; layer 0's element at exactly its bound is no finding
    assert findings == [
        "layer 2: the file's layers.2.self_attn.q_proj.weight differs from the source's by 1.5 x "
        "what its F16 storage rounds away",
        "layer 3: the file's layers.3.self_attn.k_proj.weight differs from the source's by inf x "
        "what its Q8_0 storage rounds away",
        "layer 1: the port applies x2 the source's scale (all heads)"]

    assert info["compared"] is True and info["tensors_read"] == 10
    # the seven tensors of the source's names and shapes (not layer 3's k, layer 9's q, the
    # embedding)
    assert info["tensors_loaded"] == 7
    worst = info["largest_diff_over_rounding"]
    assert list(worst) == ["0", "1", "2", "3", "4"]
    assert worst["0"] == 1.0 and worst["2"] == 1.5 and worst["3"] == math.inf
    assert math.isnan(worst["1"]) and math.isnan(worst["4"])
    assert info["not_compared"] == ["?", "Q4_K"]
    assert set(info) == {"compared", "tensors_read", "tensors_loaded",
                         "largest_diff_over_rounding", "not_compared"}

    # the audited net: a copy of the source with the file's tensors of the same shape in it
    net, info_given = stubs.calls["wrap"]
    assert net is not loaded.model and info_given is loaded.info
    got = net.state_dict()
    assert got["layers.2.self_attn.q_proj.weight"][1, 5].item() == 1.5 * UNIT
    assert got["layers.1.self_attn.q_proj.weight"][1, 5].item() == 0.5
    assert got["layers.3.self_attn.k_proj.weight"].shape == (2, 32)  # the source's, kept
    assert torch.equal(got["embed_tokens.weight"], torch.ones(4, 32))
    assert torch.equal(got["layers.1.self_attn.k_proj.weight"], torch.zeros(2, 32))
    # the source model is left as it was
    for k, v in loaded.model.state_dict().items():
        assert torch.equal(v, original[k]), k
    wrapped, ids_given, _, was = stubs.calls["audit"]
    assert wrapped == ("wrapped", net) and ids_given is ids and was is False

    assert [r.layer for r in rows] == [0, 1]
    want = [PortLayer(layer=0, name="site0", block="block0", kind="GGUF weights", port_x=1.0,
                      port_tol_rel=math.exp(0.01) - 1, port_verdict="port0", declared_x=1.0,
                      declared_source="config0", features=("feature0",), source_x=1.0,
                      source_verdict="src0", ratio=1.0, state="as the source", finding=""),
            PortLayer(layer=1, name="site1", block="block1", kind="GGUF weights", port_x=2.0,
                      port_tol_rel=math.inf, port_verdict="port1", declared_x=0.5,
                      declared_source="config1", features=("feature1",), source_x=1.0,
                      source_verdict="src1", ratio=2.0, state="MISMATCH",
                      finding="layer 1: the port applies x2 the source's scale (all heads)")]
    for got_row, want_row in zip(rows, want):
        g, w = dataclasses.asdict(got_row), dataclasses.asdict(want_row)
        assert g.pop("port_tol_rel") == pytest.approx(w.pop("port_tol_rel"), rel=1e-12)
        assert g == w


def test_rows_without_sites_are_named_by_their_index(monkeypatch) -> None:
    """A port without sites (and with fewer layers than the source): its index as the name, no
    block, declared source or features; a layer band that is NaN (a failed fit) reads as no band
    (inf), as an infinite one does."""
    port = _audit(layer_scales=[0.5], layer_tols=[math.nan], verdicts=["p"], declared=[0.25],
                  d_k=4)
    _Stubs(monkeypatch, port)
    source = _audit(layer_scales=[0.5, 0.5], layer_tols=[0.02, 0.02], verdicts=["s", "s"], d_k=4)
    rows, findings, _ = weights_audit(_meta(), _loaded(), [1], source,
                                      cancelled=lambda: False)
    assert len(rows) == 1
    r = rows[0]
    assert (r.layer, r.name, r.block, r.declared_source, r.features) == (0, "0", "", "", ())
    # sqrt(4) = 2
    assert (r.port_x, r.declared_x, r.source_x, r.ratio) == (1.0, 0.5, 1.0, 1.0)
    assert r.port_tol_rel == math.inf
    assert r.state == "as the source" and r.finding == ""
    assert len(findings) == 2  # the two weights findings only


def test_a_cancel_before_the_port_audit_stops_it(monkeypatch) -> None:
    stubs = _Stubs(monkeypatch, _audit(**PORT))
    with pytest.raises(Cancelled):
        weights_audit(_meta(), _loaded(), [1], _audit(**SOURCE), cancelled=lambda: True)
    assert "state" in stubs.calls and "wrap" not in stubs.calls and "audit" not in stubs.calls


def test_the_cancel_flag_reaches_the_port_audit(monkeypatch) -> None:
    stubs = _Stubs(monkeypatch, _audit(**PORT))

    def flag() -> bool:
        return False

    weights_audit(_meta(), _loaded(), [1], _audit(**SOURCE), cancelled=flag)
    assert stubs.calls["audit"][2] is flag


def test_an_architecture_transformers_cannot_read_is_not_compared(monkeypatch) -> None:
    stubs = _Stubs(monkeypatch, _audit(**PORT))
    got = weights_audit(_meta("no-such-arch"), _loaded(), [1], _audit(**SOURCE))
    assert got == ([], [], {"compared": False,
                            "why": "transformers does not read no-such-arch from GGUF"})
    assert stubs.calls == {}


def test_a_file_whose_tensors_all_match_has_no_weights_finding(monkeypatch) -> None:
    """Every tensor as the source's and stored as F16 (ratio 0): only the rows' finding is left;
    every tensor of the source is loaded, so a strict load would pass too."""
    state = {k: v.clone() for k, v in _Net().state_dict().items()}
    _Stubs(monkeypatch, _audit(**PORT), state=state)
    types = {f"blk.{i}.attn_{x}.weight": "F16" for i in range(5) for x in "qk"}
    _, findings, info = weights_audit(_meta(types=types), _loaded(), [1], _audit(**SOURCE))
    assert findings == ["layer 1: the port applies x2 the source's scale (all heads)"]
    assert info["tensors_read"] == info["tensors_loaded"] == 11
    assert set(info["largest_diff_over_rounding"].values()) == {0.0}
    assert info["not_compared"] == []


# ---- gguf_state: transformers' reader with the model's names, quietly ----

def test_gguf_state_reads_the_file_s_tensors_for_the_model_quietly(monkeypatch, capsys) -> None:
    import transformers.modeling_gguf_pytorch_utils as reader
    from transformers.utils import logging as hf_logging

    tensors = {"layers.0.self_attn.q_proj.weight": torch.zeros(2)}
    calls = []

    def fake(path, return_tensors=False, model_to_load=None, torch_dtype=None):
        calls.append((path, return_tensors, model_to_load, torch_dtype))
        print("a progress bar", file=sys.stderr)
        return {"tensors": tensors, "config": {}}

    monkeypatch.setattr(reader, "load_gguf_checkpoint", fake)
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    try:
        net = object()
        meta = GgufMeta(Path("/some/where/x.gguf"), "llama", {}, {})
        with contextlib.redirect_stdout(io.StringIO()) as out:
            got = gguf_state(meta, net)
        assert got is tensors
        assert calls == [("/some/where/x.gguf", True, net, None)]
        assert type(calls[0][0]) is str and calls[0][1] is True
        assert not hf_logging.is_progress_bar_enabled()
        assert capsys.readouterr().err == "" and out.getvalue() == ""
    finally:
        (hf_logging.enable_progress_bar if was else hf_logging.disable_progress_bar)()
