"""The ONNX port audit: tiny zoo models exported with torch.onnx.export read as their source in
every layer; a scale constant edited in one layer is caught in that layer; a graph without
attention is refused naming what was looked for. (Fused operators: test_onnx_fused.py.)"""

from __future__ import annotations

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


def _insert_mul(model, tensor: str, value: np.ndarray, tag: str) -> None:
    """Every consumer of ``tensor`` reads ``tensor * value`` instead: a Mul node placed right
    after the tensor's producer (the graph stays topologically sorted)."""
    from onnx import helper, numpy_helper

    out, const = f"{tensor}_{tag}", f"planted_{tag}"
    for node in model.graph.node:
        for j, name in enumerate(node.input):
            if name == tensor:
                node.input[j] = out
    model.graph.initializer.append(numpy_helper.from_array(np.asarray(value, np.float32), const))
    at = next(j for j, n in enumerate(model.graph.node) if tensor in n.output)
    model.graph.node.insert(at + 1, helper.make_node("Mul", [tensor, const], [out]))


def test_one_head_scaled_is_flagged_in_that_head_only(exported, tmp_path) -> None:
    """Head 2 of layer 1 gets its scores doubled (a per-head constant on the score product): the
    per-head comparison names that head and the factor, the other heads and layer 0 agree."""
    from engine.probe.port.onnx_graph import Graph, find_sites

    loaded, _name, path = exported["Llama (GQA 4q/2kv, RoPE)"]
    model = onnx.load(str(path))
    site = find_sites(model)[1]
    product = next(n for n in Graph(model).consumers[site.q]
                   if n.op_type == "MatMul" and list(n.input) == [site.q, site.k])
    heads = np.ones((1, 4, 1, 1))
    heads[0, 2] = 2.0
    _insert_mul(model, product.output[0], heads, "head2")
    planted = tmp_path / "head2.onnx"
    onnx.save(model, str(planted))
    res = _audit(planted, loaded, zoo_ids())
    assert res.findings == ("layer 1: the port applies x2 the source's scale (heads 2)",)
    assert res.layers[0].state == "as the source"


def test_a_factor_on_q_before_the_product_is_measured_not_the_constant(exported,
                                                                        tmp_path) -> None:
    """q doubled between its projection and the score product (a pre-scaled q the constant on the
    scores does not show): layer 1 is measured at x2 while its graph constant still reads
    1/sqrt(d_k)."""
    from engine.probe.port.onnx_graph import find_sites

    loaded, _name, path = exported["Llama (GQA 4q/2kv, RoPE)"]
    model = onnx.load(str(path))
    site = find_sites(model)[1]
    assert site.proj_q, "the export's q projection is found"
    _insert_mul(model, site.proj_q[0], np.array(2.0), "q2")
    planted = tmp_path / "q2.onnx"
    onnx.save(model, str(planted))
    res = _audit(planted, loaded, zoo_ids())
    assert res.layers[1].port_x == pytest.approx(2.0, rel=1e-4)
    assert res.layers[1].declared_x == pytest.approx(1.0, rel=1e-4)
    assert res.findings == ("layer 1: the port applies x2 the source's scale (all heads)",)


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


@pytest.mark.slow
def test_a_dynamo_export_reads_as_its_source(tmp_path) -> None:
    """torch.onnx.export(dynamo=True) of a Llama with GQA and RoPE (the scale as a constant Mul
    after the score MatMul, RoPE through Slice/Neg/Concat): every layer as the source, 1/sqrt(d_k)
    as the zoo documents it (slow: about 25 s of CPU in torch.export and the ONNX optimizer)."""
    loaded = zoo_model("Llama", {"num_key_value_heads": 2})
    path = export_onnx(loaded, zoo_ids(), tmp_path / "dynamo.onnx", dynamo=True)
    res = _audit(path, loaded, zoo_ids())
    assert res.findings == ()
    assert [r.state for r in res.layers] == ["as the source"] * loaded.n_sites
    for row in res.layers:
        assert row.port_x == pytest.approx(1.0, rel=1e-4)
        assert "RoPE" in row.features and row.kind == "unfused"
