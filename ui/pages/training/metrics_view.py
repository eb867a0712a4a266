"""A TrainingSnapshot rebuilt from logged metrics rows (an experiment job's ``metrics.csv``
rows), so the Training page's curve plots can show a finished job without retraining.

The rows hold one value per (rule, log step): per-head metrics are means over layers and heads
(``logit_max_abs`` the largest), so the rebuilt snapshot has one layer of one head. The logit
histograms and probe weights were not logged: those arrays are empty (zero) and the page does not
draw their panels for such a snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

#: snapshot head metric <- metrics.csv column (the rest have the same name)
ROW_COLUMN = {"entropy_norm": "entropy_norm_mean", "top_weight": "top_weight_mean",
              "jacobian_fro": "jacobian_fro_mean"}
#: the panels that need what rows do not hold (per-head histograms, probe weights)
NOT_IN_ROWS = ("train_logit_dist", "train_probe_attention")
#: what those panels say when a run is shown from logged rows
UNLOGGED = "not logged by the job (its rows keep\nmeans over heads); Start trains it again"


def _number(v: Any) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return 0.0
    return x if np.isfinite(x) else 0.0


def snapshot_from_rows(rows: Iterable[Mapping[str, Any]], config: Any,
                       diverged: Mapping[str, int | None] | None = None,
                       seconds: float = 0.0, device: str = "") -> Any:
    """A done TrainingSnapshot (L = H = 1) of ``rows``; ``diverged`` maps a rule to the step it
    diverged at (the loss plot marks it)."""
    from engine.training.observe import (
        HEAD_METRICS,
        PERCENTILES,
        SCALARS,
        length_columns,
        logit_edges,
    )
    from engine.training.trainer import TrainingSnapshot

    rows = [r for r in rows if r.get("scaling") in config.scalings]
    rules = tuple(rule for rule in config.scalings if any(r["scaling"] == rule for r in rows))
    if not rules:
        raise ValueError("no logged rows for the rules of this config")
    steps = sorted({int(r["step"]) for r in rows})
    at = {s: i for i, s in enumerate(steps)}
    n, n_rules = len(steps), len(rules)
    valid = np.zeros((n, n_rules), dtype=bool)
    lengths = length_columns(tuple(getattr(config, "eval_lengths", ()) or ()))
    scalars = {k: np.zeros((n, n_rules)) for k in (*SCALARS, *lengths)}
    #: a log holds the evaluation at the lengths where its row has them (``eval_every``)
    evaluated = np.zeros(n, dtype=bool)
    heads = {k: np.zeros((n, n_rules, 1, 1)) for k in HEAD_METRICS}
    has_t = np.zeros(n_rules, dtype=bool)
    for row in rows:
        i, r = at[int(row["step"])], rules.index(row["scaling"])
        valid[i, r] = True
        for k in (*SCALARS, *lengths):
            scalars[k][i, r] = _number(row.get(k))
        if lengths and row.get(lengths[0]) not in (None, ""):
            evaluated[i] = True
        for k in HEAD_METRICS:
            heads[k][i, r, 0, 0] = _number(row.get(ROW_COLUMN.get(k, k)))
        if row.get("temperature") not in (None, ""):
            has_t[r] = True
    bins = int(config.hist_bins)
    div = np.array([(diverged or {}).get(rule) if (diverged or {}).get(rule) is not None else -1
                    for rule in rules], dtype=np.int64)
    return TrainingSnapshot(
        config=config, rules=rules, step=steps[-1], done=True, elapsed_s=float(seconds),
        steps_per_s=steps[-1] / seconds if seconds > 0 else 0.0, device=device or config.device,
        log_steps=np.asarray(steps, dtype=np.int64), valid=valid, scalars=scalars, heads=heads,
        hist_edges=logit_edges(config.hist_range, bins),
        logit_hist=np.zeros((n, n_rules, 1, 1, bins), dtype=np.int32),
        logit_outside=np.zeros((n, n_rules, 1, 1, 2), dtype=np.int64),
        logit_percentiles=np.zeros((n, n_rules, 1, 1, len(PERCENTILES))),
        probe_weights=np.zeros((n_rules, 1, 1, 1, 1)), has_temperature=has_t,
        diverged_step=div, collapse_step=np.full((n_rules, 1, 1), -1, dtype=np.int64),
        length_evaluated=evaluated if lengths else None)
