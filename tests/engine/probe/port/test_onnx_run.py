"""Opening and running an ONNX graph: refusals in one line naming the file, the inputs the audit
fills from token ids (the decoder's shifted right), extra outputs on a copy, and the groups of
sites whose tensors fit the memory budget (consecutive, at most the budget, one site at least)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from engine.errors import ConfigError  # noqa: E402
from engine.probe.port import onnx_run  # noqa: E402
from engine.probe.port.onnx_run import (  # noqa: E402
    MEMORY_BUDGET,
    OnnxModel,
    feeds,
    fixed_length,
    groups,
    open_onnx,
    run,
    session,
)


def _save(path, inputs, nodes=None, inits=()):
    """A graph over ``inputs`` ((name, element type, dims)); by default y = Identity(first)."""
    from onnx import TensorProto, helper

    ins = [helper.make_tensor_value_info(n, t, d) for n, t, d in inputs]
    nodes = nodes if nodes is not None else [helper.make_node("Identity", [inputs[0][0]], ["y"])]
    graph = helper.make_graph(nodes, "g", ins,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              list(inits))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def test_an_unreadable_file_is_refused_in_one_line(tmp_path) -> None:
    missing = tmp_path / "none.onnx"
    with pytest.raises(ConfigError) as err:
        open_onnx(missing, "port")
    assert err.value.field == "port" and f"{str(missing)!r} is not a file" in str(err.value)
    text = tmp_path / "text.onnx"
    text.write_text("not a graph\nsecond line", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        open_onnx(text)
    msg = str(err.value)
    assert err.value.field == "onnx" and f"{str(text)!r} is not an ONNX model (" in msg
    assert "onnx.ModelProto" in msg  # protobuf's own words, first line
    assert "\n" not in msg
    empty = tmp_path / "empty.onnx"
    _save(empty, [("x", 1, [1])], nodes=[])
    with pytest.raises(ConfigError) as err:
        open_onnx(empty)
    assert str(err.value).endswith(f"{str(empty)!r} holds no graph nodes")
    assert err.value.field == "onnx"


def test_without_the_deploy_extra_the_hint_is_given(monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    assert onnx_run.deploy_available() is False
    with pytest.raises(ConfigError) as err:
        open_onnx("whatever.onnx", "port")
    assert err.value.field == "port" and onnx_run.DEPLOY_HINT in str(err.value)
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnx" else real(name, *a))
    assert onnx_run.deploy_available() is False


def test_the_inputs_and_outputs_read(tmp_path) -> None:
    from onnx import numpy_helper

    path = _save(tmp_path / "m.onnx", [("input_ids", 7, [1, "seq"]), ("w", 1, [2]),
                                       ("mask", 1, [None, 4])],
                 inits=[numpy_helper.from_array(np.ones(2, np.float32), "w")])
    model = open_onnx(str(path))
    assert model.path == path and model.outputs == ["y"]
    # an initializer listed among the inputs (older exporters) is no input
    assert model.inputs == [("input_ids", 7, (1, "seq")), ("mask", 1, (None, 4))]
    assert open_onnx(f"~/../{path}").path.is_file()  # (~ expanded)


@pytest.mark.parametrize(("inputs", "want"), [
    ([("input_ids", 7, [1, 16])], 16), ([("decoder_input_ids", 7, [1, 9])], 9),
    ([("input_ids", 7, [1, "seq"])], None), ([("input_ids", 7, [1, 0])], None),
    ([("input_ids", 7, [16])], None), ([("input_ids", 7, [1, 16, 1])], None),
    ([("ids", 7, [1, 16])], None), ([("input_ids", 7, [1, 1])], 1),
    ([("attention_mask", 7, [1, 5]), ("input_ids", 7, [1, 6])], 6)])
def test_the_fixed_length_of_the_token_ids(inputs, want) -> None:
    model = OnnxModel(None, None, [(n, t, tuple(d)) for n, t, d in inputs], [])
    assert fixed_length(model) == want


def test_the_feeds_of_one_text() -> None:
    model = OnnxModel(None, None, [(n, t, (1, 3)) for n, t in (
        ("input_ids", 7), ("attention_mask", 1), ("token_type_ids", 6), ("position_ids", 7),
        ("decoder_input_ids", 7), ("decoder_attention_mask", 9))], [])
    got = feeds(model, [5, 6, 7], decoder_start=2)
    assert got["input_ids"].tolist() == [[5, 6, 7]] and got["input_ids"].dtype == np.int64
    assert got["attention_mask"].tolist() == [[1, 1, 1]]
    assert got["attention_mask"].dtype == np.float32
    assert got["token_type_ids"].tolist() == [[0, 0, 0]]
    assert got["token_type_ids"].dtype == np.int32
    assert got["position_ids"].tolist() == [[0, 1, 2]]
    assert got["decoder_input_ids"].tolist() == [[2, 5, 6]]  # shifted right after the start
    assert got["decoder_attention_mask"].dtype == np.bool_
    assert got["decoder_attention_mask"].tolist() == [[True] * 3]
    assert feeds(model, [5, 6, 7])["decoder_input_ids"].tolist() == [[0, 5, 6]]
    types = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16,
             11: np.float64}
    for etype, dtype in types.items():
        one = OnnxModel(None, None, [("attention_mask", etype, (1, 2))], [])
        assert feeds(one, [1, 2])["attention_mask"].dtype == dtype


def test_an_input_the_audit_cannot_fill_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError) as err:
        feeds(OnnxModel(None, None, [("past_key_values.0", 1, ())], []), [1, 2])
    msg = str(err.value)
    assert "graph input 'past_key_values.0' is not one the audit can fill" in msg
    assert "input_ids, attention_mask" in msg and "without a KV cache" in msg
    assert err.value.field == "onnx"
    with pytest.raises(ConfigError) as err:
        feeds(OnnxModel(None, None, [("input_ids", 8, ())], []), [1, 2])
    assert str(err.value) == ("onnx: graph input 'input_ids' has element type 8, not an integer "
                              "or float tensor")
    assert err.value.field == "onnx"


def test_a_session_adds_outputs_on_a_copy_and_runs(tmp_path) -> None:
    from onnx import helper

    path = _save(tmp_path / "m.onnx", [("x", 1, [2])],
                 nodes=[helper.make_node("Neg", ["x"], ["h"]),
                        helper.make_node("Identity", ["h"], ["y"])])
    model = open_onnx(path)
    sess = session(model, ["h", "y"])  # (y is an output already)
    assert [o.name for o in sess.get_outputs()] == ["y", "h"]
    assert [o.name for o in model.proto.graph.output] == ["y"]  # the model is unchanged
    out, secs = run(sess, {"x": np.array([1.0, -2.0], np.float32)}, ["h", "y"])
    assert out["h"].tolist() == [-1.0, 2.0] and out["y"].tolist() == [-1.0, 2.0]
    assert secs >= 0.0
    assert [o.name for o in session(model).get_outputs()] == ["y"]
    with pytest.raises(ConfigError) as err:
        run(sess, {"x": np.ones(3, np.int64)}, ["y"])
    assert str(err.value).startswith("onnx: ONNX Runtime failed on the token ids: ")
    assert "tensor(int64)" in str(err.value)  # the runtime's own words
    assert "\n" not in str(err.value)


def test_a_run_is_timed_on_the_monotonic_clock(tmp_path, monkeypatch) -> None:
    from types import SimpleNamespace

    path = _save(tmp_path / "m.onnx", [("x", 1, [2])])
    sess = session(open_onnx(path))
    ticks = iter([10.0, 12.5])
    monkeypatch.setattr(onnx_run, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
    _out, secs = run(sess, {"x": np.ones(2, np.float32)}, ["y"])
    assert secs == 2.5


def test_weights_kept_beside_the_graph_are_read_by_the_runtime(tmp_path) -> None:
    """The graph is handed to ONNX Runtime as bytes without its external data: the runtime is
    told the folder the weights file sits in."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(8, 8), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    folder = tmp_path / "model"
    folder.mkdir()
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]),
              str(folder / "m.onnx"), save_as_external_data=True, location="m.weights",
              size_threshold=0)
    assert (folder / "m.weights").is_file()
    model = open_onnx(folder / "m.onnx")
    (init,) = model.proto.graph.initializer  # the weights stay on disk
    assert init.data_location == onnx.TensorProto.EXTERNAL and not init.raw_data
    out, _secs = run(session(model, ["y"]), {"x": np.ones((1, 8), np.float32)}, ["y"])
    np.testing.assert_array_equal(out["y"], np.arange(64.0).reshape(8, 8).sum(axis=0)[None])


def test_the_session_runs_on_the_cpu_and_logs_errors_only(tmp_path, monkeypatch) -> None:
    import onnxruntime as ort

    seen = {}
    real = ort.InferenceSession

    def spy(model_bytes, opts=None, providers=None, **kw):
        seen.update(level=opts.log_severity_level, providers=providers)
        return real(model_bytes, opts, providers=providers, **kw)

    monkeypatch.setattr(ort, "InferenceSession", spy)
    session(open_onnx(_save(tmp_path / "m.onnx", [("x", 1, [2])])))
    assert seen == {"level": 3, "providers": ["CPUExecutionProvider"]}


def test_a_graph_the_runtime_refuses_is_one_line(tmp_path) -> None:
    from onnx import helper

    path = _save(tmp_path / "bad.onnx", [("x", 1, [2])],
                 nodes=[helper.make_node("NoSuchOp", ["x"], ["y"])])
    with pytest.raises(ConfigError) as err:
        session(open_onnx(path))
    msg = str(err.value)
    assert msg.startswith(f"onnx: ONNX Runtime cannot run {str(path)!r}: ") and "\n" not in msg
    assert "NoSuchOp" in msg  # the runtime's own words


@pytest.mark.parametrize(("sizes", "budget", "want"), [
    ([], 6, []), ([3, 3, 3], 6, [[0, 1], [2]]), ([6], 6, [[0]]), ([2, 4], 6, [[0, 1]]),
    ([2, 5], 6, [[0], [1]]), ([7, 1], 6, [[0], [1]]), ([1, 7, 1], 6, [[0], [1], [2]]),
    ([1, 1, 1, 1], 2, [[0, 1], [2, 3]])])
def test_groups_of_sites_within_the_budget(sizes, budget, want) -> None:
    assert groups(sizes, budget) == want


def test_the_default_budget_is_512_mib() -> None:
    assert MEMORY_BUDGET == 512 * 2**20
    half = MEMORY_BUDGET // 2
    assert groups([half] * 3) == [[0, 1], [2]]
    assert groups([half, half + 1]) == [[0], [1]]


def test_one_line_of_an_error() -> None:
    assert onnx_run._one_line(ValueError("first\nsecond")) == "first"
    assert onnx_run._one_line(ValueError("  \n" + "x" * 400 + "\nz")) == "x" * 300
    assert onnx_run._one_line(KeyError()) == "KeyError"
    assert onnx_run._one_line(ValueError("   ")) == "ValueError"
