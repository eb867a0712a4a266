"""Finding attention in an ONNX graph, no runtime: small graphs built with onnx.helper, each
made to sit on one side of a rule (a path one node longer than the walk allows, a weight of
three dimensions, a bias of two), so the expected site is known from how the graph was built."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from engine.probe.port.onnx_graph import (  # noqa: E402
    PATH_DEPTH,
    WALK_LIMIT,
    Graph,
    OnnxSite,
    attributes,
    find_sites,
    projections,
)


def _model(nodes, inits=(), inputs=("x",)):
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        list(nodes), "g", [helper.make_tensor_value_info(i, TensorProto.FLOAT, None)
                           for i in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k) for k, v in dict(inits).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _node(op, ins, outs, **kw):
    from onnx import helper

    return helper.make_node(op, list(ins), list(outs), **kw)


def _const(name, **attrs):
    from onnx import helper

    return helper.make_node("Constant", [], [name], **attrs)


def test_scalars_of_initializers_and_constant_nodes() -> None:
    from onnx import helper, numpy_helper

    model = _model([_const("cv", value=numpy_helper.from_array(np.array([0.5], np.float32))),
                    _const("cf", value_float=0.25), _const("ci", value_int=3),
                    _const("c2", value=numpy_helper.from_array(np.ones(2, np.float32))),
                    _const("cs", value_string="a"),
                    _node("Identity", ["x"], ["y"])],
                   {"s": 2.0, "v": [1.0, 2.0], "inf": np.inf, "one": [[4.0]]})
    g = Graph(model)
    assert g.scalar("s") == 2.0 and g.scalar("one") == 4.0
    assert g.scalar("cv") == 0.5 and g.scalar("cf") == 0.25 and g.scalar("ci") == 3.0
    for name in ("v", "inf", "c2", "cs", "x", "nowhere"):
        assert g.scalar(name) is None, name
    assert g.is_const("s") and g.is_const("cf") and not g.is_const("x")
    assert not g.is_const("y")
    assert g.const_shape("v") == (2,) and g.const_shape("one") == (1, 1)
    assert g.const_shape("c2") == (2,) and g.const_shape("cf") is None
    assert g.const_shape("x") is None
    # a one-number weight kept outside the file is not read
    init = model.graph.initializer[0]
    init.data_location = onnx.TensorProto.EXTERNAL
    init.external_data.append(onnx.StringStringEntryProto(key="location", value="w.bin"))
    assert Graph(model).scalar(init.name) is None
    assert helper.get_attribute_value(model.graph.node[1].attribute[0]) == 0.25


def _scores(between, const=None):
    """q, k (graph inputs) -> MatMul -> ``between`` nodes (each "op" or (op, const)) ->
    Softmax."""
    nodes, inits, z = [_node("MatMul", ["q", "k"], ["z0"])], {}, "z0"
    for i, op in enumerate(between):
        op, value = op if isinstance(op, tuple) else (op, None)
        ins = [z]
        if value is not None:
            inits[f"c{i}"] = value
            ins.append(f"c{i}")
        if op == "Where":
            inits[f"c{i}"] = -1e9
            ins = ["cond", z, f"c{i}"]
        nodes.append(_node(op, ins, [f"z{i + 1}"]))
        z = f"z{i + 1}"
    nodes.append(_node("Softmax", [z], ["y"], axis=-1))
    return _model(nodes, inits, inputs=("q", "k", "cond"))


def test_the_walk_from_the_softmax_to_the_product_is_bounded() -> None:
    """PATH_DEPTH - 1 nodes between the product and the Softmax are crossed, PATH_DEPTH not."""
    assert len(find_sites(_scores(["Identity"] * (PATH_DEPTH - 1)))) == 1
    assert find_sites(_scores(["Identity"] * PATH_DEPTH)) == []
    assert len(find_sites(_scores([]))) == 1


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Where", "Tanh", "Cast",
                                "Identity"])
def test_elementwise_ops_are_crossed(op) -> None:
    value = 2.0 if op in ("Add", "Sub", "Mul", "Div") else None
    between = [(op, value)] if value is not None else [op]
    if op == "Cast":
        between = [("Cast", None)]
    model = _scores(between)
    if op == "Cast":
        model.graph.node[1].attribute.append(onnx.helper.make_attribute("to", 1))
    sites = find_sites(model)
    assert len(sites) == 1 and (sites[0].q, sites[0].k) == ("q", "k")
    assert sites[0].kind == "unfused" and sites[0].probs == "y"


@pytest.mark.parametrize("op", ["Relu", "Exp", "MatMul"])
def test_other_ops_on_the_path_are_not_attention(op) -> None:
    """Softmax(Relu(q.k)) is not a scaled q.k; Softmax(x @ W) with W a weight is a classifier."""
    if op == "MatMul":
        model = _model([_node("MatMul", ["x", "w"], ["z"]), _node("Softmax", ["z"], ["y"])],
                       {"w": np.ones((2, 2))})
    else:
        model = _scores([op])
    assert find_sites(model) == []


def test_the_scale_constants_terms_and_masks_on_the_path() -> None:
    """MatMul -> Mul 0.5 -> Div 4 -> Add bias -> Sub pos -> Where -> Softmax: constants 0.5 and
    1/4 (in the walk's order, from the Softmax down), the terms with their signs, the mask kept
    where true; a Mul by a tensor, or by 0, is no constant."""
    model = _model([_node("MatMul", ["q", "k"], ["z0"]),
                    _node("Mul", ["z0", "half"], ["z1"]), _node("Div", ["z1", "four"], ["z2"]),
                    _node("Mul", ["z2", "t"], ["z3"]), _node("Mul", ["zero", "z3"], ["z4"]),
                    _node("Add", ["bias", "z4"], ["z5"]), _node("Sub", ["z5", "pos"], ["z6"]),
                    _node("Sub", ["neg", "z6"], ["z7"]),
                    _node("Where", ["cond", "z7", "big"], ["z8"]),
                    _node("Softmax", ["z8"], ["y"], axis=-1, name="sm")],
                   {"half": 0.5, "four": 4.0, "zero": 0.0, "big": -1e9},
                   inputs=("q", "k", "t", "bias", "pos", "neg", "cond"))
    (site,) = find_sites(model)
    assert site.name == "sm" and site.attrs == {"axis": -1}
    assert site.scale_consts == [0.25, 0.5]
    assert site.terms == [("neg", 1.0), ("pos", -1.0), ("bias", 1.0)]
    assert site.where == [("cond", True)]
    assert site.softcap is None and not site.tanh


def test_the_where_condition_is_not_walked() -> None:
    """Where(q.k > 0 ..., big, z): the path runs through the value, not the condition, and the
    mask keeps where false."""
    model = _model([_node("MatMul", ["q", "k"], ["s"]), _node("MatMul", ["a", "b"], ["c"]),
                    _node("Where", ["c", "big", "s"], ["z"]), _node("Softmax", ["z"], ["y"])],
                   {"big": -1e9}, inputs=("q", "k", "a", "b"))
    (site,) = find_sites(model)
    assert (site.q, site.k) == ("q", "k") and site.where == [("c", False)]


def test_a_soft_cap_is_the_mul_after_the_tanh() -> None:
    """z * 0.125 -> Mul 1/30 -> Tanh -> Mul 30: the cap is 30 (the Mul before the Tanh and the
    scale below it are not)."""
    model = _scores([("Mul", 0.125), ("Mul", 1 / 30), "Tanh", ("Mul", 30.0)])
    (site,) = find_sites(model)
    assert site.tanh and site.softcap == pytest.approx(30.0)
    assert site.scale_consts == pytest.approx([30.0, 1 / 30, 0.125])
    # a cap written as Div after the tanh (no Mul there) is not guessed
    (site,) = find_sites(_scores([("Mul", 0.125), "Tanh", ("Div", 1 / 30)]))
    assert site.tanh and site.softcap is None
    # a negative constant: the cap is its size
    (site,) = find_sites(_scores(["Tanh", ("Mul", -20.0)]))
    assert site.softcap == 20.0
    # two Tanh: the one nearest the Softmax decides
    (site,) = find_sites(_scores(["Tanh", ("Mul", 7.0), "Tanh", ("Mul", 50.0)]))
    assert site.softcap == 50.0


def _fused_model(op, domain, ins, **attrs):
    from onnx import helper

    names = [i for i in ins if i]
    graph_ins = [i for i in dict.fromkeys(names) if i not in ("w",)]
    return _model([helper.make_node(op, list(ins), ["y"], domain=domain, name="att", **attrs)],
                  {"w": np.ones((4, 12))}, inputs=graph_ins)


def test_fused_operators_and_their_inputs() -> None:
    from engine.errors import ConfigError

    (s,) = find_sites(_fused_model("Attention", "", ["q", "k", "v", "m"], scale=0.5))
    assert (s.kind, s.q, s.k, s.v, s.out) == ("Attention (ONNX opset 23)", "q", "k", "v", "y")
    assert s.extra == {"attn_mask": "m"} and s.attrs == {"scale": 0.5} and s.name == "att"
    (s,) = find_sites(_fused_model("Attention", "ai.onnx", ["q", "k", "v"]))
    assert s.kind == "Attention (ONNX opset 23)" and s.extra == {}
    (s,) = find_sites(_fused_model("MultiHeadAttention", "com.microsoft",
                                   ["q", "k", "v", "", "pad", "ab"], num_heads=2))
    assert s.extra == {"key_padding_mask": "pad", "attention_bias": "ab"}
    (s,) = find_sites(_fused_model("GroupQueryAttention", "com.microsoft",
                                   ["q", "k", "v", "", "", "sl", "tl"], num_heads=2,
                                   kv_num_heads=1, do_rotary=0))
    assert s.kind == "com.microsoft.GroupQueryAttention" and s.extra == {"seqlens_k": "sl"}
    with pytest.raises(ConfigError) as err:
        find_sites(_fused_model("GroupQueryAttention", "com.microsoft",
                                ["q", "k", "v", "", "", "sl", "tl"], do_rotary=1))
    assert err.value.field == "onnx" and str(err.value).startswith("onnx: att: ")
    (s,) = find_sites(_fused_model("Attention", "com.microsoft", ["x", "w", "", "mi"],
                                   num_heads=2))
    assert (s.kind, s.q, s.k, s.v) == ("com.microsoft.Attention", "x", "", "")
    assert s.extra == {"weights": "w", "mask_index": "mi"}
    assert s.proj_q == [] and s.proj_k == []
    # an operator of another domain is not attention
    assert find_sites(_fused_model("Attention", "com.example", ["q", "k", "v"])) == []


def test_a_site_without_a_node_name_is_named_by_its_output() -> None:
    model = _scores([])
    assert find_sites(model)[0].name == "y"
    from onnx import helper

    model = _model([helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["out"],
                                     domain="com.microsoft", num_heads=2),
                    _node("Identity", ["out"], ["y"])], inputs=("q", "k", "v"))
    assert find_sites(model)[0].name == "out"


def _projected(path_ops, weight_shape=(4, 4), bias_shape=None, gemm=False, bias_first=False):
    """x -> linear (a weight of ``weight_shape``, a bias) -> ``path_ops`` -> q = k -> Softmax."""
    nodes = [_node("Gemm" if gemm else "MatMul", ["x", "w"], ["p"])]
    inits = {"w": np.ones(weight_shape)}
    z = "p"
    if bias_shape is not None:
        inits["b"] = np.ones(bias_shape)
        nodes.append(_node("Add", ["b", z] if bias_first else [z, "b"], ["pb"]))
        z = "pb"
    for i, op in enumerate(path_ops):
        nodes.append(_node(op, [z], [f"u{i}"]))
        z = f"u{i}"
    nodes += [_node("MatMul", [z, z], ["s"]), _node("Softmax", ["s"], ["y"])]
    return _model(nodes, inits)


def test_projections_are_found_upstream_of_q_and_k() -> None:
    (s,) = find_sites(_projected(["Identity", "Transpose"]))
    assert s.proj_q == ["p"] and s.proj_k == ["p"]
    assert find_sites(_projected([], gemm=True))[0].proj_q == ["p"]
    # a constant 1-D bias after the linear layer (either operand order): its output
    assert find_sites(_projected(["Identity"], bias_shape=(4,)))[0].proj_q == ["pb"]
    assert find_sites(_projected([], bias_shape=(4,), bias_first=True))[0].proj_q == ["pb"]
    # a 2-D "bias" is no bias: the walk goes on to the linear layer
    assert find_sites(_projected([], bias_shape=(1, 4)))[0].proj_q == ["p"]
    # a weight of 3 dimensions is no linear layer; an op off the list stops the walk
    assert find_sites(_projected([], weight_shape=(1, 4, 4)))[0].proj_q == []
    assert find_sites(_projected(["Relu"]))[0].proj_q == []


def test_an_add_of_two_tensors_is_walked_through_not_a_bias() -> None:
    model = _model([_node("MatMul", ["x", "w"], ["p"]), _node("Add", ["p", "r"], ["a"]),
                    _node("MatMul", ["a", "a"], ["s"]), _node("Softmax", ["s"], ["y"])],
                   {"w": np.ones((4, 4))}, inputs=("x", "r"))
    assert find_sites(model)[0].proj_q == ["p"]
    g = Graph(model)
    assert projections(g, "a") == ["p"] and projections(g, "x") == []


def test_the_walk_back_to_the_projection_is_bounded() -> None:
    """A chain of n Identity nodes holds n + 1 tensors: the linear layer's output is found while
    they stay under WALK_LIMIT."""
    def chain(n):
        nodes = [_node("MatMul", ["x", "w"], ["i0"])]
        nodes += [_node("Identity", [f"i{j}"], [f"i{j + 1}"]) for j in range(n)]
        return Graph(_model(nodes, {"w": np.ones((4, 4))})), f"i{n}"

    assert projections(*chain(WALK_LIMIT - 2)) == ["i0"]
    assert projections(*chain(WALK_LIMIT - 1)) == []


def test_a_sites_tensors_once_each_without_blanks() -> None:
    site = OnnxSite(0, "unfused", "n", None, q="q", k="k", probs="p",
                    terms=[("m", 1.0), ("q", -1.0)], where=[("c", True)], extra={"bias": "b"},
                    proj_q=["pq"], proj_k=["pk", "pq"])
    assert site.tensors() == ["q", "k", "p", "m", "c", "b", "pq", "pk"]


def test_attributes_by_name() -> None:
    from onnx import helper

    node = helper.make_node("Softmax", ["a"], ["b"], axis=1)
    assert attributes(node) == {"axis": 1}


def test_consumers_list_every_node_reading_a_tensor() -> None:
    model = _model([_node("Identity", ["x"], ["a"]), _node("Mul", ["a", "x"], ["y"])])
    g = Graph(model)
    assert g.consumers == {"x": [model.graph.node[0], model.graph.node[1]],
                           "a": [model.graph.node[1]]}


def test_sites_are_numbered_in_node_order_and_keep_their_node() -> None:
    """A Softmax that is no attention (a router over x @ W) and other nodes come first: the
    walk goes on past them, and the two sites after them are numbered 0 and 1."""
    from onnx import helper

    nodes = [_node("MatMul", ["x", "w"], ["r"]), _node("Softmax", ["r"], ["route"]),
             _node("MatMul", ["q", "k"], ["s"]), _node("Softmax", ["s"], ["p"], name="sm"),
             helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"],
                              domain="com.microsoft", num_heads=2, name="mha")]
    model = _model(nodes, {"w": np.ones((2, 2))}, inputs=("x", "q", "k", "v"))
    sites = find_sites(model)
    assert [(s.index, s.name) for s in sites] == [(0, "sm"), (1, "mha")]
    assert sites[0].node is model.graph.node[3] and sites[1].node is model.graph.node[4]


def test_a_path_of_casts_and_identities_has_no_tanh() -> None:
    (site,) = find_sites(_scores(["Identity", "Cast", ("Add", 1.0)]))
    assert not site.tanh and site.softcap is None and site.scale_consts == []


def test_group_query_attention_rotates_only_when_asked() -> None:
    """No do_rotary attribute is do_rotary=0; an unnamed operator that rotates is named by its
    output in the refusal."""
    from onnx import helper

    from engine.errors import ConfigError

    (s,) = find_sites(_fused_model("GroupQueryAttention", "com.microsoft",
                                   ["q", "k", "v", "", "", "sl", "tl"], num_heads=2))
    assert s.kind == "com.microsoft.GroupQueryAttention" and (s.q, s.k, s.v) == ("q", "k", "v")
    model = _model([helper.make_node("GroupQueryAttention", ["q", "k", "v"], ["out", "pk", "pv"],
                                     domain="com.microsoft", do_rotary=1)],
                   inputs=("q", "k", "v"))
    with pytest.raises(ConfigError) as err:
        find_sites(model)
    assert str(err.value) == ("onnx: out: GroupQueryAttention rotates q and k inside the operator "
                              "(do_rotary=1); the audit needs them as tensors")


def test_the_packed_attention_operator_has_no_projections_of_its_own() -> None:
    """com.microsoft.Attention projects inside: its input coming out of a linear layer is not
    reported as q's projection."""
    from onnx import helper

    model = _model([_node("MatMul", ["x", "w0"], ["h"]),
                    helper.make_node("Attention", ["h", "w", "", ""], ["y"],
                                     domain="com.microsoft", num_heads=2)],
                   {"w0": np.ones((4, 4)), "w": np.ones((4, 12))})
    assert projections(Graph(model), "h") == ["h"]
    (s,) = find_sites(model)
    assert s.kind == "com.microsoft.Attention" and s.proj_q == [] and s.proj_k == []


def test_a_gemm_of_two_tensors_is_no_linear_layer_whatever_its_bias() -> None:
    model = _model([_node("Gemm", ["a", "b", "c"], ["g"]), _node("Identity", ["g"], ["y"])],
                   {"c": np.ones((2, 2))}, inputs=("a", "b"))
    assert projections(Graph(model), "y") == []


def test_an_add_with_one_operand_is_no_bias() -> None:
    model = _model([_node("MatMul", ["x", "w"], ["p"]), _node("Add", ["p", ""], ["a"]),
                    _node("Identity", ["a"], ["y"])], {"w": np.ones((4, 4))})
    assert projections(Graph(model), "y") == ["p"]


def test_the_walk_goes_on_past_inputs_other_ops_and_each_projection_found() -> None:
    """Concat(Relu(x), r, x @ W2, x @ W1 + b, x @ W3, x @ W2): an op off the list, a graph
    input, plain and biased projections, one of them twice, in the walk's (breadth-first)
    order."""
    model = _model([_node("Relu", ["x"], ["u"]), _node("MatMul", ["x", "w1"], ["p1"]),
                    _node("Add", ["p1", "b"], ["pb"]), _node("MatMul", ["x", "w2"], ["p2"]),
                    _node("MatMul", ["x", "w3"], ["p3"]),
                    _node("Concat", ["u", "r", "p2", "pb", "p3", "p2"], ["y"], axis=0)],
                   {"w1": np.ones((4, 4)), "w2": np.ones((4, 4)), "w3": np.ones((4, 4)),
                    "b": np.ones(4)}, inputs=("x", "r"))
    assert projections(Graph(model), "y") == ["p2", "pb", "p3"]


def test_constants_do_not_count_towards_the_walk_limit() -> None:
    """A chain of Mul nodes by one shared constant holds as many tensors as one of Identity
    nodes: at WALK_LIMIT - 2 nodes the projection is still found."""
    n = WALK_LIMIT - 2
    nodes = [_node("MatMul", ["x", "w"], ["i0"])]
    nodes += [_node("Mul", [f"i{j}", "c"], [f"i{j + 1}"]) for j in range(n)]
    g = Graph(_model(nodes, {"w": np.ones((4, 4)), "c": 2.0}))
    assert projections(g, f"i{n}") == ["i0"]
