"""The scale audit of an ONNX graph as ONNX Runtime runs it, beside its source model's audit.

``audit_onnx(cfg)`` is a generator of :class:`~engine.probe.port.result.PortSnapshot`: it finds
the graph's attention sites (:mod:`onnx_graph`), runs the source model's own audit on the same
token ids (when a reference folder is given), runs the graph once as shipped (the baseline: its
time and output) and once more per group of sites with their tensors exposed, fits every site as
the source audit does, and compares layer by layer (:mod:`compare`). It checks ``cancelled()``
between runs and between sites and starts no threads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import Cancelled, ConfigError
from engine.probe.memory import DEFAULT_BUDGET_GB, check_budget
from engine.probe.port.result import PortAudit, PortLayer, PortSnapshot, build_layers
from engine.validate import ConfigMethods, check_int

#: token ids read when neither a reference nor the graph's folder has a tokenizer
DEFAULT_IDS = 32
NOTE = ("the port's attention measured from the tensors ONNX Runtime computed (extra graph "
        "outputs on a copy of the graph): scale against the q and k projections' outputs, as "
        "the source audit measures it")


@dataclass(frozen=True)
class PortConfig(ConfigMethods):
    """A port file (``.onnx`` or ``.gguf``), an optional source folder, the text to run."""

    path: str
    reference: str | None = None
    text: str | None = None
    max_tokens: int | None = None
    format: str = ""  #: "onnx" or "gguf"; "" reads it from the file name
    #: the source model is loaded under this memory budget (GB; engine.probe.memory)
    memory_budget: float = DEFAULT_BUDGET_GB

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path.strip():
            raise ConfigError("path", "must be an .onnx or .gguf file")
        if self.format not in ("", "onnx", "gguf"):
            raise ConfigError("format", f"must be onnx or gguf, got {self.format!r}")
        if self.reference is not None and (not isinstance(self.reference, str)
                                           or not self.reference.strip()):
            raise ConfigError("reference", "must be a model folder path (or left out)")
        if self.text is not None and (not isinstance(self.text, str) or not self.text.strip()):
            raise ConfigError("text", "must contain at least one non-blank character")
        if self.max_tokens is not None:
            object.__setattr__(self, "max_tokens",
                               check_int("max_tokens", self.max_tokens, 2, 1_000_000))
        object.__setattr__(self, "memory_budget", check_budget(self.memory_budget))

    @property
    def kind(self) -> str:
        if self.format:
            return self.format
        return "gguf" if self.path.lower().endswith(".gguf") else "onnx"


def token_ids(model: Any, loaded: Any, text: str | None, max_tokens: int | None
              ) -> tuple[tuple[int, ...], tuple[str, ...], str]:
    """(ids, labels, where they come from): the reference's tokenizer, else one next to the
    graph, else seeded ids over the graph's vocabulary (no text then)."""
    from engine.probe.loader import tokenize
    from engine.probe.port.onnx_run import fixed_length
    from engine.probe.texts import default_text

    fixed = fixed_length(model)
    limit = min(x for x in (fixed, max_tokens, 10**9) if x is not None)
    tok_owner = loaded if getattr(loaded, "tokenizer", None) is not None else \
        _folder_tokenizer(model.path.parent)
    if tok_owner is not None:
        t = tokenize(tok_owner, text or default_text(), limit)
        if fixed is not None and len(t.ids) != fixed:
            raise ConfigError("text", f"gives {len(t.ids)} tokens; the graph was exported for "
                              f"exactly {fixed} (give a longer text, or export with dynamic axes)")
        return t.ids, t.tokens, ("the reference's tokenizer" if tok_owner is loaded
                                 else "the tokenizer in the graph's folder")
    if text is not None:
        raise ConfigError("text", "needs a tokenizer: give the source folder (--reference) or "
                          "put the tokenizer files next to the .onnx file")
    n = fixed or (max_tokens or DEFAULT_IDS)
    vocab = _vocab(model) or _config_vocab(loaded) or 100
    ids = np.random.default_rng(0).integers(1, vocab, size=n)
    return tuple(int(i) for i in ids), (), f"{n} seeded random token ids (no tokenizer)"


def _config_vocab(loaded: Any) -> int | None:
    v = getattr(getattr(getattr(loaded, "model", None), "config", None), "vocab_size", None)
    return v if isinstance(v, int) and v > 1 else None


def _folder_tokenizer(folder: Path) -> Any:
    """A LoadedModel-like holder of the tokenizer saved next to the graph, or None."""
    if not any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
        return None
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception:  # no usable tokenizer there: seeded ids instead
        return None

    @dataclass
    class _Holder:
        tokenizer: Any
        max_tokens: int = 10**9

    return _Holder(tok)


def _vocab(model: Any) -> int | None:
    """Rows of the embedding the token ids index (the Gather on input_ids)."""
    shapes = {i.name: tuple(i.dims) for i in model.proto.graph.initializer}
    for node in model.proto.graph.node:
        if node.op_type == "Gather" and len(node.input) == 2 and node.input[1] == "input_ids":
            shape = shapes.get(node.input[0])
            if shape:
                return int(shape[0])
    return None


def _source_audit(loaded: Any, ids, tokens, cancelled) -> Iterator[Any]:
    from engine.probe.audit import audit_tokens

    for snap in audit_tokens(loaded, ids, tokens, {}, cancelled):
        yield PortSnapshot(f"source: {snap.stage}", 0.05 + 0.25 * snap.fraction)
        if snap.result is not None:
            yield snap.result


def audit_onnx(cfg: PortConfig, loaded: Any = None,
               cancelled: Callable[[], bool] = lambda: False,
               ids: Sequence[int] | None = None) -> Iterator[PortSnapshot]:
    """Audit ``cfg.path`` (an ONNX graph) beside ``cfg.reference`` (or ``loaded``); ``ids``
    replaces the text (tests: models without a tokenizer)."""
    from engine.probe.port.onnx_graph import LOOKED_FOR, find_sites
    from engine.probe.port.onnx_run import open_onnx

    yield PortSnapshot("reading the graph", 0.0)
    model = open_onnx(cfg.path, "onnx")
    sites = find_sites(model.proto)
    if not sites:
        raise ConfigError("onnx", f"found no attention in {str(model.path)!r}: looked for "
                          f"{LOOKED_FOR}")
    if loaded is None and cfg.reference is not None:
        from engine.probe.loader import load_model

        yield PortSnapshot("loading the source model", 0.02)
        loaded = load_model(cfg.reference, cfg.memory_budget)
    if ids is None:
        ids, tokens, id_source = token_ids(model, loaded, cfg.text, cfg.max_tokens)
    else:
        ids, tokens, id_source = tuple(int(i) for i in ids), (), "token ids given"
    source = None
    if loaded is not None:
        for item in _source_audit(loaded, ids, tokens, cancelled):
            if isinstance(item, PortSnapshot):
                yield item
            else:
                source = item
    port = yield from _run_port(model, sites, ids, loaded, cancelled)
    layers, findings = build_layers(port["sites"], source)
    yield PortSnapshot("done", 1.0, done=True, result=PortAudit(
        kind="onnx", path=str(model.path), source_name=None if loaded is None else
        loaded.info.name, layers=layers, sites=tuple(port["sites"]), source=source,
        n_tokens=len(ids), tokens=tokens, id_source=id_source, findings=tuple(findings),
        timings=port["timings"], meta=port["meta"], note=NOTE))


def _run_port(model: Any, sites: list[Any], ids, loaded: Any, cancelled) -> Iterator[Any]:
    """Baseline run, then the site groups; returns {"sites", "timings", "meta"}."""
    from engine.probe.port import onnx_run

    start = _decoder_start(loaded)
    feed = onnx_run.feeds(model, ids, start)
    yield PortSnapshot("port: one forward pass as shipped", 0.32)
    plain_sess = onnx_run.session(model)
    plain, plain_s = onnx_run.run(plain_sess, feed, model.outputs)
    d_model = _d_model(loaded, sites)
    fitted: list[Any] = []
    tapped_s = fit_s = 0.0
    runs = 0
    out_diff = 0.0
    todo = [[0]] if len(sites) > 1 else [list(range(len(sites)))]
    while todo:
        group = todo.pop(0)
        if cancelled():
            raise Cancelled()
        yield PortSnapshot(f"port: site {group[0] + 1} of {len(sites)}",
                           0.35 + 0.6 * group[0] / len(sites))
        names = [t for i in group for t in sites[i].tensors()]
        arrays, secs = onnx_run.run(onnx_run.session(model, names), feed,
                                    [*model.outputs, *dict.fromkeys(names)])
        tapped_s += secs
        runs += 1
        out_diff = max(out_diff, _rel_diff(plain, arrays, model.outputs))
        t0 = time.perf_counter()
        for i in group:
            if cancelled():
                raise Cancelled()
            fitted.append(_fit(model, sites[i], arrays, d_model))
        fit_s += time.perf_counter() - t0
        if group == [0] and len(sites) > 1:
            size = sum(np.asarray(arrays[n]).nbytes for n in sites[0].tensors())
            rest = onnx_run.groups([size] * (len(sites) - 1))
            todo = [[j + 1 for j in g] for g in rest]
        del arrays
    return {"sites": fitted,
            "timings": {"forward_as_shipped": plain_s, "forward_tapped": tapped_s,
                        "fit": fit_s, "runs": runs},
            "meta": {"output_rel_diff_tapped_vs_shipped": out_diff,
                     "sites": [{"name": s.name, "kind": s.kind} for s in sites]}}


def _fit(model: Any, site: Any, arrays: dict[str, np.ndarray], d_model: int) -> Any:
    from engine.probe.port.onnx_sites import fit_fused, fit_unfused

    if site.kind == "unfused":
        return fit_unfused(site, arrays, d_model)
    weights = None
    if site.kind == "com.microsoft.Attention":
        weights = _initializers(model, [site.extra.get("weights", ""), site.extra.get("bias", "")])
    return fit_fused(site, arrays, d_model, weights)


def _initializers(model: Any, names: list[str]) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    by_name = {i.name: i for i in model.proto.graph.initializer}
    out = {}
    for key, name in zip(("weights", "bias"), names):
        if name in by_name:
            out[key] = numpy_helper.to_array(by_name[name], base_dir=str(model.path.parent))
    if "weights" not in out:
        raise ConfigError("onnx", "com.microsoft.Attention's weights are not a constant of the "
                          "graph; the audit cannot read its projections")
    return out


def _decoder_start(loaded: Any) -> int:
    if loaded is None:
        return 0
    cfg = loaded.model.config
    for v in (getattr(cfg, "decoder_start_token_id", None), getattr(cfg, "pad_token_id", None)):
        if isinstance(v, int):
            return v
    return 0


def _d_model(loaded: Any, sites: list[Any]) -> int:
    if loaded is not None:
        return int(loaded.info.d_model)
    return 0  # unknown: the verdicts then leave out 1/sqrt(d_model)


def _rel_diff(plain: dict[str, np.ndarray], tapped: dict[str, np.ndarray], names) -> float:
    """Largest relative difference of the graph's own outputs with and without the taps."""
    worst = 0.0
    for n in names:
        a, b = np.asarray(plain[n]), np.asarray(tapped[n])
        if a.shape != b.shape or not np.issubdtype(a.dtype, np.floating):
            continue  # (token ids, a mask: not what the taps could change)
        a, b = a.astype(np.float64), b.astype(np.float64)
        scale = float(np.abs(a).max()) or 1.0
        d = float(np.abs(a - b).max()) / scale
        worst = max(worst, d if math.isfinite(d) else math.inf)
    return worst


__all__ = ["PortConfig", "PortLayer", "audit_onnx", "token_ids"]
