"""The port audit's round trip without building zoo models: the zoo and its builder replaced by
stand-ins (which entry, which config changes, which seed reach the builder), and a tiny torch
module exported for real (milliseconds once torch.onnx is imported) whose graph is read back
and evaluated by onnx's reference evaluator against the module's own arithmetic."""

from __future__ import annotations

import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

from engine.probe import zoo  # noqa: E402
from engine.probe.port.roundtrip import ROUND_TRIP, export_onnx, zoo_model  # noqa: E402


def _entries() -> tuple[zoo.ZooEntry, ...]:
    return (zoo.ZooEntry("A", "AConfig", {"n": 1, "m": 2}),
            zoo.ZooEntry("B", "BConfig", {"n": 3, "m": 4}),
            zoo.ZooEntry("C", "CConfig", {"n": 5}))


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[tuple[zoo.ZooEntry, int]]:
    """What zoo.build was given, call by call (it returns that pair too)."""
    calls: list[tuple[zoo.ZooEntry, int]] = []

    def build(entry: zoo.ZooEntry, seed: int = 0) -> tuple[zoo.ZooEntry, int]:
        calls.append((entry, seed))
        return entry, seed

    monkeypatch.setattr(zoo, "ZOO", _entries())
    monkeypatch.setattr(zoo, "build", build)
    return calls


def test_the_named_entry_is_built_with_its_seed(built) -> None:
    entry, seed = zoo_model("B")
    assert (entry, seed) == (_entries()[1], 0)
    assert zoo_model("C", seed=7) == (_entries()[2], 7)
    assert zoo_model("A", {}, 2) == (_entries()[0], 2)
    assert len(built) == 3
    with pytest.raises(KeyError):
        zoo_model("D")


def test_changes_replace_and_add_config_keys_and_leave_the_zoo_alone(built) -> None:
    entry, _seed = zoo_model("B", {"m": 40, "k": 9}, seed=1)
    assert entry.kwargs == {"n": 3, "m": 40, "k": 9}
    assert (entry.name, entry.config) == ("B", "BConfig")
    assert zoo.ZOO[1].kwargs == {"n": 3, "m": 4}


def test_every_round_trip_entry_is_in_the_zoo() -> None:
    names = {e.name for e in zoo.ZOO}
    assert [zoo_name in names for _label, zoo_name, _changes in ROUND_TRIP] == [True] * 4


class _Net(torch.nn.Module):
    """A "model" of two outputs: hidden = 2 ids + mask + 1 first, 3 (2 ids + mask) second; it
    records the attention implementation, use_cache and mode each call ran under."""

    def __init__(self, with_cache: bool = True, fail: bool = False) -> None:
        super().__init__()
        self.config = types.SimpleNamespace(_attn_implementation="sdpa")
        self.seen: list[tuple[str, Any, bool]] = []
        self.fail = fail
        if not with_cache:
            self.forward = self._forward_no_cache  # type: ignore[method-assign]

    def set_attn_implementation(self, name: str) -> None:
        self.config._attn_implementation = name

    def forward(self, input_ids: Any, attention_mask: Any, use_cache: Any = None) -> Any:
        return self._compute(input_ids, attention_mask, use_cache)

    def _forward_no_cache(self, input_ids: Any, attention_mask: Any) -> Any:
        return self._compute(input_ids, attention_mask, None)

    def _compute(self, input_ids: Any, attention_mask: Any, use_cache: Any) -> Any:
        self.seen.append((self.config._attn_implementation, use_cache, self.training))
        warnings.warn("a tracer warning", UserWarning, stacklevel=1)
        if self.fail:
            raise RuntimeError("export failed")
        x = input_ids.float() * 2 + attention_mask.float()
        return x + 1, x * 3


def _run(path: Path, ids: list[int]) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    feeds = {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, len(ids)),
                                                                               np.int64)}
    return ReferenceEvaluator(onnx.load(path)).run(None, feeds)[0]


def test_an_export_is_the_first_output_of_one_batch_of_the_ids(tmp_path) -> None:
    net = _Net()
    net.train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = export_onnx(types.SimpleNamespace(model=net), [3, 4, 5], str(tmp_path / "a.onnx"))
    assert path == tmp_path / "a.onnx" and isinstance(path, Path)
    assert not [w for w in caught if "tracer warning" in str(w.message)]
    model = onnx.load(path)
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask"]
    assert [o.name for o in model.graph.output] == ["hidden"]
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [1, 3]
    assert {o.domain: o.version for o in model.opset_import}[""] == 18
    # 2 * [3, 4, 5] + 1 + 1
    np.testing.assert_array_equal(_run(path, [3, 4, 5]), [[8.0, 10.0, 12.0]])
    # traced eagerly, evaluated, without the cache; the implementation put back after
    assert net.seen and all(s == ("eager", False, False) for s in net.seen)
    assert net.config._attn_implementation == "sdpa"


def test_a_model_without_use_cache_is_not_given_one(tmp_path) -> None:
    net = _Net(with_cache=False)
    path = export_onnx(types.SimpleNamespace(model=net), [1, 2], tmp_path / "b.onnx")
    assert [i.name for i in onnx.load(path).graph.input] == ["input_ids", "attention_mask"]
    np.testing.assert_array_equal(_run(path, [1, 2]), [[4.0, 6.0]])
    assert net.seen and all(s == ("eager", None, False) for s in net.seen)


def test_the_implementation_is_put_back_when_the_export_fails(tmp_path) -> None:
    net = _Net(fail=True)
    with pytest.raises(RuntimeError, match="export failed"):
        export_onnx(types.SimpleNamespace(model=net), [1], tmp_path / "c.onnx")
    assert net.seen[0][0] == "eager" and net.config._attn_implementation == "sdpa"


def test_the_dynamo_exporter_gets_no_opset_and_no_verbosity(monkeypatch, tmp_path) -> None:
    """The dynamo exporter is slow to run: what it is asked for is recorded instead."""
    calls: list[tuple[Any, dict[str, Any]]] = []

    def export(module: Any, args: Any, path: str, **kw: Any) -> None:
        calls.append((args, kw))
        assert isinstance(path, str)
        assert float(module(*args)[0, 0]) == 2 * 7 + 1 + 1

    monkeypatch.setattr(torch.onnx, "export", export)
    net = _Net()
    assert export_onnx(types.SimpleNamespace(model=net), [7], tmp_path / "d.onnx",
                       dynamo=True) == tmp_path / "d.onnx"
    ((args, kw),) = calls
    assert [a.tolist() for a in args] == [[[7]], [[1]]]
    assert kw == {"input_names": ["input_ids", "attention_mask"], "output_names": ["hidden"],
                  "dynamo": True, "opset_version": None, "verbose": False}
    export_onnx(types.SimpleNamespace(model=net), [7], tmp_path / "e.onnx")
    assert calls[1][1] == {"input_names": ["input_ids", "attention_mask"],
                           "output_names": ["hidden"], "dynamo": False, "opset_version": 18}
