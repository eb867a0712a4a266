"""Audit the weights the Training lab saves (``weights.pt`` of ``main.py train --out DIR``).

The file holds one state dict per scaling rule. Each run is rebuilt as the lab's own
``AttentionModel`` and run on the lab's probe batch (the same seed stream the trainer observes).
Forward hooks read what each attention layer really did, without trusting the rule's name:

* q and k from W_Q and W_K applied to the layer's input (the raw q.k, before any scale);
* P: the softmax weights times the factor the values actually see, measured as the least-squares
  ratio of the output fed to W_O to weights @ V (1 for a correct model, 1/sqrt(d_k) when the
  scale is applied after the softmax).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import ConfigError
from engine.probe.audit import AuditResult, AuditSnapshot, fit_layers

WEIGHTS_FILE = "weights.pt"


def training_weights_path(model: str | None) -> Path | None:
    """The weights.pt behind ``model`` (the file itself or a folder holding it), else None."""
    if model is None:
        return None
    p = Path(model).expanduser()
    if p.is_file() and p.suffix == ".pt":
        return p
    if p.is_dir() and (p / WEIGHTS_FILE).is_file():
        cfg = p / "config.json"
        if not cfg.is_file() or _is_training_config(cfg):
            return p / WEIGHTS_FILE
    return None


def _is_training_config(path: Path) -> bool:
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "model_type" not in data


def load_training_runs(path: Path) -> tuple[Any, dict[str, Any], int]:
    """(TrainingConfig, {rule: AttentionModel in eval mode}, step) from a weights.pt."""
    import torch

    from engine.training.config import TrainingConfig
    from engine.training.model import AttentionModel

    try:
        data = torch.load(str(path), map_location="cpu", weights_only=True)
        cfg = TrainingConfig.from_dict(data["config"])
        weights = data["weights"]
    except ConfigError:
        raise
    except Exception as exc:  # a foreign .pt, a truncated file
        raise ConfigError("model", f"{str(path)!r} is not a Training lab weights file: "
                          f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
                          ) from None
    runs = {}
    for rule, state in weights.items():
        model = AttentionModel(cfg, rule, cfg.in_features, cfg.vocab)
        model.load_state_dict(state)
        runs[rule] = model.eval()
    if not runs:
        raise ConfigError("model", f"{str(path)!r} holds no runs")
    return cfg, runs, int(data.get("step", 0))


def capture_training(cfg: Any, model: Any, batch: Any) -> tuple[list[np.ndarray], list[np.ndarray],
                                                                 np.ndarray, float]:
    """Per layer (H, B*T, T) raw scores and effective weights, the (B*T, T) visible mask, and
    the forward time."""
    import torch

    b, t = batch.inputs.shape[0], batch.inputs.shape[1]
    h, d_k = cfg.heads, cfg.head_dim
    inputs: list[torch.Tensor] = []
    outs: list[torch.Tensor] = []
    handles = []
    for blk in model.blocks:
        handles.append(blk.attn.register_forward_pre_hook(
            lambda _m, args: inputs.append(args[0].detach())))
        handles.append(blk.attn.w_o.register_forward_pre_hook(
            lambda _m, args: outs.append(args[0].detach())))
    caps: list[Any] = []
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            model(batch.inputs, batch.readout, batch.mask, capture=caps)
    finally:
        for hd in handles:
            hd.remove()
    forward_s = time.perf_counter() - t0
    split = lambda y: y.view(b, t, h, d_k).transpose(1, 2).double()  # noqa: E731
    scores, probs = [], []
    vis = None
    for blk, x, o, cap in zip(model.blocks, inputs, outs, caps):
        with torch.no_grad():
            q, k, v = split(blk.attn.w_q(x)), split(blk.attn.w_k(x)), split(blk.attn.w_v(x))
        w = cap.weights.double()  # (B, H, T, T)
        wv = w @ v  # (B, H, T, d_k)
        used = split(o)
        ratio = (used * wv).sum(dim=(0, 2, 3)) / (wv * wv).sum(dim=(0, 2, 3)).clamp_min(1e-300)
        p_eff = w * ratio.view(1, h, 1, 1)
        z = q @ k.transpose(-1, -2)
        scores.append(z.permute(1, 0, 2, 3).reshape(h, b * t, t).numpy())
        probs.append(p_eff.permute(1, 0, 2, 3).reshape(h, b * t, t).numpy())
        if vis is None:
            vis = cap.mask[:, 0].expand(b, t, t).reshape(b * t, t).cpu().numpy().astype(bool)
    assert vis is not None
    return scores, probs, vis, forward_s


def audit_training(path: Path, rules: tuple[str, ...] | None = None, examples: int = 16,
                   cancelled: Callable[[], bool] = lambda: False) -> Iterator[AuditSnapshot]:
    """Audit every run (or ``rules``) of a weights.pt; one final snapshot per run (in order)."""
    import torch

    from engine.training.tasks import make_batch, stream_seed

    cfg, runs, step = load_training_runs(path)
    if rules:
        unknown = [r for r in rules if r not in runs]
        if unknown:
            raise ConfigError("run", f"no run {unknown[0]!r} in {str(path)!r}; it has "
                              f"{', '.join(runs)}")
        runs = {r: runs[r] for r in rules}
    batch = make_batch(cfg, examples, torch.Generator().manual_seed(stream_seed(cfg.seed, 2)))
    for i, (rule, model) in enumerate(runs.items()):
        yield AuditSnapshot(f"run {rule}", i / len(runs))
        scores, probs, vis, fwd = capture_training(cfg, model, batch)
        t0 = time.perf_counter()
        hf, lf, hv, lv = fit_layers(scores, probs, vis, cfg.head_dim, cfg.d_model, cancelled)
        result = AuditResult(
            model_name=f"Training lab ({path.name}, step {step})", model_type="training-lab",
            run=rule, n_layers=cfg.layers, n_heads=cfg.heads, d_k=cfg.head_dim,
            d_model=cfg.d_model, causal=cfg.task == "recall", n_tokens=int(batch.inputs.shape[1]),
            tokens=(), inject={}, declared_scale=np.full(cfg.layers, np.nan),
            head_fits=hf, layer_fits=lf, head_verdicts=hv, layer_verdicts=lv,
            note=f"the lab's own attention code on {examples} probe examples "
                 f"(task {cfg.task}, seed {cfg.seed})",
            forward_s=fwd, fit_s=time.perf_counter() - t0, extra={"step": step})
        yield AuditSnapshot(f"run {rule}", (i + 1) / len(runs), done=i + 1 == len(runs),
                            result=result)
