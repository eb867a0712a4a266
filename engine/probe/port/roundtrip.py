"""Round trips for the port audit's own checks: tiny zoo models exported to ONNX (and GGUF, in
:mod:`gguf_write`), audited beside their source. The tests and ``bench/bench_port.py`` use it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: the zoo entries of the round trip (name, changes to the entry's config)
ROUND_TRIP: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("BERT", "BERT", {}),
    ("GPT-2 (1/(layer+1))", "GPT-2, scale_attn_by_inverse_layer_idx", {}),
    ("Llama (GQA 4q/2kv, RoPE)", "Llama", {"num_key_value_heads": 2}),
    ("T5 (encoder-decoder)", "T5", {}),
)


def zoo_model(entry_name: str, changes: dict[str, Any] | None = None, seed: int = 0) -> Any:
    """A zoo entry's tiny random model (wrapped for the probe), its config changed."""
    from engine.probe import zoo

    entry = {e.name: e for e in zoo.ZOO}[entry_name]
    if changes:
        entry = dataclasses.replace(entry, kwargs={**entry.kwargs, **changes})
    return zoo.build(entry, seed)


def export_onnx(loaded: Any, ids: Sequence[int], path: str | Path, dynamo: bool = False) -> Path:
    """``loaded.model`` as an ONNX graph for a batch of one of ``len(ids)`` tokens, eager
    attention (as torch.onnx.export writes it: MatMul, Mul, Add, Softmax, MatMul)."""
    import torch

    from engine.probe.capture import forward_kwargs

    net = loaded.model
    kw = forward_kwargs(net, ids)
    use_cache = kw.pop("use_cache", None)
    names = list(kw)

    class _Wrap(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, *args: Any) -> Any:
            extra = {} if use_cache is None else {"use_cache": False}
            return self.m(**dict(zip(names, args)), **extra)[0]

    prev = net.config._attn_implementation
    net.set_attn_implementation("eager")  # the tap's own implementation does not export
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(_Wrap(net).eval(), tuple(kw.values()), str(path),
                              input_names=names, output_names=["hidden"], dynamo=dynamo,
                              opset_version=18 if not dynamo else None,
                              **({"verbose": False} if dynamo else {}))
    finally:
        net.set_attn_implementation(prev)
    return Path(path)
