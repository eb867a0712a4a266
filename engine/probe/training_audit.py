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
from typing import Any, NoReturn

import numpy as np

from engine.errors import ConfigError, quote
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
    from engine.readers.json_file import read_json

    try:
        data = read_json(path, max_bytes=TRAINING_CONFIG_MAX, kind="config.json")
    except ConfigError:  # unreadable, too large, too deep: not the lab's (the loader says why)
        return False
    return isinstance(data, dict) and "model_type" not in data


#: the largest config.json of ``train --out`` read to tell it from a transformers folder's
TRAINING_CONFIG_MAX = 1_000_000
#: the largest weights.pt read: every run's parameters (PARAMS_MAX float32 in all) and some room
WEIGHTS_FILE_MAX = 1_000_000_000
#: the largest object part (data.pkl) of a weights.pt read: the lab's holds the config and the
#: tensors' names (~100 bytes each): tens of kB. torch's weights-only unpickler is pure Python
#: (~4 s per million items), so a larger one is refused before it is unpickled
WEIGHTS_PICKLE_MAX = 512_000


def load_training_runs(path: Path) -> tuple[Any, dict[str, Any], int]:
    """(TrainingConfig, {rule: AttentionModel in eval mode}, step) from a weights.pt, checked
    completely before any of it is used: the file's structure and types, the config, each run's
    rule and every tensor's name, shape, dtype and finiteness against the model the config
    builds. A problem is one FileFormatError (``FILE: field path: what is wrong``)."""
    import torch

    from engine.readers.schema import AnyObject, Int, MapOf, Record, errors_in_file
    from engine.training.config import TrainingConfig

    source = str(path)
    data = _torch_load(path)
    schema = Record({"config": AnyObject(), "step": Int(lo=0), "weights": MapOf(
        AnyObject(what="a state dict (an object of tensors)"), max_items=64)},
        required=frozenset({"config", "weights"}))
    with errors_in_file(source, option="model"):
        schema.check(data)
        if not data["weights"]:
            raise ConfigError("weights", "holds no runs")
    with errors_in_file(source, "config", option="model"):
        cfg = TrainingConfig.from_dict(data["config"])
    runs = {}
    for rule, state in data["weights"].items():
        with errors_in_file(source, f"weights.{rule}", option="model"):
            runs[rule] = _run_model(cfg, rule, state, torch)
    return cfg, runs, int(data.get("step", 0))


def _torch_load(path: Path) -> Any:
    """The object in a torch.save file: size-checked first, and ``weights_only`` (no pickle code
    runs: a foreign payload is refused)."""
    import torch

    from engine.errors import FileFormatError
    from engine.readers.json_file import check_file

    check_file(path, max_bytes=WEIGHTS_FILE_MAX, kind="weights.pt", option="model")
    _check_archive(path)
    try:
        return torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # a foreign .pt, a truncated file, a pickle with code in it
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise FileFormatError(str(path), "", f"not a Training lab weights file ({first})",
                              "model") from None


def _check_archive(path: Path) -> None:
    """A torch.save file is a zip archive: its object part (data.pkl) must be small and the
    whole unpacked no larger than the file may be (FileFormatError before anything unpickles)."""
    import zipfile

    from engine.errors import FileFormatError
    from engine.readers.json_file import too_large

    def refuse(problem: str) -> NoReturn:
        raise FileFormatError(str(path), "", problem, "model")

    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        refuse(f"not a Training lab weights file (not a torch.save archive: {str(exc)[:80]})")
    pickles = [i for i in infos if i.filename.rsplit("/", 1)[-1] == "data.pkl"]
    if len(pickles) != 1:
        refuse("not a Training lab weights file (no single data.pkl in the archive)")
    if pickles[0].file_size > WEIGHTS_PICKLE_MAX:
        refuse(f"its object part (data.pkl) is {too_large(pickles[0].file_size, WEIGHTS_PICKLE_MAX, 'weights.pt')}")
    unpacked = sum(i.file_size for i in infos)
    if unpacked > WEIGHTS_FILE_MAX:
        refuse(f"unpacked, {too_large(unpacked, WEIGHTS_FILE_MAX, 'weights.pt')}")


def _run_model(cfg: Any, rule: str, state: dict[str, Any], torch: Any) -> Any:
    """The lab's model of ``rule`` with ``state`` loaded, after each tensor is checked against
    the model's own (ConfigError naming the tensor)."""
    from engine.training.model import AttentionModel

    if rule not in cfg.scalings:
        raise ConfigError("", f"not one of the config's rules ({', '.join(cfg.scalings)})")
    model = AttentionModel(cfg, rule, cfg.in_features, cfg.vocab)
    expected = model.state_dict()
    for name in state:
        if name not in expected:
            raise ConfigError(quote(name), "not a parameter of the model the config builds")
    for name, want in expected.items():
        got = state.get(name)
        if got is None:
            raise ConfigError(name, "required, but missing")
        if not isinstance(got, torch.Tensor):
            raise ConfigError(name, f"must be a tensor, got {type(got).__name__}")
        if tuple(got.shape) != tuple(want.shape):
            raise ConfigError(name, f"shape {tuple(got.shape)}, but the config's model has "
                                    f"{tuple(want.shape)}")
        if got.is_floating_point() != want.is_floating_point() or (
                not want.is_floating_point() and got.dtype != want.dtype):
            raise ConfigError(name, f"dtype {got.dtype}, the model's is {want.dtype}")
        if got.is_floating_point() and not bool(torch.isfinite(got).all()):
            raise ConfigError(name, "holds NaN or infinite values")
    model.load_state_dict(state)
    return model.eval()


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
