"""Find the attention of an ONNX graph and the tensors the scale fit needs (no runtime here).

Two kinds of site, in the graph's node order (an exporter writes nodes in call order: encoder,
then decoder self- and cross-attention):

* unfused, as ``torch.onnx.export`` writes eager attention: ``MatMul(q, k^T)`` -> ``Mul``/``Div``
  by the scale -> ``Add`` (mask, position bias) -> ``Softmax`` -> ``MatMul(·, v)``. The path from
  the Softmax back to the score MatMul runs through elementwise nodes only; the off-path operands
  of its ``Add`` nodes are the additive terms, a ``Where`` on it masks, a ``Tanh`` soft-caps;
* fused operators: ONNX ``Attention`` (opset 23) and ONNX Runtime's ``com.microsoft``
  ``MultiHeadAttention``, ``GroupQueryAttention`` and ``Attention``, with their ``scale``
  attribute (what the graph *declares*; the audit measures what the runtime applies).

For each site the q and k projections are looked for upstream (a MatMul/Gemm with a constant 2-D
weight, plus its constant bias ``Add``): the scale is reported, as the source audit does, against
the projections' q.k.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: ops a path from the Softmax back to the score product may cross
PATH_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Where", "Tanh", "Cast", "Identity"})
#: ops q and k may pass through between their projection and the product (reshape, RoPE, GQA)
UPSTREAM_OPS = frozenset({"Reshape", "Transpose", "Add", "Mul", "Div", "Sub", "Neg", "Concat",
                          "Slice", "Split", "Unsqueeze", "Squeeze", "Expand", "Cast", "Identity",
                          "Gather", "Tile", "Flatten"})
#: nodes visited at most on the walk back from q or k (memory and time stay bounded)
WALK_LIMIT = 400
#: depth of the walk from a Softmax back to its score product
PATH_DEPTH = 12
FUSED = {("", "Attention"): "Attention (ONNX opset 23)",
         ("com.microsoft", "MultiHeadAttention"): "com.microsoft.MultiHeadAttention",
         ("com.microsoft", "GroupQueryAttention"): "com.microsoft.GroupQueryAttention",
         ("com.microsoft", "Attention"): "com.microsoft.Attention"}
LOOKED_FOR = ("Softmax nodes fed by MatMul(q, k^T) through Mul/Div/Add (as torch.onnx.export "
              "writes attention), and the fused operators Attention (opset 23), "
              "com.microsoft MultiHeadAttention, GroupQueryAttention and Attention")


@dataclass
class OnnxSite:
    """One attention site: which tensors to read back after the run."""

    index: int
    kind: str  #: "unfused" or the fused operator's name
    name: str  #: the Softmax's or the operator's node name
    node: Any  #: the NodeProto
    q: str = ""  #: the score product's inputs (unfused), or the op's query input
    k: str = ""  #: k^T (unfused) or the op's key input
    v: str = ""  #: fused: the op's value input
    probs: str = ""  #: unfused: the Softmax output
    out: str = ""  #: fused: the op's output
    terms: list[tuple[str, float]] = field(default_factory=list)  #: additive terms (name, sign)
    where: list[tuple[str, bool]] = field(default_factory=list)  #: (condition, keep when true)
    scale_consts: list[float] = field(default_factory=list)  #: Mul/Div constants on the path
    softcap: float | None = None  #: the constant the Tanh's output is multiplied by
    tanh: bool = False
    extra: dict[str, str] = field(default_factory=dict)  #: fused: mask, bias, weights inputs
    attrs: dict[str, Any] = field(default_factory=dict)
    proj_q: list[str] = field(default_factory=list)  #: candidate projection outputs for q
    proj_k: list[str] = field(default_factory=list)

    def tensors(self) -> list[str]:
        names = [self.q, self.k, self.v, self.probs, self.out, *(t for t, _s in self.terms),
                 *(c for c, _k in self.where), *self.extra.values(), *self.proj_q, *self.proj_k]
        return list(dict.fromkeys(n for n in names if n))


class Graph:
    """Index of one GraphProto: producers, consumers, constants."""

    def __init__(self, model: Any) -> None:
        from onnx import numpy_helper

        g = model.graph
        self.graph = g
        self.producer = {o: n for n in g.node for o in n.output if o}
        self.consumers: dict[str, list[Any]] = {}
        for n in g.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)
        self.init_shapes = {i.name: tuple(i.dims) for i in g.initializer}
        self._np = numpy_helper
        self._inits = {i.name: i for i in g.initializer}
        self.constants = {n.output[0]: n for n in g.node if n.op_type == "Constant"}

    def is_const(self, name: str) -> bool:
        return name in self._inits or name in self.constants

    def const_shape(self, name: str) -> tuple[int, ...] | None:
        if name in self.init_shapes:
            return self.init_shapes[name]
        node = self.constants.get(name)
        if node is None:
            return None
        for a in node.attribute:
            if a.name == "value":
                return tuple(a.t.dims)
        return None

    def scalar(self, name: str) -> float | None:
        """The value of a constant holding one number (None for anything else)."""
        arr = None
        if name in self._inits:
            init = self._inits[name]
            if int(np.prod(init.dims)) == 1 and not init.external_data:
                arr = self._np.to_array(init)
        elif name in self.constants:
            from onnx import helper

            for a in self.constants[name].attribute:
                if a.name == "value" and int(np.prod(a.t.dims)) == 1:
                    arr = self._np.to_array(a.t)
                elif a.name in ("value_float", "value_int"):
                    arr = np.array(helper.get_attribute_value(a))
        if arr is None or arr.size != 1:
            return None
        v = float(arr.reshape(-1)[0])
        return v if np.isfinite(v) else None


def attributes(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def find_sites(model: Any) -> list[OnnxSite]:
    """Every attention site of ``model``'s main graph, in node order."""
    graph = Graph(model)
    sites: list[OnnxSite] = []
    for node in graph.graph.node:
        key = (node.domain or "", node.op_type)
        if key == ("ai.onnx", "Attention"):
            key = ("", "Attention")
        if node.op_type == "Softmax":
            site = _unfused(graph, node, len(sites))
        elif key in FUSED:
            site = _fused(graph, node, FUSED[key], len(sites))
        else:
            continue
        if site is None:
            continue
        if site.kind != "com.microsoft.Attention":  # that one's projections are inside it
            site.proj_q = projections(graph, site.q) if site.q else []
            site.proj_k = projections(graph, site.k) if site.k else []
        sites.append(site)
    return sites


def _unfused(graph: Graph, softmax: Any, index: int) -> OnnxSite | None:
    """The site of one Softmax, or None when no q.k product feeds it (a router, a classifier)."""
    path = _path_to_product(graph, softmax.input[0], PATH_DEPTH)
    if path is None:
        return None
    product, chain = path
    site = OnnxSite(index, "unfused", softmax.name or softmax.output[0], softmax,
                    q=product.input[0], k=product.input[1], probs=softmax.output[0],
                    attrs=attributes(softmax))
    # the chain runs from the Softmax down to the product: the soft-cap c of c * tanh(z / c) is
    # the Mul met last before the Tanh (the one right after it in the graph)
    cap = None
    for node, on_path in chain:
        others = [i for i in node.input if i and i != on_path]
        op = node.op_type
        if op in ("Add", "Sub"):
            for j, name in enumerate(node.input):
                if name and name != on_path:
                    site.terms.append((name, -1.0 if op == "Sub" and j == 1 else 1.0))
        elif op in ("Mul", "Div") and others:
            c = graph.scalar(others[0])
            if c is not None and c != 0:
                site.scale_consts.append(c if op == "Mul" else 1.0 / c)
                if op == "Mul" and not site.tanh:
                    cap = abs(c)
        elif op == "Where":
            site.where.append((node.input[0], node.input[1] == on_path))
        elif op == "Tanh" and not site.tanh:
            site.tanh = True
            site.softcap = cap
    return site


def _path_to_product(graph: Graph, start: str, depth: int
                     ) -> tuple[Any, list[tuple[Any, str]]] | None:
    """(the score MatMul, [(node, its on-path input)] from the Softmax side down), or None."""
    node = graph.producer.get(start)
    if node is None or depth == 0:
        return None
    if node.op_type == "MatMul":
        if not any(graph.is_const(i) for i in node.input):
            return node, []
        return None
    if node.op_type not in PATH_OPS:
        return None
    for i in node.input:
        if not i or graph.is_const(i) or (node.op_type == "Where" and i == node.input[0]):
            continue
        found = _path_to_product(graph, i, depth - 1)
        if found is not None:
            return found[0], [(node, i), *found[1]]
    return None


#: fused operators: (query, key, value) input positions and the extra inputs by name
_FUSED_INPUTS = {
    "Attention (ONNX opset 23)": ((0, 1, 2), {"attn_mask": 3}),
    "com.microsoft.MultiHeadAttention": ((0, 1, 2), {"bias": 3, "key_padding_mask": 4,
                                                     "attention_bias": 5}),
    "com.microsoft.GroupQueryAttention": ((0, 1, 2), {"seqlens_k": 5}),
    "com.microsoft.Attention": ((0, None, None), {"weights": 1, "bias": 2, "mask_index": 3,
                                                  "attention_bias": 5}),
}


def _fused(graph: Graph, node: Any, kind: str, index: int) -> OnnxSite:
    pos, extra = _FUSED_INPUTS[kind]
    ins = list(node.input)
    attrs = attributes(node)
    if kind == "com.microsoft.GroupQueryAttention" and int(attrs.get("do_rotary", 0)):
        from engine.errors import ConfigError

        raise ConfigError("onnx", f"{node.name or node.output[0]}: GroupQueryAttention rotates q "
                          "and k inside the operator (do_rotary=1); the audit needs them as "
                          "tensors")

    def at(i: int | None) -> str:
        return ins[i] if i is not None and i < len(ins) else ""

    site = OnnxSite(index, kind, node.name or node.output[0], node, q=at(pos[0]), k=at(pos[1]),
                    v=at(pos[2]), out=node.output[0], attrs=attrs)
    site.extra = {name: at(i) for name, i in extra.items() if at(i)}
    return site


def projections(graph: Graph, start: str) -> list[str]:
    """Outputs of the linear layers ``start`` comes from (walking back through reshapes, RoPE
    and head repeats, never past a linear layer): a MatMul/Gemm with a constant 2-D weight, or
    the constant-bias ``Add`` right after one."""
    found: list[str] = []
    seen = {start}
    queue = deque([start])
    while queue and len(seen) < WALK_LIMIT:
        name = queue.popleft()
        node = graph.producer.get(name)
        if node is None:
            continue
        if _is_linear(graph, node):
            found.append(name)
            continue
        if node.op_type == "Add" and _bias_add(graph, node):
            found.append(name)
            continue
        if node.op_type not in UPSTREAM_OPS:
            continue
        for i in node.input:
            if i and i not in seen and not graph.is_const(i):
                seen.add(i)
                queue.append(i)
    return found


def _is_linear(graph: Graph, node: Any) -> bool:
    if node.op_type not in ("MatMul", "Gemm"):
        return False
    shapes = [graph.const_shape(i) for i in node.input[:2]]
    return any(s is not None and len(s) == 2 for s in shapes)


def _bias_add(graph: Graph, node: Any) -> bool:
    """``Add(linear(x), bias)`` with a constant 1-D bias."""
    ins = [i for i in node.input if i]
    if len(ins) != 2:
        return False
    for a, b in (ins, ins[::-1]):
        shape = graph.const_shape(b)
        src = graph.producer.get(a)
        if shape is not None and len(shape) == 1 and src is not None and _is_linear(graph, src):
            return True
    return False
