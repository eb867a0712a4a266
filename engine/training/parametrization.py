"""muP for the training model (Yang et al. 2022, "Tensor Programs V"), written out: which
dimensions of every parameter grow with the width, and from that its init, its forward multiplier
and its learning rate. Under ``param = sp`` nothing here runs and the model is as it always was.

Why not ``import mup`` (Microsoft's reference implementation): the package declares torchvision,
pandas and seaborn as dependencies (pip would pull a second torch build), and it leaves attention
to the user. The tests check this module against ``mup`` itself (the same per-parameter learning
rates, init and multipliers on the same model) and against the paper's Table 3 written out.

Which dimensions are widths, as ``mup.set_base_shapes(model, base, delta=delta)`` finds them: a
dimension is a width ("infinite") when it differs between the model at the base width and at
another width; its multiplier is dim / base_dim (1 for a fixed dimension). Then, under ``mup``:

* hidden weights (both dimensions grow, mup's "matrix-like": W_Q, W_K, W_V, W_O and the MLP when
  the width is d_model): init unchanged (variance 1/fan_in, as the SP init already is); Adam
  learning rate / fanin_mult and weight decay x fanin_mult (``mup.MuAdam``); SGD learning rate x
  fanout_mult / fanin_mult (``mup.MuSGD``).
* readout-like Linear layers (fan_in grows, fan_out does not: the classifier when the width is
  d_model, W_O when it is d_k): input x 1 / fanin_mult in the forward pass and weights x
  sqrt(fanin_mult) at init (``mup.MuReadout`` and its ``_rescale_parameters``); learning rate as
  vector-like below.
* vector-like (one dimension grows: embeddings, input weights, biases, LayerNorm) and fixed
  parameters: init and Adam learning rate unchanged; SGD learning rate x width_mult.
* the classifier (readout) and every W_Q start at zero (muP's recommended zero init), and the
  ``dk`` rule's logits are ``attn_mult`` x q.k / d_k: q leaves W_Q times ``attn_mult``, which
  equals muP's logit multiplier. Other rules run under muP's init and learning rates unchanged
  (what 1/d_k adds to the rest of muP is then measurable).

Biases start at zero in this model, so mup's bias rescaling (``rescale_linear_bias``) has nothing
to do and is left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
from torch import nn

from engine.errors import ConfigError
from engine.training.config import TrainingConfig

#: the rule whose logits get muP's attention multiplier
MUP_RULE = "dk"
#: kinds of parameter, by the dimensions that grow with the width
KINDS = ("hidden", "readout", "vector", "fixed")


@dataclass(frozen=True)
class ParamScaling:
    """What muP does to one parameter (all 1 under sp)."""

    name: str
    shape: tuple[int, ...]
    #: the base-width size of each dimension, None where the dimension does not grow
    base_shape: tuple[int | None, ...]
    kind: str  #: KINDS
    lr_scale: float  #: times the learning rate
    wd_scale: float  #: times the weight decay
    init_scale: float  #: times the standard init (0: starts at zero)

    @property
    def ninf(self) -> int:
        """How many dimensions grow with the width."""
        return sum(b is not None for b in self.base_shape)

    def mult(self, i: int) -> float:
        """Width multiplier of dimension i (dim / base dim; 1 for a fixed one)."""
        b = self.base_shape[i]
        return 1.0 if b is None else self.shape[i] / b

    @property
    def fanin_mult(self) -> float:
        return self.mult(1) if len(self.shape) >= 2 else 1.0

    @property
    def fanout_mult(self) -> float:
        return self.mult(0) if len(self.shape) >= 2 else 1.0

    @property
    def width_mult(self) -> float:
        """mup's ``InfShape.width_mult()``: the multiplier of the last growing dimension."""
        for i in reversed(range(len(self.shape))):
            if self.base_shape[i] is not None:
                return self.mult(i)
        return 1.0


def _meta_model(cfg: TrainingConfig, rule: str) -> nn.Module:
    """The model's modules on the meta device: shapes only, no memory, no random draws."""
    from engine.training.model import AttentionModel

    with torch.device("meta"):
        return AttentionModel(cfg, rule, cfg.in_features, cfg.vocab)


def _shapes(cfg: TrainingConfig, rule: str) -> dict[str, tuple[int, ...]]:
    return {n: tuple(p.shape) for n, p in _meta_model(cfg, rule).named_parameters()}


def _other_width(cfg: TrainingConfig, base: int) -> int:
    """A second width, to tell the growing dimensions (mup's ``delta`` model) from the rest: one
    step below the base, which is valid wherever the base is (the memory limits only tighten as
    the width grows; one step above refused a base width just under them), or one above when the
    base is the smallest width."""
    step = cfg.heads if cfg.width_axis == "d_model" and cfg.d_k == 0 else 1
    return base - step if base > step else base + step


def base_shapes(cfg: TrainingConfig, rule: str) -> dict[str, tuple[int | None, ...]]:
    """Per parameter: its size at the base width per dimension, None where it does not grow."""
    base_w = cfg.mup_base_width
    try:
        base = _shapes(cfg.at_width(base_w), rule)
        delta = _shapes(cfg.at_width(_other_width(cfg, base_w)), rule)
    except ConfigError as exc:
        raise ConfigError("base_width", f"{base_w} gives no valid model of this shape "
                                        f"({exc.field}: {exc.message})") from None
    return {name: tuple(b if b != d else None for b, d in zip(base[name], delta[name]))
            for name in base}


def _scaling(name: str, shape: tuple[int, ...], base: tuple[int | None, ...], is_linear: bool,
             zero: bool, optimizer: str) -> ParamScaling:
    probe = ParamScaling(name, shape, base, "fixed", 1.0, 1.0, 1.0)
    ninf = probe.ninf
    if ninf > 2:
        raise ValueError(f"{name}: more than 2 dimensions grow with the width")
    lr, wd, init = 1.0, 1.0, 1.0
    if ninf == 2:
        kind = "hidden"
        ratio = 1.0 / probe.fanin_mult if optimizer == "adam" else \
            probe.fanout_mult / probe.fanin_mult
        lr, wd = ratio, 1.0 / ratio
    else:
        kind = "fixed" if ninf == 0 else "vector"
        if is_linear and base[1] is not None and base[0] is None:
            kind = "readout"
            init = math.sqrt(probe.fanin_mult)
        if optimizer == "sgd" and ninf == 1:
            lr, wd = probe.width_mult, 1.0 / probe.width_mult
    return ParamScaling(name, shape, base, kind, lr, wd, 0.0 if zero else init)


def zero_init_names(cfg: TrainingConfig) -> frozenset[str]:
    """The parameters muP starts at zero: the readout (classifier) and every W_Q."""
    names = {"head.weight", "head.bias"}
    names.update(f"blocks.{i}.attn.w_q.weight" for i in range(cfg.layers))
    return frozenset(names)


def parameter_plan(cfg: TrainingConfig, rule: str) -> dict[str, ParamScaling]:
    """What muP does to each parameter of the model of ``cfg`` trained with ``rule``."""
    return _plan(cfg, rule)


def _build_plan(cfg: TrainingConfig, rule: str) -> dict[str, ParamScaling]:
    model = _meta_model(cfg, rule)
    linear_weights = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    bases = base_shapes(cfg, rule)
    zero = zero_init_names(cfg)
    return {name: _scaling(name, tuple(p.shape), bases[name], name in linear_weights, name in zero,
                           cfg.optimizer)
            for name, p in model.named_parameters()}


#: the plans, cached (a config is hashable and frozen); wrapped here rather than decorated so that
#: mutation testing (mutmut leaves decorated functions out) reaches ``_build_plan``
_plan = lru_cache(maxsize=64)(_build_plan)


def readout_multipliers(cfg: TrainingConfig, rule: str) -> dict[str, float]:
    """Module name -> the factor its input is multiplied by (1 / fanin_mult, as MuReadout)."""
    out = {}
    for name, sc in parameter_plan(cfg, rule).items():
        if sc.kind == "readout" and name.endswith(".weight"):
            out[name[: -len(".weight")]] = 1.0 / sc.fanin_mult
    return out


# -- what the trainer calls (each does nothing under sp) --------------------------------------------
def mup_init_(model: nn.Module, cfg: TrainingConfig) -> None:
    """After the standard init: zero the readout and W_Q, rescale readout-like weights."""
    if cfg.param != "mup":
        return
    plan = parameter_plan(cfg, model.rule)
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = plan[name].init_scale
            if scale == 0.0:
                p.zero_()
            elif scale != 1.0:
                p.mul_(scale)


class _ScaleInput:
    """Forward pre-hook: the module's input times ``factor`` (MuReadout's 1 / width_mult)."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def __call__(self, _module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (args[0] * self.factor, *args[1:])


class _ScaleOutput:
    """Forward hook: the module's output times ``factor`` (q times muP's attention multiplier)."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def __call__(self, _module: nn.Module, _args: Any, output: torch.Tensor) -> torch.Tensor:
        return output * self.factor


def attach_multipliers(model: nn.Module, cfg: TrainingConfig) -> None:
    """muP's forward multipliers as hooks on the model's own modules (its code stays as it is):
    readout-like layers see their input times 1 / fanin_mult; under the dk rule q leaves W_Q
    times ``attn_mult``."""
    if cfg.param != "mup":
        return
    modules = dict(model.named_modules())
    for name, factor in readout_multipliers(cfg, model.rule).items():
        if factor != 1.0:
            modules[name].register_forward_pre_hook(_ScaleInput(factor))
    if model.rule == MUP_RULE:
        for blk in model.blocks:
            blk.attn.w_q.register_forward_hook(_ScaleOutput(cfg.mup_attn_mult))


def optimizer_params(model: nn.Module, cfg: TrainingConfig) -> Iterable[Any]:
    """The optimizer's parameters: the model's (sp), or one group per learning-rate and
    weight-decay scale (mup), each group carrying its ``lr_scale`` for the schedule."""
    if cfg.param != "mup":
        return model.parameters()
    plan = parameter_plan(cfg, model.rule)
    groups: dict[tuple[float, float], list[nn.Parameter]] = {}
    for name, p in model.named_parameters():
        sc = plan[name]
        groups.setdefault((sc.lr_scale, sc.wd_scale), []).append(p)
    return [{"params": ps, "lr": cfg.lr * lr_s, "lr_scale": lr_s,
             "weight_decay": cfg.weight_decay * wd_s}
            for (lr_s, wd_s), ps in groups.items()]
