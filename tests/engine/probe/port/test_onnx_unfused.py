"""Unfused attention, hand-built with onnx.helper as torch.onnx.export writes it (projections,
Reshape/Transpose, MatMul(q, k^T), a constant Mul or Div, masks, a soft-cap, Softmax), run by
ONNX Runtime: each graph's scale is chosen here, so the expected value is the constant put in
the graph. A port at 1/sqrt(d_k) reads as a source at 1/sqrt(d_k); one at sqrt(2)/sqrt(d_k) is a
MISMATCH naming x1.414 in that layer only. Fast (well under a second per graph): the mutation
runs of the port audit use these instead of the exported zoo models (test_onnx_audit.py)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from engine.errors import Cancelled, ConfigError  # noqa: E402
from engine.probe.port import onnx_audit  # noqa: E402
from engine.probe.port.onnx_audit import PortConfig, audit_onnx  # noqa: E402
from engine.probe.port.onnx_graph import find_sites  # noqa: E402
from engine.snapshots import last_result  # noqa: E402
from tests.engine.probe.port.test_compare import _fit  # noqa: E402

HEADS, D, N, VOCAB = 4, 8, 12, 40
NEG = float(np.finfo(np.float32).min)  # what transformers writes for a masked pair


def _graph(path, factors=(1.0,), mask: str = "", softcap: float | None = None,
           div: bool = False, fixed: bool = True, seed: int = 0, gather: bool = True) -> None:
    """input_ids -> embedding -> per layer: q, k, v projections, heads, q.k^T times
    ``factor / sqrt(D)`` (a Mul, or a Div by its inverse), an optional soft-cap and mask, the
    Softmax and the weighted values -> the next layer."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    width = HEADS * D
    inits = [numpy_helper.from_array(rng.normal(size=(VOCAB, width)).astype(np.float32), "emb"),
             numpy_helper.from_array(np.array([1, N if fixed else -1, HEADS, D], np.int64),
                                     "split"),
             numpy_helper.from_array(np.array([1, N if fixed else -1, width], np.int64),
                                     "merge")]
    if gather:
        nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["x0"])]
    else:  # the ids reach the embedding through a Cast: its size is not read off the graph
        nodes = [helper.make_node("Cast", ["input_ids"], ["ids"], to=TensorProto.INT64),
                 helper.make_node("Gather", ["emb", "ids"], ["x0"])]
    tril = np.tril(np.ones((N, N), bool))
    x = "x0"

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    for layer, factor in enumerate(factors):
        def name(s, _layer=layer):
            return f"{s}{_layer}"

        for p in "qkv":
            const(name(f"w{p}"), (rng.normal(size=(width, width)) * 0.6).astype(np.float32))
            perm = [0, 2, 3, 1] if p == "k" else [0, 2, 1, 3]
            nodes += [helper.make_node("MatMul", [x, name(f"w{p}")], [name(p)]),
                      helper.make_node("Reshape", [name(p), "split"], [name(f"{p}r")]),
                      helper.make_node("Transpose", [name(f"{p}r")], [name(f"{p}h")], perm=perm)]
        nodes.append(helper.make_node("MatMul", [name("qh"), name("kh")], [name("s")]))
        c = factor / math.sqrt(D)
        op, value = ("Div", 1 / c) if div else ("Mul", c)
        const(name("c"), np.float32(value))
        nodes.append(helper.make_node(op, [name("s"), name("c")], [name("z")]))
        z = name("z")
        if softcap is not None:  # c * tanh(z / c), as Gemma 2 writes it
            const(name("cap"), np.float32(softcap))
            nodes += [helper.make_node("Div", [z, name("cap")], [name("zc")]),
                      helper.make_node("Tanh", [name("zc")], [name("zt")]),
                      helper.make_node("Mul", [name("zt"), name("cap")], [name("zs")])]
            z = name("zs")
        if mask:
            if mask in ("add", "sub", "bias"):
                if mask == "bias":  # a finite position bias, ALiBi-like, subtracted
                    m = (np.abs(np.subtract.outer(np.arange(N), np.arange(N))) * 0.5)
                else:
                    m = np.where(tril, 0.0, NEG if mask == "add" else -NEG)
                const(name("mc"), m.astype(np.float32)[None, None])
                op = "Add" if mask == "add" else "Sub"
                nodes += [helper.make_node("Identity", [name("mc")], [name("m")]),
                          helper.make_node(op, [name("m"), z] if op == "Add" else [z, name("m")],
                                           [name("za")])]
            else:  # Where(cond, z, -big) keeps where true; Where(not cond, -big, z) where false
                const(name("wc"), tril if mask == "where" else ~tril)
                const(name("neg"), np.float32(-1e30 * 10))
                ins = [name("w"), z, name("neg")] if mask == "where" else \
                    [name("w"), name("neg"), z]
                nodes += [helper.make_node("Identity", [name("wc")], [name("w")]),
                          helper.make_node("Where", ins, [name("za")])]
            z = name("za")
        nodes += [helper.make_node("Softmax", [z], [name("p")], axis=-1, name=name("softmax")),
                  helper.make_node("MatMul", [name("p"), name("vh")], [name("o")]),
                  helper.make_node("Transpose", [name("o")], [name("ot")], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", [name("ot"), "merge"], [f"x{layer + 1}"])]
        x = f"x{layer + 1}"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(
        nodes, "unfused",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                       [1, N] if fixed else ["batch", "tokens"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))


IDS = tuple(range(1, N + 1))


def _audit(path, loaded=None, ids=IDS, cancelled=lambda: False, **cfg):
    return last_result(audit_onnx(PortConfig(str(path), **cfg), loaded, cancelled, ids=ids),
                       "the port audit")


def _loaded(d_model=HEADS * D, start=None, pad=None, vocab=None, name="tiny source"):
    cfg = SimpleNamespace(decoder_start_token_id=start, pad_token_id=pad, vocab_size=vocab)
    return SimpleNamespace(info=SimpleNamespace(name=name, d_model=d_model),
                           model=SimpleNamespace(config=cfg), tokenizer=None)


def _source(n_layers, scale=D**-0.5, tol=1e-3, blocks=("encoder",)):
    """A source audit that measured ``scale`` in every head of every layer, within 0.1 %."""
    return SimpleNamespace(
        n_layers=n_layers, d_k=D, head_fits=[_fit([scale] * HEADS, tol)] * n_layers,
        layer_fits=[_fit(scale, tol)] * n_layers, layer_verdicts=["1/sqrt(d_k)"] * n_layers,
        sites=[SimpleNamespace(block=blocks[i % len(blocks)]) for i in range(n_layers)])


@pytest.fixture
def source_audit(monkeypatch):
    """The source's audit replaced by a hand-made one (its stages at 0, 0.5 and 1)."""
    seen = {}

    def fake(loaded, ids, tokens, bugs, cancelled=None):
        seen.update(loaded=loaded, ids=ids, tokens=tokens, bugs=bugs, cancelled=cancelled)
        yield SimpleNamespace(stage="forward pass", fraction=0.0, result=None)
        yield SimpleNamespace(stage="fitting", fraction=0.5, result=None)
        yield SimpleNamespace(stage="done", fraction=1.0, result=seen["source"])

    import engine.probe.audit

    monkeypatch.setattr(engine.probe.audit, "audit_tokens", fake)
    return seen


def test_the_scale_constant_is_measured_per_layer_without_a_source(tmp_path) -> None:
    path = tmp_path / "g.onnx"
    _graph(path, (1.0, math.sqrt(2)))
    res = _audit(path)
    assert res.kind == "onnx" and res.path == str(path) and res.source_name is None
    assert [r.kind for r in res.layers] == ["unfused", "unfused"]
    assert [r.name for r in res.layers] == ["softmax0", "softmax1"]
    assert res.layers[0].port_x == pytest.approx(1.0, rel=1e-4)
    assert res.layers[1].port_x == pytest.approx(math.sqrt(2), rel=1e-4)
    assert [r.port_verdict for r in res.layers] == ["1/sqrt(d_k)", "other: s * sqrt(d_k) = 1.41"]
    assert res.layers[0].declared_x == pytest.approx(1.0, rel=1e-6)
    assert res.layers[1].declared_x == pytest.approx(math.sqrt(2), rel=1e-6)
    assert res.layers[0].declared_source == "graph constants on the scores (0.3536)"
    assert [r.features for r in res.layers] == [("bidirectional",)] * 2
    assert [r.block for r in res.layers] == ["encoder"] * 2
    assert [r.state for r in res.layers] == ["", ""] and res.findings == ()
    assert res.n_tokens == N and res.tokens == () and res.id_source == "token ids given"
    assert res.note == onnx_audit.NOTE
    assert res.meta["sites"] == [{"name": "softmax0", "kind": "unfused"},
                                 {"name": "softmax1", "kind": "unfused"}]
    assert res.meta["output_rel_diff_tapped_vs_shipped"] == 0.0


def test_a_port_at_the_sources_scale_reads_as_the_source(tmp_path, source_audit) -> None:
    path = tmp_path / "g.onnx"
    _graph(path, (1.0, 1.0))
    source_audit["source"] = _source(2, blocks=("decoder",))
    loaded = _loaded()

    def never():
        return False

    res = _audit(path, loaded, cancelled=never)
    assert source_audit["loaded"] is loaded and source_audit["ids"] == IDS
    assert source_audit["bugs"] == {} and source_audit["tokens"] == ()
    assert source_audit["cancelled"] is never
    assert res.findings == () and res.source is source_audit["source"]
    assert res.source_name == "tiny source"
    assert [r.state for r in res.layers] == ["as the source"] * 2
    assert [r.block for r in res.layers] == ["decoder"] * 2
    for r in res.layers:
        assert r.ratio == pytest.approx(1.0, rel=1e-4)
        assert r.source_x == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("div", [False, True])
def test_a_port_off_by_sqrt2_in_one_layer_is_a_mismatch_there(tmp_path, source_audit,
                                                              div) -> None:
    path = tmp_path / "g.onnx"
    _graph(path, (1.0, math.sqrt(2), 1.0), div=div)
    source_audit["source"] = _source(3)
    res = _audit(path, _loaded())
    assert [r.state for r in res.layers] == ["as the source", "MISMATCH", "as the source"]
    assert res.layers[1].ratio == pytest.approx(math.sqrt(2), rel=1e-4)
    assert res.findings == ("layer 1: the port applies x1.414 the source's scale (all heads)",)
    assert res.layers[1].finding == res.findings[0]
    assert res.layers[1].declared_x == pytest.approx(math.sqrt(2), rel=1e-6)


def test_the_progress_runs_through_the_source_then_the_port(tmp_path, source_audit) -> None:
    """The source's stages fill 0.05-0.30 of the bar, the port's baseline 0.32, then one tapped
    run for the first site alone (its size sets the groups) and one for the two others."""
    path = tmp_path / "g.onnx"
    _graph(path, (1.0, 1.0, 1.0))
    source_audit["source"] = _source(3)
    snaps = list(audit_onnx(PortConfig(str(path)), _loaded(), ids=IDS))
    got = [(s.stage, pytest.approx(s.fraction, abs=1e-12)) for s in snaps]
    assert got == [("reading the graph", 0.0), ("source: forward pass", 0.05),
                   ("source: fitting", 0.175), ("source: done", 0.30),
                   ("port: one forward pass as shipped", 0.32), ("port: site 1 of 3", 0.35),
                   ("port: site 2 of 3", 0.55), ("done", 1.0)]
    assert [s.done for s in snaps] == [False] * 7 + [True]
    assert all(s.result is None for s in snaps[:-1])
    timings = snaps[-1].result.timings
    assert timings["runs"] == 2
    assert set(timings) == {"forward_as_shipped", "forward_tapped", "fit", "runs"}
    assert all(timings[k] > 0 for k in ("forward_as_shipped", "forward_tapped", "fit"))


def test_a_single_site_is_read_in_one_run(tmp_path) -> None:
    path = tmp_path / "g.onnx"
    _graph(path, (1.0,))
    snaps = list(audit_onnx(PortConfig(str(path)), ids=IDS))
    assert [s.stage for s in snaps] == ["reading the graph", "port: one forward pass as shipped",
                                        "port: site 1 of 1", "done"]
    assert snaps[-1].result.timings["runs"] == 1
    two = tmp_path / "two.onnx"  # two sites: the first alone, then the other
    _graph(two, (1.0, 1.0))
    assert _audit(two).timings["runs"] == 2


def test_the_decoder_starts_from_the_sources_start_token(tmp_path, source_audit,
                                                          monkeypatch) -> None:
    from engine.probe.port import onnx_run

    starts = []
    real = onnx_run.feeds
    monkeypatch.setattr(onnx_run, "feeds",
                        lambda model, ids, start=0: starts.append(start) or real(model, ids, start))
    path = tmp_path / "g.onnx"
    _graph(path, (1.0,))
    source_audit["source"] = _source(1)
    _audit(path, _loaded(start=7))
    _audit(path)
    assert starts == [7, 0]


def test_cancel_is_asked_before_every_run_and_every_site(tmp_path) -> None:
    """Three sites in two tapped runs: asked 2 + 3 times; cancelling at any ask stops there."""
    path = tmp_path / "g.onnx"
    _graph(path, (1.0, 1.0, 1.0))
    asks = []
    _audit(path, cancelled=lambda: asks.append(1) and False)
    assert len(asks) == 5
    for stop in range(1, 6):
        count = []

        def cancelled(count=count, stop=stop):
            count.append(1)
            return len(count) == stop

        with pytest.raises(Cancelled):
            _audit(path, cancelled=cancelled)
        assert len(count) == stop


@pytest.mark.parametrize("mask", ["add", "sub", "where", "where_not"])
def test_a_causal_mask_in_any_form_is_read_as_causal(tmp_path, mask) -> None:
    path = tmp_path / "g.onnx"
    _graph(path, (1.0,), mask=mask)
    res = _audit(path)
    assert res.layers[0].features == ("causal",)
    assert res.layers[0].block == "decoder"
    assert res.layers[0].port_x == pytest.approx(1.0, rel=1e-4)


def test_a_subtracted_bias_is_fitted_with_its_sign(tmp_path) -> None:
    """z - |i - j| / 2: the fit must subtract the bias (added, the scale would be off)."""
    path = tmp_path / "g.onnx"
    _graph(path, (math.sqrt(2),), mask="bias")
    site = find_sites(onnx.load(str(path)))[0]
    assert site.terms == [("m0", -1.0)]
    res = _audit(path)
    assert res.layers[0].features == ("bidirectional", "additive bias")
    assert res.layers[0].port_x == pytest.approx(math.sqrt(2), rel=1e-4)


def test_a_soft_cap_is_the_constant_on_the_tanh_output(tmp_path) -> None:
    """c * tanh(z / c) with c = 5 after the scale 1/sqrt(d_k): the cap is 5, not the scale
    (the walk from the Softmax meets the cap's Mul before the Tanh)."""
    path = tmp_path / "g.onnx"
    _graph(path, (1.0,), softcap=5.0)
    site = find_sites(onnx.load(str(path)))[0]
    assert site.tanh and site.softcap == 5.0
    assert site.scale_consts == pytest.approx([5.0, 0.2, 1 / math.sqrt(D)], rel=1e-6)
    res = _audit(path)
    assert res.layers[0].features == ("bidirectional", "soft-cap 5")
    assert res.layers[0].port_x == pytest.approx(1.0, rel=1e-4)
    assert res.sites[0].fit.layer_cap.declared == 5.0
    assert bool(res.sites[0].fit.layer_cap.declared_consistent[0])


def test_d_model_comes_from_the_source_else_the_heads_total_width(tmp_path, source_audit) -> None:
    """s = 1/sqrt(128) on 4 heads of 8: 1/sqrt(d_model) only when the source says d_model is
    128 (without one, d_model is the heads' 32)."""
    path = tmp_path / "g.onnx"
    _graph(path, (math.sqrt(D / 128),))
    source_audit["source"] = _source(1, scale=128**-0.5)
    res = _audit(path, _loaded(d_model=128))
    assert res.layers[0].port_verdict == "scaled by 1/sqrt(d_model)"
    assert res.layers[0].state == "as the source"
    assert _audit(path).layers[0].port_verdict == "other: s * sqrt(d_k) = 0.25"
    half = tmp_path / "half.onnx"  # 1/sqrt(32) = 0.5/sqrt(8)
    _graph(half, (0.5,))
    assert _audit(half).layers[0].port_verdict == "scaled by 1/sqrt(d_model)"
    assert onnx_audit._d_model(None, []) == 0


def test_a_reference_folder_is_loaded_under_the_memory_budget(tmp_path, source_audit,
                                                              monkeypatch) -> None:
    import engine.probe.loader

    path = tmp_path / "g.onnx"
    _graph(path, (1.0,))
    source_audit["source"] = _source(1)
    calls = []
    loaded = _loaded()
    monkeypatch.setattr(engine.probe.loader, "load_model",
                        lambda folder, budget: calls.append((folder, budget)) or loaded)
    cfg = PortConfig(str(path), reference="/models/tiny", memory_budget=3.5)
    snaps = list(audit_onnx(cfg, ids=IDS))
    assert calls == [("/models/tiny", 3.5)]
    assert ("loading the source model", 0.02) in [(s.stage, s.fraction) for s in snaps]
    assert snaps[-1].result.source_name == "tiny source"


def test_seeded_ids_fill_a_graph_without_a_tokenizer(tmp_path) -> None:
    """No tokenizer anywhere: N ids (the graph's fixed length) from seed 0 over [1, VOCAB)."""
    path = tmp_path / "g.onnx"
    _graph(path, (1.0,))
    res = _audit(path, ids=None)
    assert res.n_tokens == N and res.id_source == f"{N} seeded random token ids (no tokenizer)"
    from engine.probe.port.onnx_run import open_onnx

    ids, labels, _where = onnx_audit.token_ids(open_onnx(path), None, None, None)
    assert ids == tuple(int(i) for i in np.random.default_rng(0).integers(1, VOCAB, size=N))
    assert labels == () and min(ids) >= 1 and max(ids) < VOCAB
    # a length the graph does not fix: max_tokens, else DEFAULT_IDS (32)
    free = tmp_path / "free.onnx"
    _graph(free, (1.0,), fixed=False)
    assert len(onnx_audit.token_ids(open_onnx(free), None, None, 5)[0]) == 5
    assert len(onnx_audit.token_ids(open_onnx(free), None, None, None)[0]) == 32
    # the fixed length wins over max_tokens
    assert len(onnx_audit.token_ids(open_onnx(path), None, None, 5)[0]) == N
    with pytest.raises(ConfigError) as err:
        onnx_audit.token_ids(open_onnx(path), None, "some text", None)
    assert str(err.value) == ("text: needs a tokenizer: give the source folder (--reference) or "
                              "put the tokenizer files next to the .onnx file")


def test_the_audit_seeds_its_ids_from_the_source_and_max_tokens(tmp_path, source_audit) -> None:
    """No ids given and no tokenizer: the audit's ids are seeded over the source config's
    vocabulary (7: this graph has no embedding Gather), and as many as max_tokens on a graph of
    free length."""
    path = tmp_path / "g.onnx"
    _graph(path, (1.0,), gather=False)
    source_audit["source"] = _source(1)
    res = _audit(path, _loaded(vocab=7), ids=None)
    want = tuple(int(i) for i in np.random.default_rng(0).integers(1, 7, size=N))
    assert source_audit["ids"] == want
    assert res.id_source == f"{N} seeded random token ids (no tokenizer)"
    free = tmp_path / "free.onnx"
    _graph(free, (1.0,), fixed=False)
    res = _audit(free, ids=None, max_tokens=5)
    assert res.n_tokens == 5 and res.id_source == "5 seeded random token ids (no tokenizer)"

def test_the_vocabulary_of_seeded_ids(tmp_path) -> None:
    """The embedding's rows when a Gather reads input_ids, else the source config's
    vocab_size, else 100."""
    from engine.probe.port.onnx_run import open_onnx

    path = tmp_path / "g.onnx"
    _graph(path, (1.0,), gather=False)
    model = open_onnx(path)
    assert onnx_audit._vocab(model) is None
    assert onnx_audit._vocab(open_onnx(_saved(tmp_path))) == VOCAB
    want = np.random.default_rng(0).integers(1, 7, size=N)
    assert onnx_audit.token_ids(model, _loaded(vocab=7), None, None)[0] == tuple(want)
    assert max(onnx_audit.token_ids(model, None, None, None)[0]) < 100
    assert onnx_audit.token_ids(model, None, None, None)[0] == tuple(
        np.random.default_rng(0).integers(1, 100, size=N))
    for bad in (1, 0, None, 7.0, "7"):
        assert onnx_audit._config_vocab(_loaded(vocab=bad)) is None
    assert onnx_audit._config_vocab(_loaded(vocab=2)) == 2
    assert onnx_audit._config_vocab(None) is None


def _saved(tmp_path):
    path = tmp_path / "with_gather.onnx"
    _graph(path, (1.0,))
    return path


def test_a_tokenizer_gives_the_ids_and_a_wrong_length_is_refused(tmp_path) -> None:
    from engine.probe.port.onnx_run import open_onnx

    class Tok:
        def __call__(self, text, add_special_tokens=True, truncation=False, max_length=None):
            ids = [ord(ch) % 30 + 1 for ch in text]
            return {"input_ids": ids[:max_length] if truncation else ids}

        def convert_ids_to_tokens(self, ids):
            return [f"t{i}" for i in ids]

    loaded = _loaded()
    loaded.tokenizer, loaded.max_tokens = Tok(), 10**9
    path = tmp_path / "g.onnx"
    _graph(path, (1.0,))
    ids, labels, where = onnx_audit.token_ids(open_onnx(path), loaded, "abcdefghijklmnop", None)
    assert ids == tuple(ord(ch) % 30 + 1 for ch in "abcdefghijkl")  # cut to the graph's 12
    assert labels[0] == "t8" and where == "the reference's tokenizer"
    with pytest.raises(ConfigError) as err:
        onnx_audit.token_ids(open_onnx(path), loaded, "abc", None)
    assert err.value.field == "text"
    assert str(err.value).endswith(f"gives 3 tokens; the graph was exported for exactly {N} "
                                   "(give a longer text, or export with dynamic axes)")
    free = tmp_path / "free.onnx"
    _graph(free, (1.0,), fixed=False)
    assert len(onnx_audit.token_ids(open_onnx(free), loaded, "abcdefghij", 4)[0]) == 4
    assert len(onnx_audit.token_ids(open_onnx(free), loaded, "abcdefghij", None)[0]) == 10


def test_the_decoder_start_token() -> None:
    assert onnx_audit._decoder_start(None) == 0
    assert onnx_audit._decoder_start(_loaded(start=5, pad=3)) == 5
    assert onnx_audit._decoder_start(_loaded(start=None, pad=3)) == 3
    assert onnx_audit._decoder_start(_loaded(start=None, pad=None)) == 0
    assert onnx_audit._decoder_start(_loaded(start=0, pad=3)) == 0
    bare = SimpleNamespace(model=SimpleNamespace(config=SimpleNamespace()))  # neither attribute
    assert onnx_audit._decoder_start(bare) == 0


def test_the_outputs_difference_is_relative_to_the_largest_output() -> None:
    plain = {"y": np.array([1.0, -4.0]), "z": np.array([2.0]), "i": np.array([5]),
             "s": np.zeros(3), "o": np.ones(2)}
    tapped = {"y": np.array([1.5, -4.0]), "z": np.array([2.0, 2.0]), "i": np.array([9]),
              "s": np.array([0.0, 0.25, 0.0]), "o": np.ones(2)}
    assert onnx_audit._rel_diff(plain, tapped, ["y"]) == pytest.approx(0.125)  # 0.5 / 4
    assert onnx_audit._rel_diff(plain, tapped, ["z", "i", "o"]) == 0.0  # shape, ints skipped
    assert onnx_audit._rel_diff(plain, tapped, ["s"]) == pytest.approx(0.25)  # over 1 when 0
    assert onnx_audit._rel_diff(plain, tapped, ["s", "y", "o"]) == pytest.approx(0.25)
    assert onnx_audit._rel_diff(plain, tapped, ["i", "z", "y"]) == pytest.approx(0.125)
    nan = {"y": np.array([np.nan, 1.0])}
    assert onnx_audit._rel_diff({"y": np.array([1.0, 1.0])}, nan, ["y"]) == math.inf


def test_a_packed_attention_without_constant_weights_is_refused(tmp_path) -> None:
    model = SimpleNamespace(proto=SimpleNamespace(graph=SimpleNamespace(initializer=[])),
                            path=tmp_path / "m.onnx")
    with pytest.raises(ConfigError) as err:
        onnx_audit._initializers(model, ["w", "b"])
    assert str(err.value) == ("onnx: com.microsoft.Attention's weights are not a constant of the "
                              "graph; the audit cannot read its projections")


def test_packed_weights_and_bias_are_read_from_beside_the_graph(tmp_path) -> None:
    """The weights and the bias of com.microsoft.Attention, kept in a file beside the graph
    (open_onnx does not load them): read from there, each under its own name."""
    from onnx import TensorProto, helper, numpy_helper

    from engine.probe.port.onnx_run import open_onnx

    w = np.arange(12, dtype=np.float32).reshape(2, 6)
    b = np.arange(6, dtype=np.float32) - 2.5
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    folder = tmp_path / "port"
    folder.mkdir()
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]),
              str(folder / "m.onnx"), save_as_external_data=True, location="m.weights",
              size_threshold=0)
    got = onnx_audit._initializers(open_onnx(folder / "m.onnx"), ["w", "b"])
    assert sorted(got) == ["bias", "weights"]
    np.testing.assert_array_equal(got["weights"], w)
    np.testing.assert_array_equal(got["bias"], b)
    assert sorted(onnx_audit._initializers(open_onnx(folder / "m.onnx"), ["w", ""])) == ["weights"]


def test_each_site_is_fitted_with_the_sources_d_model(monkeypatch) -> None:
    """_fit hands d_model (the source's, 128 here) to the fused fit as to the unfused one, and
    weights only to com.microsoft.Attention (a spy on both fits: what reaches them)."""
    from engine.probe.port import onnx_sites
    from engine.probe.port.onnx_graph import OnnxSite

    seen = []
    monkeypatch.setattr(onnx_sites, "fit_fused", lambda site, arrays, d_model, weights=None:
                        seen.append(("fused", d_model, weights)) or "fused fit")
    monkeypatch.setattr(onnx_sites, "fit_unfused", lambda site, arrays, d_model:
                        seen.append(("unfused", d_model)) or "unfused fit")
    mha = OnnxSite(0, "com.microsoft.MultiHeadAttention", "mha", None)
    assert onnx_audit._fit(None, mha, {}, 128) == "fused fit"
    assert onnx_audit._fit(None, OnnxSite(1, "unfused", "sm", None), {}, 96) == "unfused fit"
    assert seen == [("fused", 128, None), ("unfused", 96)]

@pytest.mark.parametrize(("kwargs", "field", "words"), [
    ({"path": ""}, "path", "must be an .onnx or .gguf file"),
    ({"path": "  "}, "path", "must be an .onnx or .gguf file"),
    ({"path": 3}, "path", "must be an .onnx or .gguf file"),
    ({"format": "tflite"}, "format", "must be onnx or gguf, got 'tflite'"),
    ({"reference": " "}, "reference", "must be a model folder path (or left out)"),
    ({"reference": 5}, "reference", "must be a model folder path (or left out)"),
    ({"text": " \n"}, "text", "must contain at least one non-blank character"),
    ({"text": 5}, "text", "must contain at least one non-blank character"),
    ({"max_tokens": 1}, "max_tokens", ""), ({"max_tokens": 1_000_001}, "max_tokens", ""),
    ({"memory_budget": -1.0}, "memory_budget", "")])
def test_a_port_config_refuses_a_bad_field(kwargs, field, words) -> None:
    with pytest.raises(ConfigError) as err:
        PortConfig(**{"path": "m.onnx", **kwargs})
    assert err.value.field == field
    assert str(err.value) == f"{field}: {words}" if words else str(err.value).startswith(field)


def test_a_port_config_reads_its_kind_from_the_file_name() -> None:
    assert PortConfig("m.onnx").kind == "onnx" and PortConfig("M.GGUF").kind == "gguf"
    assert PortConfig("m.bin").kind == "onnx"
    assert PortConfig("m.onnx", format="gguf").kind == "gguf"
    assert PortConfig("m.gguf", format="onnx").kind == "onnx"
    cfg = PortConfig("m.onnx", reference="/r", text="hi", max_tokens=2)
    assert (cfg.reference, cfg.text, cfg.max_tokens) == ("/r", "hi", 2)
    assert PortConfig("m.onnx", max_tokens=1_000_000).max_tokens == 1_000_000
    # the checked values replace the given ones: 5.0 tokens as the int 5, a budget of 2 as 2.0
    cfg = PortConfig("m.onnx", max_tokens=5.0, memory_budget=2)
    assert type(cfg.max_tokens) is int and cfg.max_tokens == 5
    assert type(cfg.memory_budget) is float and cfg.memory_budget == 2.0


def test_the_runs_times_and_the_outputs_difference_are_reported(tmp_path, monkeypatch) -> None:
    """ONNX Runtime's runs timed at 0.25 s as shipped and 1 s tapped (two tapped runs for three
    sites), the fit's clock ticking 1 s a read (one fit span per run), and the tapped runs'
    output 1.5 times the shipped one: 2 s tapped, 2 s of fits, a relative difference of 0.5."""
    from engine.probe.port import onnx_run

    real = onnx_run.run

    def run(sess, feed, names):
        out, _secs = real(sess, feed, names)
        tapped = len(names) > 1
        if tapped:
            out = {**out, "y": out["y"] * 1.5}
        return out, 1.0 if tapped else 0.25

    ticks = iter(range(100))
    monkeypatch.setattr(onnx_run, "run", run)
    monkeypatch.setattr(onnx_audit, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
    path = tmp_path / "g.onnx"
    _graph(path, (1.0, 1.0, 1.0))
    res = _audit(path)
    assert res.timings == {"forward_as_shipped": 0.25, "forward_tapped": 2.0, "fit": 2.0,
                           "runs": 2}
    assert res.meta["output_rel_diff_tapped_vs_shipped"] == pytest.approx(0.5, rel=1e-6)
    assert [r.port_x for r in res.layers] == pytest.approx([1.0] * 3, rel=1e-4)


def test_a_tokenizer_next_to_the_graph_gives_the_ids(tmp_path) -> None:
    """A word-level tokenizer saved beside the graph (no source folder): its ids for the text;
    a tokenizer file it cannot read leaves seeded ids."""
    tokenizers = pytest.importorskip("tokenizers")
    pytest.importorskip("transformers")
    import json

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate("abcdefghijklmn")}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    folder = tmp_path / "port"
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}), encoding="utf-8")
    path = folder / "g.onnx"
    _graph(path, (1.0,))
    text = " ".join("abcdefghijklmn")
    res = _audit(path, ids=None, text=text)
    assert res.id_source == "the tokenizer in the graph's folder"
    assert res.n_tokens == N and res.tokens == tuple("abcdefghijkl")
    assert res.layers[0].port_x == pytest.approx(1.0, rel=1e-4)
    (folder / "tokenizer.json").write_text("{not json", encoding="utf-8")
    res = _audit(path, ids=None)
    assert res.id_source == f"{N} seeded random token ids (no tokenizer)"
    assert onnx_audit._folder_tokenizer(tmp_path) is None  # no tokenizer file there


def test_a_tokenizer_file_either_way_is_loaded_from_local_files_only(tmp_path,
                                                                     monkeypatch) -> None:
    """tokenizer.json alone or tokenizer_config.json alone is enough to try the folder (never
    the network); neither file: no try. The tokenizer's limit is not the graph's: a dynamic
    graph reads the whole 100-token text."""
    pytest.importorskip("transformers")
    import transformers

    from engine.probe.port.onnx_run import open_onnx

    class Tok:
        def __call__(self, text, add_special_tokens=True, truncation=False, max_length=None):
            ids = [len(w) for w in text.split()]
            return {"input_ids": ids[:max_length] if truncation else ids}

        def convert_ids_to_tokens(self, ids):
            return [str(i) for i in ids]

    calls = []
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda folder, **kw: calls.append((folder, kw)) or Tok())
    for name in ("tokenizer.json", "tokenizer_config.json"):
        folder = tmp_path / name.replace(".", "_")
        folder.mkdir()
        (folder / name).write_text("{}", encoding="utf-8")
        path = folder / "g.onnx"
        _graph(path, (1.0,), fixed=False)
        text = " ".join(["ab"] * 100)
        ids, _labels, where = onnx_audit.token_ids(open_onnx(path), None, text, None)
        assert where == "the tokenizer in the graph's folder" and ids == (2,) * 100
        assert calls[-1] == (str(folder), {"local_files_only": True})
    assert onnx_audit._folder_tokenizer(tmp_path) is None and len(calls) == 2


def test_the_sites_are_grouped_by_the_first_sites_bytes(tmp_path, monkeypatch) -> None:
    """The first site's tensors, counted by hand: q and k^T (1, 4, 12, 8) and the weights
    (1, 4, 12, 12) in float32, the q and k projections (1, 12, 32): 4 x (384 + 384 + 576 + 384 +
    384) = 8,448 bytes, once for each of the other two sites."""
    from engine.probe.port import onnx_run

    seen = []
    real = onnx_run.groups
    monkeypatch.setattr(onnx_run, "groups", lambda sizes: seen.append(list(sizes)) or real(sizes))
    path = tmp_path / "g.onnx"
    _graph(path, (1.0, 1.0, 1.0))
    _audit(path)
    assert seen == [[8448, 8448]]


def test_a_graph_that_is_not_there_or_without_attention_names_the_onnx_field(tmp_path) -> None:
    from onnx import TensorProto, helper

    with pytest.raises(ConfigError) as err:
        _audit(tmp_path / "none.onnx")
    assert err.value.field == "onnx"
    path = tmp_path / "plain.onnx"
    graph = helper.make_graph([helper.make_node("Identity", ["input_ids"], ["y"])], "g",
                              [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    with pytest.raises(ConfigError) as err:
        _audit(path)
    assert err.value.field == "onnx"
    assert str(err.value).startswith(f"onnx: found no attention in {str(path)!r}: looked for ")
