"""Fused attention operators, hand-built with onnx.helper and run by ONNX Runtime: the scale is
measured from the operator's inputs and output, not read from its ``scale`` attribute. For each
operator (ONNX Attention, com.microsoft MultiHeadAttention, GroupQueryAttention, Attention) a
graph with the default scale reads 1/sqrt(d_k) and one whose attribute is 1 reads unscaled; a
GroupQueryAttention that rotates q and k inside (do_rotary) is refused in one line."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from engine.errors import ConfigError  # noqa: E402
from engine.probe.port.onnx_audit import PortConfig, audit_onnx  # noqa: E402
from engine.snapshots import last_result  # noqa: E402

HEADS, KV_HEADS, D, VOCAB, N = 4, 2, 8, 50, 16
MS = "com.microsoft"


def _audit(path):
    return last_result(audit_onnx(PortConfig(str(path))), "the port audit")


def _weights(rng, rows: int, cols: int, name: str):
    from onnx import numpy_helper

    return numpy_helper.from_array((rng.normal(size=(rows, cols)) * 0.6).astype(np.float32), name)


def _fused_graph(path, op: str, scale: float | None, seed: int = 0, q_factor: float = 1.0,
                 bias: float = 0.0, **extra) -> None:
    """input_ids -> embedding -> q, k, v projections (or the packed weights of
    com.microsoft.Attention) -> one fused attention operator; ``q_factor`` multiplies q between
    its projection and the operator."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    width = HEADS * D
    kv = KV_HEADS * D if op == "GroupQueryAttention" else width
    inits = [numpy_helper.from_array(rng.normal(size=(VOCAB, width)).astype(np.float32), "emb")]
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["x"])]
    if op != "ms.Attention":
        for p, cols in (("q", width), ("k", kv), ("v", kv)):
            inits.append(_weights(rng, width, cols, f"w{p}"))
            nodes.append(helper.make_node("MatMul", ["x", f"w{p}"], [p + "0" if p == "q" else p]))
        inits.append(numpy_helper.from_array(np.array(q_factor, np.float32), "qf"))
        nodes.append(helper.make_node("Mul", ["q0", "qf"], ["q"]))
    attrs = {**({} if scale is None else {"scale": scale}), **extra}
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid(MS, 1)]
    if op == "Attention":
        nodes.append(helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=HEADS,
                                      kv_num_heads=HEADS, is_causal=1, **attrs))
        opsets = [helper.make_opsetid("", 23)]
    elif op == "GroupQueryAttention":
        inits += [numpy_helper.from_array(np.array([N - 1], np.int32), "seqlens_k"),
                  numpy_helper.from_array(np.array(N, np.int32), "total_len")]
        ins = ["q", "k", "v", "", "", "seqlens_k", "total_len"]
        if extra.get("do_rotary"):
            half = np.outer(np.arange(N), 1.0 / 10000 ** (np.arange(D // 2) / (D // 2)))
            inits += [numpy_helper.from_array(np.cos(half).astype(np.float32), "cos"),
                      numpy_helper.from_array(np.sin(half).astype(np.float32), "sin")]
            ins += ["cos", "sin"]
        nodes.append(helper.make_node("GroupQueryAttention", ins, ["y", "pk", "pv"], domain=MS,
                                      num_heads=HEADS, kv_num_heads=KV_HEADS, **attrs))
    elif op == "ms.Attention":  # q|k|v = x @ W + b inside the operator
        inits += [_weights(rng, width, 3 * width, "wqkv"),
                  numpy_helper.from_array((rng.normal(size=3 * width) * bias).astype(np.float32),
                                          "bqkv")]
        nodes.append(helper.make_node("Attention", ["x", "wqkv", "bqkv"], ["y"], domain=MS,
                                      num_heads=HEADS, unidirectional=1, **attrs))
    else:
        nodes.append(helper.make_node(op, ["q", "k", "v"], ["y"], domain=MS, num_heads=HEADS,
                                      **attrs))
    graph = helper.make_graph(
        nodes, "fused", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=opsets), str(path))


KINDS = {"Attention": "Attention (ONNX opset 23)",
         "MultiHeadAttention": "com.microsoft.MultiHeadAttention",
         "GroupQueryAttention": "com.microsoft.GroupQueryAttention",
         "ms.Attention": "com.microsoft.Attention"}


@pytest.mark.parametrize("op", list(KINDS))
def test_a_fused_operator_is_measured_not_read(tmp_path, op) -> None:
    good, bad = tmp_path / "good.onnx", tmp_path / "bad.onnx"
    _fused_graph(good, op, None)  # the operator's default: 1/sqrt(d)
    _fused_graph(bad, op, 1.0)  # scale attribute 1: the logits are not scaled
    ok = _audit(good)
    assert [r.kind for r in ok.layers] == [KINDS[op]]
    assert [r.port_verdict for r in ok.layers] == ["1/sqrt(d_k)"]
    assert ok.layers[0].port_x == pytest.approx(1.0, rel=1e-4)
    assert ok.layers[0].declared_source == "scale attribute absent: 1/sqrt(d)"
    wrong = _audit(bad)
    assert wrong.layers[0].port_verdict == "unscaled"
    assert wrong.layers[0].port_x == pytest.approx(math.sqrt(D), rel=1e-4)
    assert wrong.layers[0].declared_source == "scale attribute 1"
    if op == "GroupQueryAttention":  # 4 query heads share 2 key heads, causally
        assert ok.layers[0].features == ("causal", "GQA 4q/2kv")
    # every head's verdict, one joint fit of the layer beside the per-head ones; q and k are
    # the projections' (com.microsoft.Attention's are inside it)
    for res, want in ((ok, "1/sqrt(d_k)"), (wrong, "unscaled")):
        fit = res.sites[0].fit
        assert fit.head_verdicts == [want] * HEADS
        assert fit.head.scale.shape == (HEADS,) and fit.layer.scale.shape == (1,)
        assert "q/k not a projection's output" not in res.layers[0].features
    assert ok.layers[0].features[0] == ("bidirectional" if op == "MultiHeadAttention"
                                        else "causal")


def test_a_fused_operator_against_its_declared_attribute(tmp_path) -> None:
    """A scale of 0.7/sqrt(d) is measured as 0.7 x 1/sqrt(d_k) (no known scale), and 0.5/sqrt(d)
    as 1/sqrt(d_model) (4 heads of 8: d_model 32), whatever the attribute is called."""
    for factor, verdict in ((0.7, "other: s * sqrt(d_k) = 0.7"), (0.5, "scaled by 1/sqrt(d_model)")):
        path = tmp_path / f"x{factor}.onnx"
        _fused_graph(path, "Attention", factor / math.sqrt(D))
        res = _audit(path)
        assert res.layers[0].port_x == pytest.approx(factor, rel=1e-4)
        assert res.layers[0].port_verdict == verdict


@pytest.mark.parametrize("op", ["Attention", "MultiHeadAttention"])
def test_a_factor_on_q_before_the_operator_is_measured(tmp_path, op) -> None:
    """q doubled after its projection, the operator's scale attribute absent: the runtime applies
    2/sqrt(d) to the projections' q.k, and that is what is measured; the attribute says 1."""
    path = tmp_path / "q2.onnx"
    _fused_graph(path, op, None, q_factor=2.0)
    res = _audit(path)
    row = res.layers[0]
    assert row.port_x == pytest.approx(2.0, rel=1e-4)
    # every head's own fit too (the per-head comparison with a source reads these)
    np.testing.assert_allclose(res.sites[0].fit.head.scale * math.sqrt(D), 2.0, rtol=1e-4)
    assert row.declared_x == pytest.approx(1.0, rel=1e-6)
    assert row.port_verdict == "other: s * sqrt(d_k) = 2"


def test_group_query_attention_with_rotary_inside_is_refused_in_one_line(tmp_path) -> None:
    path = tmp_path / "rot.onnx"
    _fused_graph(path, "GroupQueryAttention", None, do_rotary=1)
    with pytest.raises(ConfigError) as err:
        _audit(path)
    msg = str(err.value)
    assert "GroupQueryAttention rotates q and k inside the operator (do_rotary=1)" in msg
    assert "\n" not in msg


def test_a_packed_attention_is_measured_with_its_bias(tmp_path) -> None:
    """q|k|v = x W + b inside com.microsoft.Attention, b of size 1: the audit adds the graph's
    bias as the operator does (without it q and k are not the operator's) and reads 1/sqrt(d)."""
    path = tmp_path / "bias.onnx"
    _fused_graph(path, "ms.Attention", None, bias=1.0)
    row = _audit(path).layers[0]
    assert row.port_x == pytest.approx(1.0, rel=1e-4) and row.port_verdict == "1/sqrt(d_k)"
