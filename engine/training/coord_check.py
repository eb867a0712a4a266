"""The coord check (Yang et al. 2022, Tensor Programs V, and microsoft/mup's ``get_coord_data``):
the mean |activation| of every kind of layer over the first few training steps, at several
widths, per parametrization. Under the standard parametrization with Adam the activations after
an update grow with the width (each update moves every entry of a hidden matrix by about lr, and
a row of width n sums n such moves); under muP they stay flat, except where muP itself says they
start at zero (the attention logits and the readout, whose W_Q and weights start at zero).

A point is (param, width, seed): the model of ``base`` at that width, its own rule (sp: ``sqrt``,
mup: ``dk``, or one ``scaling`` for all), measured on a fixed batch before the first update and
after each of ``steps`` updates (Adam at a constant ``lr``, no warmup). The slope of log2 mean
|activation| against log2 width is fitted per seed and reported as the mean over seeds with its
standard error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.errors import ConfigError
from engine.training.config import (
    D_MODEL_MAX,
    PARAMS,
    WIDTH_AXES,
    TrainingConfig,
)
from engine.validate import ConfigMethods, check_choice, check_float, check_int

#: the kinds of activation, in drawing order
KINDS = ("embedding", "attention logits", "attention output", "MLP output", "readout")
#: coord.csv's columns
COLUMNS = ("param", "scaling", "width", "seed", "step", "layer", "kind", "mean_abs")
#: slopes.csv's columns
SLOPE_COLUMNS = ("param", "scaling", "kind", "step", "slope", "se", "seeds")
#: each parametrization's own attention rule
OWN_RULE = {"sp": "sqrt", "mup": "dk"}
STEPS_MAX = 100
SEEDS_MAX = 100
WIDTHS_MAX = 16


def default_base() -> TrainingConfig:
    """The model the coord check widens: the width_transfer experiment's shape (retrieval, two
    pre-LN layers of two heads with an MLP), a small batch (means over thousands of entries)."""
    return TrainingConfig(task="retrieval", d_model=64, heads=2, layers=2, mlp=True,
                          scalings=("sqrt",), batch=16, probe_size=16, device="cpu")


@dataclass(frozen=True)
class CoordCheckConfig(ConfigMethods):
    """What the coord check runs; validated at construction (errors name the field)."""

    params: tuple[str, ...] = ("sp", "mup")
    widths: tuple[int, ...] = (64, 128, 256, 512, 1024)
    width_axis: str = "d_model"
    steps: int = 3
    seeds: int = 3
    lr: float = 0.01
    #: one rule for every param; "" = each param's own (sp: sqrt, mup: dk)
    scaling: str = ""
    #: muP's base width; 0 = the narrowest of ``widths``
    base_width: int = 0
    base: TrainingConfig = field(default_factory=default_base)

    def __post_init__(self) -> None:
        s = object.__setattr__
        params = (self.params,) if isinstance(self.params, str) else tuple(self.params)
        if not params or len(set(params)) != len(params):
            raise ConfigError("param", "needs one or more of sp, mup, each once")
        for p in params:
            check_choice("param", p, PARAMS)
        s(self, "params", params)
        widths = tuple(check_int("widths", w, 1, D_MODEL_MAX) for w in self.widths)
        if not 2 <= len(widths) <= WIDTHS_MAX or len(set(widths)) != len(widths):
            raise ConfigError("widths", f"needs 2 to {WIDTHS_MAX} different widths (a slope), "
                                        f"got {list(widths)}")
        s(self, "widths", tuple(sorted(widths)))
        check_choice("width_axis", self.width_axis, WIDTH_AXES)
        s(self, "steps", check_int("steps", self.steps, 0, STEPS_MAX))
        s(self, "seeds", check_int("seeds", self.seeds, 1, SEEDS_MAX))
        s(self, "lr", check_float("lr", self.lr, 0.0, 100.0, lo_open=True))
        if self.scaling:
            check_choice("scaling", self.scaling, _training_rules())
        s(self, "base_width", check_int("base_width", self.base_width, 0, D_MODEL_MAX))
        if not isinstance(self.base, TrainingConfig):
            s(self, "base", TrainingConfig.from_dict(self.base))
        for p in self.params:  # every point builds: the error names the width
            for w in self.widths:
                try:
                    self.point_config(p, w, 0)
                except ConfigError as exc:
                    raise ConfigError("widths", f"width {w} ({p}): {exc.field}: {exc.message}"
                                      ) from None

    def rule(self, param: str) -> str:
        return self.scaling or OWN_RULE[param]

    def point_config(self, param: str, width: int, seed: int) -> TrainingConfig:
        """The training config of one point: ``base`` at ``width`` under ``param``."""
        changes: dict[str, Any] = {
            "param": param, "width_axis": self.width_axis, "seed": seed, "lr": self.lr,
            "scalings": (self.rule(param),), "steps": max(self.steps, 1), "warmup": 0,
            "decay": "none", "log_every": max(self.steps, 1), "optimizer": "adam",
            "base_width": self.base_width or self.widths[0],
        }
        if self.width_axis == "d_model":
            changes.update(d_model=width, d_k=0)
        else:
            changes.update(d_k=width)
        return self.base.replace(**changes)

    def points(self) -> list[tuple[str, int, int]]:
        return [(p, w, s) for p in self.params for w in self.widths for s in range(self.seeds)]

    @classmethod
    def from_dict(cls, data: Any) -> CoordCheckConfig:
        data = dict(data) if isinstance(data, dict) else data
        if isinstance(data, dict) and isinstance(data.get("base"), dict):
            data["base"] = TrainingConfig.from_dict(data["base"])
        return super().from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["base"] = self.base.to_dict()
        return out


def _training_rules() -> tuple[str, ...]:
    from engine.rules import TRAINING_RULES

    return TRAINING_RULES


# -- measuring ---------------------------------------------------------------------------------------
def _mean_abs(x: Any, mask: Any = None) -> float:
    a = x.detach().abs().double()
    if mask is None:
        return float(a.mean())
    m = mask.expand_as(a)
    return float(a[m].mean())


def measure(model: Any, batch: Any) -> list[tuple[str, str, float]]:
    """(layer, kind, mean |activation|) of every layer of ``model`` on ``batch`` (no gradient)."""
    import torch

    from engine.training.model import AttentionCapture

    out: list[tuple[str, str, float]] = []
    handles = [model.blocks[0].register_forward_pre_hook(
        lambda _m, args: out.append(("embed", "embedding", _mean_abs(args[0]))))]
    for i, blk in enumerate(model.blocks):
        handles.append(blk.attn.register_forward_hook(
            lambda _m, _a, y, i=i: out.append((f"blocks.{i}", "attention output", _mean_abs(y)))))
        if blk.mlp is not None:
            handles.append(blk.mlp.register_forward_hook(
                lambda _m, _a, y, i=i: out.append((f"blocks.{i}", "MLP output", _mean_abs(y)))))
    capture: list[AttentionCapture] = []
    model.eval()
    try:
        with torch.no_grad():
            logits = model(batch.inputs, batch.readout, batch.mask, capture)
    finally:
        for h in handles:
            h.remove()
    out += [(f"blocks.{i}", "attention logits", _mean_abs(c.logits, c.mask))
            for i, c in enumerate(capture)]
    out.append(("head", "readout", _mean_abs(logits)))
    return out


def point_rows(cfg: CoordCheckConfig, param: str, width: int, seed: int,
               cancelled: Callable[[], bool] | None = None) -> list[dict[str, Any]]:
    """The rows of one point: every layer at steps 0..steps (after that many updates)."""
    from engine.training.numerics import training_numerics
    from engine.training.trainer import Trainer

    tcfg = cfg.point_config(param, width, seed)
    trainer = Trainer(tcfg, observe=False)
    model, batch = trainer.runs[0].model, trainer.probe
    rows: list[dict[str, Any]] = []
    for step in range(cfg.steps + 1):
        if cancelled is not None and cancelled():
            break
        if step:
            trainer.advance()
        with training_numerics():
            got = measure(model, batch)
        rows += [{"param": param, "scaling": cfg.rule(param), "width": width, "seed": seed,
                  "step": step, "layer": layer, "kind": kind, "mean_abs": value}
                 for layer, kind, value in got]
    return rows


@dataclass(frozen=True)
class CoordProgress:
    """Plain data after each point: the rows so far and how far the check is."""

    config: CoordCheckConfig
    rows: tuple[dict[str, Any], ...]
    done: int
    total: int

    @property
    def finished(self) -> bool:
        return self.done == self.total


def run_coord_check(cfg: CoordCheckConfig, cancelled: Callable[[], bool] | None = None
                    ) -> Iterator[CoordProgress]:
    """Yield the progress after each (param, width, seed); stops early when ``cancelled()``."""
    rows: list[dict[str, Any]] = []
    points = cfg.points()
    for done, (param, width, seed) in enumerate(points, start=1):
        if cancelled is not None and cancelled():
            return
        rows += point_rows(cfg, param, width, seed, cancelled)
        yield CoordProgress(cfg, tuple(rows), done, len(points))


# -- slopes ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Slope:
    """d log2(mean |activation|) / d log2(width) of one kind at one step, over seeds."""

    param: str
    scaling: str
    kind: str
    step: int
    slope: float  #: mean over seeds (nan where the activation is 0 at some width: zero init)
    se: float  #: standard error over seeds
    seeds: int  #: seeds with a slope

    def row(self) -> dict[str, Any]:
        """slopes.csv's row; slope and SE are empty where there is none (zero at init)."""
        return {k: ("" if isinstance(v := getattr(self, k), float) and not math.isfinite(v)
                    else v) for k in SLOPE_COLUMNS}


def kind_means(rows: Any) -> dict[tuple[str, str, str, int, int, int], float]:
    """(param, scaling, kind, step, seed, width) -> mean over the layers of that kind."""
    acc: dict[tuple[str, str, str, int, int, int], list[float]] = {}
    for r in rows:
        key = (r["param"], r["scaling"], r["kind"], int(r["step"]), int(r["seed"]), int(r["width"]))
        acc.setdefault(key, []).append(float(r["mean_abs"]))
    return {k: math.fsum(v) / len(v) for k, v in acc.items()}


def fit_slope(widths: list[int], values: list[float]) -> float:
    """Least-squares slope of log2(value) on log2(width); nan if a value is not positive."""
    if len(widths) < 2 or any(not (v > 0 and math.isfinite(v)) for v in values):
        return math.nan
    x = [math.log2(w) for w in widths]
    y = [math.log2(v) for v in values]
    mx, my = math.fsum(x) / len(x), math.fsum(y) / len(y)
    sxx = math.fsum((a - mx) ** 2 for a in x)
    return math.fsum((a - mx) * (b - my) for a, b in zip(x, y)) / sxx


def slopes(rows: Any) -> list[Slope]:
    """One slope per (param, scaling, kind, step): fitted per seed, mean ± SE over seeds."""
    from engine.experiments.point import mean_se

    means = kind_means(rows)
    groups: dict[tuple[str, str, str, int], dict[int, dict[int, float]]] = {}
    for (param, scaling, kind, step, seed, width), v in means.items():
        groups.setdefault((param, scaling, kind, step), {}).setdefault(seed, {})[width] = v
    out = []
    for (param, scaling, kind, step), per_seed in groups.items():
        fitted = []
        for by_width in per_seed.values():
            ws = sorted(by_width)
            s = fit_slope(ws, [by_width[w] for w in ws])
            if math.isfinite(s):
                fitted.append(s)
        m, se = mean_se(fitted) if fitted else (math.nan, math.nan)
        out.append(Slope(param, scaling, kind, step, m, se, len(fitted)))
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(out, key=lambda s: (s.param, s.scaling, order.get(s.kind, 99), s.step))


def _points(means: dict[tuple[str, str, str, int, int, int], float],
            key: tuple[str, str, str, int], widths: tuple[int, ...]) -> tuple[tuple[Any, ...], ...]:
    """(x, y, lo, hi, n) of one kind at one step: the mean over seeds ± 1 SE per width, where
    it is positive (a log axis)."""
    from engine.experiments.point import mean_se

    cols: tuple[list[Any], ...] = ([], [], [], [], [])
    for w in widths:
        vals = [v for (p, r, k, st, _s, wd), v in means.items() if (p, r, k, st) == key and wd == w]
        m, se = mean_se(vals) if vals else (math.nan, math.nan)
        if vals and m > 0 and math.isfinite(m):
            for col, v in zip(cols, (float(w), m, m - se if m - se > 0 else m, m + se, len(vals))):
                col.append(v)
    return tuple(tuple(c) for c in cols)


# -- figures -----------------------------------------------------------------------------------------
#: one colour per kind (Okabe-Ito); the steps differ by line style
KIND_COLOURS = {"embedding": "#E69F00", "attention logits": "#56B4E9",
                "attention output": "#009E73", "MLP output": "#CC79A7", "readout": "#D55E00"}
COORD_ERROR = "mean ± 1 standard error over seeds"


def figure_data(cfg: CoordCheckConfig, rows: Any) -> list[Any]:
    """One figure per (param, rule): mean |activation| (mean over the layers of a kind, then
    over seeds ± 1 SE) against the width on log-log axes, a line per kind and step. Zeros (a
    weight that starts at zero) have no place on a log axis and are left out."""
    from engine.experiments.figures import FigureData, Series

    means = kind_means(rows)
    figures = []
    axis = "d_model" if cfg.width_axis == "d_model" else "head width d_k"
    for param in cfg.params:
        rule = cfg.rule(param)
        series = []
        for kind in KINDS:
            for step in range(cfg.steps + 1):
                points = _points(means, (param, rule, kind, step), cfg.widths)
                if points[0] or not rows:
                    series.append(Series(f"{kind}, step {step}", kind, *points,
                                         colour=KIND_COLOURS[kind]))
        figures.append(FigureData(
            f"coord_{param}", "vs_axis",
            f"Coord check, {param} ({rule} attention, base width {cfg.base_width or cfg.widths[0]})",
            f"width ({axis})", "mean |activation|", True, True, tuple(series), COORD_ERROR))
    return figures
