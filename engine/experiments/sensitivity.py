"""Learning-rate sensitivity (Wortsman et al. 2023, "Small-scale proxies for large-scale
Transformer training instabilities"): over a grid of learning rates, the mean of
min(loss(lr), loss at init) minus the best loss over the grid. 0 means every rate of the grid
trains as well as the best one; it grows as the basin of good rates narrows. It is meaningful
only where the best rate learns the task (an interior optimum), which the ``logit_control``
experiment is sized for.

Per seed: each seed is its own initial weights and data, so it has its own curve loss(lr) and its
own loss at init (the first logged training loss, the same at every rate). The sensitivity of a
rule is the mean over seeds of the per-seed sensitivities, with its standard error. A run that
diverged (no final loss) counts as the loss at init, which is what min(loss, loss at init) gives
an infinite loss. The best rate is the grid value whose mean loss over seeds is lowest.

Torch-free, plain data in and out, like the other summaries.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.experiments.point import mean_se, ok_results, run_value
from engine.experiments.summary import SEED_AXIS

#: the loss at init: the first logged training loss of the run (metrics.csv's loss at step 0)
INIT_LOSS = "loss@0"


@dataclass(frozen=True)
class Sensitivity:
    """One rule's learning-rate sensitivity with its uncertainty over seeds."""

    rule: str
    mean: float
    se: float
    n: int  #: seeds with a curve
    best: Any  #: the grid value with the lowest mean loss
    best_loss: float
    best_loss_se: float
    per_seed: tuple[float, ...]
    #: every grid value's mean loss over seeds and its standard error
    means: dict[Any, tuple[float, float]] = field(default_factory=dict)

    def tied(self, k: float) -> list[Any]:
        """The grid values whose mean loss is within ``k`` combined standard errors of the best
        one's: the seeds cannot tell them from the best (the best among them)."""
        return [x for x, (m, se) in self.means.items()
                if m - self.best_loss <= k * math.hypot(se, self.best_loss_se)]


def _curves(results: Sequence[dict[str, Any]], rule: str, over: str, metric: str
            ) -> dict[Any, tuple[float, dict[Any, float]]]:
    """seed -> (loss at init, {grid value: loss}), a diverged run's loss being +inf."""
    curves: dict[Any, tuple[float, dict[Any, float]]] = {}
    for res in results:
        if rule not in res.get("rules", {}):
            continue
        seed = res["values"].get(SEED_AXIS)
        init = run_value(res, rule, INIT_LOSS)
        value = run_value(res, rule, metric)
        if init is None or not math.isfinite(init):
            continue
        _, curve = curves.setdefault(seed, (init, {}))
        curve[res["values"][over]] = value if value is not None and math.isfinite(value) else math.inf
    return curves


def seed_sensitivity(init: float, curve: dict[Any, float]) -> float:
    """mean over the grid of min(loss, loss at init) - the best loss (one seed's curve)."""
    capped = [min(v, init) for v in curve.values()]
    return math.fsum(capped) / len(capped) - min(capped)


def lr_sensitivity(results: Iterable[dict[str, Any]], rule: str, over: str = "lr",
                   metric: str = "final_loss", where: dict[str, Any] | None = None
                   ) -> Sensitivity | None:
    """The sensitivity of ``rule`` along the axis ``over`` (None without a finished run);
    ``where`` restricts the jobs to some values of the other axes."""
    runs = [r for r in ok_results(results)
            if all(r["values"].get(k) == v for k, v in (where or {}).items())]
    curves = _curves(runs, rule, over, metric)
    if not curves:
        return None
    per_seed = tuple(seed_sensitivity(init, curve) for init, curve in curves.values())
    mean, se = mean_se(per_seed)
    by_value: dict[Any, list[float]] = {}
    for init, curve in curves.values():
        for x, v in curve.items():
            by_value.setdefault(x, []).append(min(v, init))
    means = {x: mean_se(vs) for x, vs in by_value.items()}
    best = min(means, key=lambda x: means[x][0])
    return Sensitivity(rule, mean, se, len(per_seed), best, means[best][0], means[best][1],
                       per_seed, means)
