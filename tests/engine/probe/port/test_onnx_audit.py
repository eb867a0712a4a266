"""The ONNX port audit: tiny zoo models exported with torch.onnx.export read as their source in
every layer; a scale constant edited in one layer, and a fused operator's wrong ``scale``
attribute, are caught; a graph without attention is refused naming what was looked for."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")

from engine.errors import ConfigError  # noqa: E402
from engine.probe.port.onnx_audit import PortConfig, audit_onnx  # noqa: E402
from engine.probe.port.roundtrip import ROUND_TRIP, export_onnx, zoo_model  # noqa: E402
from engine.probe.zoo import ZOO, zoo_ids  # noqa: E402
from engine.snapshots import last_result  # noqa: E402


def _audit(path, loaded=None, ids=None):
    return last_result(audit_onnx(PortConfig(str(path)), loaded, ids=ids), "the port audit")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{label: (loaded source, onnx path)} for the round-trip models."""
    out = {}
    folder = tmp_path_factory.mktemp("onnx")
    for i, (label, name, changes) in enumerate(ROUND_TRIP):
        loaded = zoo_model(name, changes)
        out[label] = (loaded, name, export_onnx(loaded, zoo_ids(), folder / f"m{i}.onnx"))
    return out


@pytest.mark.parametrize("label", [r[0] for r in ROUND_TRIP])
def test_an_export_reads_as_its_source_in_every_layer(exported, label) -> None:
    loaded, name, path = exported[label]
    res = _audit(path, loaded, zoo_ids())
    entry = next(e for e in ZOO if e.name == name)
    assert res.findings == ()
    assert len(res.layers) == loaded.n_sites
    for row in res.layers:
        assert row.state == "as the source", row
        # the zoo's documented scale (from the papers and configs), not the code under test
        want = entry.documented_at(row.layer if name != "T5" else 0)
        assert row.port_x == pytest.approx(want, rel=1e-4)
        assert row.ratio == pytest.approx(1.0, rel=1e-5)
    if name == "T5":  # encoder, decoder self- and cross-attention, in the source's call order
        assert [r.block for r in res.layers] == [s.block for s in res.source.sites]
    if "GQA" in label:
        assert all("RoPE" in r.features for r in res.layers)


def _edit_scale(path, out, layer: int, factor: float) -> None:
    """Multiply the scale constant on ``layer``'s scores (the Mul between the score MatMul and
    the Softmax) by ``factor``: the graph's own constant, written as a new initializer."""
    from onnx import numpy_helper

    from engine.probe.port.onnx_graph import Graph, find_sites

    model = onnx.load(str(path))
    site = find_sites(model)[layer]
    g = Graph(model)
    node = g.producer[site.node.input[0]]
    while node.op_type != "Mul" or not any(g.is_const(i) for i in node.input):
        node = g.producer[next(i for i in node.input if i and not g.is_const(i))]
    j = next(i for i, n in enumerate(node.input) if g.is_const(n))
    value = g.scalar(node.input[j])
    name = f"planted_scale_{layer}"
    model.graph.initializer.append(numpy_helper.from_array(
        np.array(value * factor, dtype=np.float32), name))
    node.input[j] = name
    onnx.save(model, str(out))


@pytest.mark.parametrize("factor", [2.0, 1.001])
def test_an_edited_scale_constant_is_flagged_in_that_layer_only(exported, tmp_path,
                                                                factor) -> None:
    loaded, _name, path = exported["Llama (GQA 4q/2kv, RoPE)"]
    planted = tmp_path / "planted.onnx"
    _edit_scale(path, planted, 1, factor)
    res = _audit(planted, loaded, zoo_ids())
    assert [r.layer for r in res.layers if r.state == "MISMATCH"] == [1]
    assert res.layers[0].state == "as the source"
    assert res.layers[1].ratio == pytest.approx(factor, rel=1e-5)
    assert len(res.findings) == 1 and res.findings[0].startswith("layer 1:")
    assert f"x{factor:.4g}" in res.findings[0]


def _fused_graph(path, op: str, scale: float | None, heads: int = 4, d: int = 8, vocab: int = 50,
                 n: int = 16, seed: int = 0) -> None:
    """input_ids -> embedding -> q, k, v projections -> one fused attention operator."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    width = heads * d
    inits = [numpy_helper.from_array(rng.normal(size=(vocab, width)).astype(np.float32), "emb")]
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["x"])]
    for p in "qkv":
        inits.append(numpy_helper.from_array(
            (rng.normal(size=(width, width)) * 0.6).astype(np.float32), f"w{p}"))
        nodes.append(helper.make_node("MatMul", ["x", f"w{p}"], [p]))
    attrs = {} if scale is None else {"scale": scale}
    if op == "Attention":
        nodes.append(helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=heads,
                                      kv_num_heads=heads, is_causal=1, **attrs))
        opsets = [helper.make_opsetid("", 23)]
    else:
        nodes.append(helper.make_node(op, ["q", "k", "v"], ["y"], domain="com.microsoft",
                                      num_heads=heads, **attrs))
        opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    graph = helper.make_graph(
        nodes, "fused", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=opsets), str(path))


@pytest.mark.parametrize("op", ["Attention", "MultiHeadAttention"])
def test_a_fused_operator_is_measured_not_read(tmp_path, op) -> None:
    d = 8
    good, bad = tmp_path / "good.onnx", tmp_path / "bad.onnx"
    _fused_graph(good, op, None, d=d)  # the operator's default: 1/sqrt(d)
    _fused_graph(bad, op, 1.0, d=d)  # scale attribute 1: the logits are not scaled
    ok = _audit(good)
    assert [r.port_verdict for r in ok.layers] == ["1/sqrt(d_k)"]
    assert ok.layers[0].port_x == pytest.approx(1.0, rel=1e-4)
    wrong = _audit(bad)
    assert wrong.layers[0].port_verdict == "unscaled"
    assert wrong.layers[0].port_x == pytest.approx(math.sqrt(d), rel=1e-4)
    assert wrong.layers[0].declared_source == "scale attribute 1"


def test_a_fused_operator_against_its_declared_attribute(tmp_path) -> None:
    """A scale of 0.7/sqrt(d) is measured as 0.7 x 1/sqrt(d_k) (no known scale), and 0.5/sqrt(d)
    as 1/sqrt(d_model) (4 heads of 8: d_model 32), whatever the attribute is called."""
    for factor, verdict in ((0.7, "other: s * sqrt(d_k) = 0.7"), (0.5, "scaled by 1/sqrt(d_model)")):
        path = tmp_path / f"x{factor}.onnx"
        _fused_graph(path, "Attention", factor / math.sqrt(8))
        res = _audit(path)
        assert res.layers[0].port_x == pytest.approx(factor, rel=1e-4)
        assert res.layers[0].port_verdict == verdict


def test_a_graph_without_attention_is_refused_naming_what_was_looked_for(tmp_path) -> None:
    from onnx import TensorProto, helper, numpy_helper

    emb = numpy_helper.from_array(np.ones((10, 4), dtype=np.float32), "emb")
    w = numpy_helper.from_array(np.ones((4, 3), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["emb", "input_ids"], ["x"]),
         helper.make_node("MatMul", ["x", "w"], ["z"]),
         helper.make_node("Softmax", ["z"], ["y"], axis=-1)], "classifier",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [emb, w])
    path = tmp_path / "noattn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    with pytest.raises(ConfigError) as err:
        _audit(path)
    msg = str(err.value)
    assert "found no attention" in msg and "MatMul(q, k^T)" in msg and "MultiHeadAttention" in msg
    assert "\n" not in msg
