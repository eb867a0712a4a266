"""Open an ONNX file and run it in ONNX Runtime on token ids, reading back chosen tensors.

The model is read without its external data (the runtime reads that itself), its attention
tensors are made extra graph outputs of a copy (the file is never changed), and the runtime runs
on the CPU provider. Sites are read in groups whose tensors fit :data:`MEMORY_BUDGET`: a long
text on a big model costs more runs, never more memory.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import ConfigError

DEPLOY_HINT = 'pip install "attention-scaling-lab[deploy]"'
#: bytes of read-back tensors one run may hold (the sites are read in groups below it)
MEMORY_BUDGET = 512 * 2**20
#: graph inputs the audit knows how to fill from token ids
KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids",
                "decoder_input_ids", "decoder_attention_mask")
_NP_TYPES = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16,
             11: np.float64}


def deploy_available() -> bool:
    """True when onnx and onnxruntime can be imported (the ``deploy`` extra)."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))


def _need_deploy(field: str) -> None:
    if not deploy_available():
        raise ConfigError(field, f"auditing an ONNX graph needs the optional 'deploy' extra: "
                          f"{DEPLOY_HINT}")


@dataclass
class OnnxModel:
    path: Path
    proto: Any  #: ModelProto without external data
    inputs: list[tuple[str, int, tuple[Any, ...]]]  #: (name, element type, dims)
    outputs: list[str]


def open_onnx(path: str | Path, field: str = "onnx") -> OnnxModel:
    """Read an ONNX file (its graph; external weights stay on disk); one line when it is not."""
    _need_deploy(field)
    import onnx

    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(field, f"{str(p)!r} is not a file")
    try:
        proto = onnx.load(str(p), load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError, a truncated file, a text file
        raise ConfigError(field, f"{str(p)!r} is not an ONNX model ({_one_line(exc)})") from None
    if not proto.graph.node:
        raise ConfigError(field, f"{str(p)!r} holds no graph nodes")
    inits = {i.name for i in proto.graph.initializer}
    inputs = []
    for vi in proto.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or None
                     for d in tt.shape.dim)
        inputs.append((vi.name, int(tt.elem_type), dims))
    return OnnxModel(p, proto, inputs, [o.name for o in proto.graph.output])


def fixed_length(model: OnnxModel) -> int | None:
    """The sequence length the graph was exported for, when its input_ids shape is fixed."""
    for name, _t, dims in model.inputs:
        if name in ("input_ids", "decoder_input_ids") and len(dims) == 2 and isinstance(
                dims[1], int) and dims[1] > 0:
            return dims[1]
    return None


def feeds(model: OnnxModel, ids: Sequence[int], decoder_start: int = 0) -> dict[str, np.ndarray]:
    """The inputs of one batch-of-one run on ``ids`` (an encoder-decoder graph's decoder reads
    the same text shifted right by one, as the source audit feeds it)."""
    n = len(ids)
    ids_arr = np.asarray([list(ids)])
    values = {"input_ids": ids_arr, "attention_mask": np.ones((1, n)),
              "token_type_ids": np.zeros((1, n)), "position_ids": np.arange(n)[None],
              "decoder_input_ids": np.concatenate([[[decoder_start]], ids_arr[:, :-1]], axis=1),
              "decoder_attention_mask": np.ones((1, n))}
    out = {}
    for name, etype, _dims in model.inputs:
        if name not in values:
            raise ConfigError("onnx", f"graph input {name!r} is not one the audit can fill (it "
                              f"feeds {', '.join(KNOWN_INPUTS)}); export the model without a "
                              "KV cache")
        dtype = _NP_TYPES.get(etype)
        if dtype is None:
            raise ConfigError("onnx", f"graph input {name!r} has element type {etype}, not an "
                              "integer or float tensor")
        out[name] = values[name].astype(dtype)
    return out


def session(model: OnnxModel, extra_outputs: Sequence[str] = ()) -> Any:
    """An ONNX Runtime CPU session of ``model`` with ``extra_outputs`` added as graph outputs
    (on a copy: the file is not changed)."""
    import onnx
    import onnxruntime as ort

    proto = model.proto
    if extra_outputs:
        proto = onnx.ModelProto()
        proto.CopyFrom(model.proto)
        have = {o.name for o in proto.graph.output}
        proto.graph.output.extend(onnx.ValueInfoProto(name=n) for n in extra_outputs
                                  if n not in have)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                  str(model.path.parent))
    try:
        return ort.InferenceSession(proto.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise ConfigError("onnx", f"ONNX Runtime cannot run {str(model.path)!r}: "
                          f"{_one_line(exc)}") from None


def run(sess: Any, feed: dict[str, np.ndarray], names: Sequence[str]
        ) -> tuple[dict[str, np.ndarray], float]:
    """(the named outputs of one run, its wall time)."""
    t0 = time.perf_counter()
    try:
        values = sess.run(list(names), feed)
    except Exception as exc:
        raise ConfigError("onnx", f"ONNX Runtime failed on the token ids: {_one_line(exc)}") \
            from None
    return dict(zip(names, values)), time.perf_counter() - t0


def groups(sizes: Sequence[int], budget: int = MEMORY_BUDGET) -> list[list[int]]:
    """Consecutive site indices whose byte sizes add up to at most ``budget`` (one site a group
    at least)."""
    out: list[list[int]] = []
    total = 0
    for i, size in enumerate(sizes):
        if out and total + size <= budget:
            out[-1].append(i)
            total += size
        else:
            out.append([i])
            total = size
    return out


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0][:300] if text else type(exc).__name__)
