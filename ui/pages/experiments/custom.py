"""The spec the form describes: a built-in experiment's figures and verdict where its axes still
exist, otherwise figures and a verdict chosen for the axes (so a hand-built grid has them too)."""

from __future__ import annotations

from typing import Any

from engine.experiments.spec import Axis, ExperimentSpec, FigureSpec, VerdictSpec
from engine.experiments.summary import SEED_AXIS

CUSTOM = "custom"
#: vs_step curves are split by an axis with at most this many values (else one curve per rule)
SPLIT_MAX = 5


def _numeric(axis: Axis) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in axis.values)


def _log_axis(axis: Axis) -> bool:
    vals = [float(v) for v in axis.values]
    return _numeric(axis) and min(vals) > 0 and max(vals) / min(vals) >= 10


def default_figures(axes: tuple[Axis, ...]) -> tuple[tuple[FigureSpec, ...], VerdictSpec]:
    """By rule (no axis but seeds) or against the first other axis, plus loss over steps."""
    others = [a for a in axes if a.field != SEED_AXIS]
    figs: list[FigureSpec] = []
    if not others:
        figs += [FigureSpec("by_rule", "success", "Runs that reach the target"),
                 FigureSpec("by_rule", "final_loss", "Final training loss")]
        verdict = VerdictSpec("by_rule", "success")
    else:
        x = others[0]
        log = _log_axis(x)
        figs += [FigureSpec("vs_axis", "final_loss", f"Final training loss vs {x.field}",
                            x=x.field, x_log=log),
                 FigureSpec("vs_axis", "success", f"Runs that reach the target vs {x.field}",
                            x=x.field, x_log=log)]
        verdict = VerdictSpec("ends_of_axis", "success", over=x.field) if _numeric(x) \
            else VerdictSpec("by_rule", "success")
    split = next((a.field for a in others if len(a.values) <= SPLIT_MAX), "")
    figs.append(FigureSpec("vs_step", "loss", "Training loss over seeds", x=split, y_log=True))
    return tuple(figs), verdict


def form_spec(name: str, base: Any, axes: tuple[Axis, ...], builtin: ExperimentSpec | None,
              title: str = "", description: str = "") -> ExperimentSpec:
    """The experiment to run (raises ConfigError from the engine)."""
    fields = {a.field for a in axes}
    if builtin is not None:
        figs = tuple(f for f in builtin.figures if not f.x or f.x in fields)
        verdict = builtin.verdict if not builtin.verdict.over or builtin.verdict.over in fields \
            else None
        if figs and verdict is not None:
            return ExperimentSpec(name=name, base=base, axes=axes, title=builtin.title,
                                  description=builtin.description, target=builtin.target,
                                  figures=figs, verdict=verdict)
    figs, verdict = default_figures(axes)
    target = builtin.target if builtin is not None else 0.9
    return ExperimentSpec(name=name, base=base, axes=axes, title=title or "Custom experiment",
                          description=description, target=target, figures=figs, verdict=verdict)


def describe_base(cfg: Any) -> str:
    """One line naming the base config's main fields."""
    d_k = cfg.d_k or cfg.d_model // cfg.heads
    return (f"task {cfg.task}, d_model {cfg.d_model}, {cfg.heads} head(s) of d_k {d_k}, "
            f"{cfg.layers} layer(s){' + MLP' if cfg.mlp else ''}, {cfg.optimizer} lr {cfg.lr:g}, "
            f"batch {cfg.batch}, {cfg.steps} steps, seed {cfg.seed}")
