"""The simulation generator: chunks of trials in, progressive snapshots out.

``simulate(cfg)`` yields a :class:`SimulationSnapshot` after every chunk (the last one has
``done=True``); ``sweep(sweep_cfg)`` yields a :class:`SweepPoint` as each d_k finishes. Both check
``cancelled()`` between chunks (and between key blocks) and start no threads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from engine.config import SimulationConfig, SweepConfig
from engine.errors import Cancelled
from engine.rules import RULE_REGISTRY, RuleParams
from engine.sampling import ScoreSampler, resolve_backend
from engine.softmax import RowMetrics
from engine.stats import Estimate, Histogram, PooledScoreMoments, RunningMoments, StreamingHistogram
from engine.theory import NormalMixture, logit_theory, raw_score_theory, row_var_theory

SCORE_BINS = 120
UNIT_BINS = 100
LOG10_JACOBIAN_EDGES = np.linspace(-16.0, 0.0, 129)
SAMPLE_ROWS = 64
SAMPLE_KEYS = 512

# per-row metrics tracked by RunningMoments, in this order
_ROW_FIELDS = ("top_weight", "saturated", "entropy", "entropy_norm", "jacobian_fro", "jacobian_max_abs",
               "target_weight", "row_var", "key_mass", "sink_weight")


def row_variance(x: np.ndarray) -> np.ndarray:
    """The spread of each row around its own mean (unbiased, ddof=1): what the softmax sees. A
    shift shared by the whole row (a key mean times sum(q)) cancels here, as in the softmax,
    while it inflates the pooled variance (docs/SCIENCE.md, "Shift invariance")."""
    return np.asarray(x, dtype=np.float64).var(axis=-1, ddof=1)


@dataclass(frozen=True)
class RuleResult:
    """Everything measured for one scaling rule (all means with their standard errors)."""

    rule: str
    logit_mean: Estimate
    logit_var: Estimate
    top_weight: Estimate
    saturated_frac: Estimate
    entropy: Estimate
    entropy_norm: Estimate
    jacobian_fro: Estimate
    jacobian_max_abs: Estimate
    logit_hist: Histogram
    top_weight_hist: Histogram
    entropy_norm_hist: Histogram
    log10_jacobian_hist: Histogram
    logit_theory: NormalMixture
    #: up to 64 sample softmax rows, each sorted descending (at most 512 keys kept)
    sample_weights: np.ndarray
    #: mean weight on key 0, the target key ("needle") when the correlation is not 0; at
    #: correlation 0 the keys are exchangeable and it is the mean key mass / n exactly
    #: (:func:`target_weight_estimate`)
    target_weight: Estimate = field(default_factory=lambda: Estimate(0.0, 0.0))
    #: mean within-row variance of the logits (what the softmax sees; ``row_variance``)
    logit_row_var: Estimate = field(default_factory=lambda: Estimate(0.0, 0.0))
    #: its prediction (``engine.theory.row_var_theory``); None where no exact formula applies
    logit_row_var_theory: float | None = None
    #: mean sum of the key weights (1 for a softmax; below 1 with a sink; any value for sigmoid)
    key_mass: Estimate = field(default_factory=lambda: Estimate(1.0, 0.0))
    #: mean weight on the sink (0 without one): engine.softmax, "Weights that do not sum to one"
    sink_weight: Estimate = field(default_factory=lambda: Estimate(0.0, 0.0))

    @property
    def logit_std(self) -> Estimate:
        return _std(self.logit_var)

    @property
    def logit_row_std(self) -> Estimate:
        """The square root of the mean within-row variance (delta-method SE)."""
        return _std(self.logit_row_var)


def _std(var: Estimate) -> Estimate:
    s = math.sqrt(max(var.mean, 0.0))
    return Estimate(s, var.se / (2 * s) if s > 0 else 0.0)


@dataclass(frozen=True)
class SimulationSnapshot:
    """Plain data: the same object feeds plots, the results table, CSV export and tests."""

    config: SimulationConfig
    trials_done: int
    elapsed_s: float
    done: bool
    backend: str
    device: str
    method: str
    raw_mean: Estimate
    raw_var: Estimate
    raw_hist: Histogram
    raw_theory: NormalMixture
    rules: dict[str, RuleResult] = field(default_factory=dict)
    #: mean within-row variance of the raw scores q·k (a key mean's shared shift cancels in it)
    raw_row_var: Estimate = field(default_factory=lambda: Estimate(0.0, 0.0))

    @property
    def raw_std(self) -> Estimate:
        return _std(self.raw_var)

    @property
    def raw_row_std(self) -> Estimate:
        return _std(self.raw_row_var)

    @property
    def progress(self) -> float:
        return self.trials_done / self.config.trials

    def summary_rows(self) -> list[dict[str, object]]:
        """One row per rule with the columns of ``summary.csv``."""
        rows = []
        c = self.config
        for name, r in self.rules.items():
            rows.append({
                "d_k": c.d_k, "n_keys": c.n_keys, "trials": self.trials_done, "scaling": name,
                "raw_score_mean": self.raw_mean.mean, "raw_score_mean_se": self.raw_mean.se,
                "raw_score_var": self.raw_var.mean, "raw_score_var_se": self.raw_var.se,
                "raw_score_std": self.raw_std.mean, "raw_score_var_theory": self.raw_theory.var,
                "logit_mean": r.logit_mean.mean, "logit_mean_se": r.logit_mean.se,
                "logit_var": r.logit_var.mean, "logit_var_se": r.logit_var.se,
                "logit_std": r.logit_std.mean, "logit_var_theory": r.logit_theory.var,
                "raw_score_row_var": self.raw_row_var.mean,
                "raw_score_row_var_se": self.raw_row_var.se,
                "logit_row_var": r.logit_row_var.mean, "logit_row_var_se": r.logit_row_var.se,
                "logit_row_std": r.logit_row_std.mean,
                "logit_row_var_theory": ("" if r.logit_row_var_theory is None
                                         else r.logit_row_var_theory),
                "top_weight_mean": r.top_weight.mean, "top_weight_se": r.top_weight.se,
                "saturated_frac": r.saturated_frac.mean, "saturated_frac_se": r.saturated_frac.se,
                "entropy_mean": r.entropy.mean, "entropy_se": r.entropy.se,
                "entropy_norm_mean": r.entropy_norm.mean, "entropy_norm_se": r.entropy_norm.se,
                "jacobian_fro_mean": r.jacobian_fro.mean, "jacobian_fro_se": r.jacobian_fro.se,
                "jacobian_max_abs_mean": r.jacobian_max_abs.mean,
                "jacobian_max_abs_se": r.jacobian_max_abs.se,
                # (empty where the trials cannot estimate it: RunningMoments.checked_estimate)
                **({"target_weight_mean": r.target_weight.mean if r.target_weight.estimable else "",
                    "target_weight_se": r.target_weight.se if r.target_weight.estimable else ""}
                   if c.correlation != 0.0 else {}),
                "saturation_threshold": c.saturation_threshold,
                "method": self.method, "backend": self.backend, "device": self.device,
                "dtype": c.dtype,
                "key_mass_mean": r.key_mass.mean, "key_mass_se": r.key_mass.se,
                "sink_weight_mean": r.sink_weight.mean, "sink_weight_se": r.sink_weight.se,
            })
        return rows

    def histogram_arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        """Edges, counts and under/overflow of every histogram, named for ``histograms.npz``."""
        out: dict[str, np.ndarray] = {}

        def put(name: str, h: Histogram) -> None:
            out[f"{prefix}{name}_edges"] = h.edges
            out[f"{prefix}{name}_counts"] = h.counts
            out[f"{prefix}{name}_outside"] = np.array([h.underflow, h.overflow], dtype=np.int64)

        put("raw_score", self.raw_hist)
        for name, r in self.rules.items():
            put(f"{name}_logit", r.logit_hist)
            put(f"{name}_top_weight", r.top_weight_hist)
            put(f"{name}_entropy_norm", r.entropy_norm_hist)
            put(f"{name}_log10_jacobian_fro", r.log10_jacobian_hist)
            out[f"{prefix}{name}_sample_weights"] = r.sample_weights
        return out


class _RuleAccumulator:
    def __init__(self, cfg: SimulationConfig, rule: str) -> None:
        self.rule = rule
        self.logits = PooledScoreMoments()
        self.rows = RunningMoments(len(_ROW_FIELDS))
        self.logit_hist = StreamingHistogram(SCORE_BINS)
        self.top_hist = StreamingHistogram(UNIT_BINS, np.linspace(0.0, 1.0, UNIT_BINS + 1))
        self.entropy_hist = StreamingHistogram(UNIT_BINS, np.linspace(0.0, 1.0, UNIT_BINS + 1))
        self.jac_hist = StreamingHistogram(len(LOG10_JACOBIAN_EDGES) - 1, LOG10_JACOBIAN_EDGES)
        self.theory = logit_theory(cfg, rule)
        self.row_theory = row_var_theory(cfg, rule)
        self.sample: np.ndarray | None = None
        self.log_n = math.log(cfg.n_keys)
        self.n_keys = cfg.n_keys
        self.correlation = cfg.correlation
        self.threshold = cfg.saturation_threshold

    def update(self, logits: np.ndarray, m: RowMetrics) -> None:
        """One chunk: its logits (what the softmax sees) and their row metrics under the rule."""
        entropy_norm = m.entropy / self.log_n
        saturated = m.top_weight > self.threshold
        cols = np.stack([m.top_weight, saturated, m.entropy, entropy_norm,
                         m.jacobian_fro, m.jacobian_max_abs, m.weights[:, 0],
                         row_variance(logits), m.key_mass, m.sink_weight], axis=1)
        self.rows.update(cols)
        self.logits.update(logits)
        self.logit_hist.update(logits)
        self.top_hist.update(m.top_weight)
        self.entropy_hist.update(entropy_norm)
        self.jac_hist.update(m.log10_jacobian_fro)
        if self.sample is None:
            rows = m.weights[:SAMPLE_ROWS]
            self.sample = -np.sort(-rows, axis=1)[:, :SAMPLE_KEYS].astype(np.float64)

    def result(self) -> RuleResult:
        e = self.rows.estimate
        return RuleResult(
            rule=self.rule,
            logit_mean=self.logits.mean_estimate(), logit_var=self.logits.var_estimate(),
            top_weight=e(0), saturated_frac=e(1), entropy=e(2), entropy_norm=e(3),
            jacobian_fro=e(4), jacobian_max_abs=e(5),
            logit_hist=self.logit_hist.snapshot(), top_weight_hist=self.top_hist.snapshot(),
            entropy_norm_hist=self.entropy_hist.snapshot(),
            log10_jacobian_hist=self.jac_hist.snapshot(), logit_theory=self.theory,
            sample_weights=self.sample if self.sample is not None else np.zeros((0, 0)),
            target_weight=target_weight_estimate(self.rows, self.n_keys, self.correlation),
            logit_row_var=e(7), logit_row_var_theory=self.row_theory,
            key_mass=e(8), sink_weight=e(9),
        )


def target_weight_estimate(rows: RunningMoments, n_keys: int, correlation: float) -> Estimate:
    """The mean weight on key 0, with an interval that covers at its stated rate.

    At correlation 0 every key is exchangeable, so E[p_0] = E[key mass] / n: exactly 1/n for a
    softmax, whatever the scale. The sample mean of p_0 itself is useless there at large n and
    sharp logits: p_0 is near 1 in the rare rows where key 0 wins and ~e^-100 elsewhere, so a few
    dozen trials show a mean (and an SE) 60 orders of magnitude too small. With a target key the
    sample mean stands, marked not estimable where its skewness says the trials are too few
    (``RunningMoments.checked_estimate``)."""
    if correlation == 0.0:
        mass = rows.estimate(_ROW_FIELDS.index("key_mass"))
        return Estimate(mass.mean / n_keys, mass.se / n_keys)
    return rows.checked_estimate(_ROW_FIELDS.index("target_weight"))


def simulate(
    cfg: SimulationConfig,
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[SimulationSnapshot]:
    """Yield a snapshot after every chunk; the last has ``done=True``. Raises ``Cancelled`` if
    ``cancelled()`` turns true (checked between chunks and key blocks)."""
    start = time.perf_counter()
    backend, device = resolve_backend(cfg)
    method = cfg.resolved_method
    sampler = ScoreSampler(cfg, backend, device, method)
    raw = PooledScoreMoments()
    raw_rows = RunningMoments(1)
    raw_hist = StreamingHistogram(SCORE_BINS)
    raw_theory = raw_score_theory(cfg)
    accs = {name: _RuleAccumulator(cfg, name) for name in cfg.scalings}
    params = cfg.rule_params()
    rule_params = RuleParams(cfg.d_k, cfg.temperature, **params)
    done = 0
    for size in sampler.plan.sizes(cfg.trials):
        if cancelled is not None and cancelled():
            raise Cancelled
        scores = sampler.draw(size, cancelled)
        raw.update(scores.dot)
        raw_rows.update(row_variance(scores.dot)[:, None])
        raw_hist.update(scores.dot)
        for name, acc in accs.items():
            rule = RULE_REGISTRY[name]
            z = rule.pre_logits(scores, cfg.d_k, cfg.temperature, **params)
            logits = rule.capped(z, rule_params)
            acc.update(logits, rule.row_metrics(logits, rule_params, z))
        done += size
        yield SimulationSnapshot(
            config=cfg, trials_done=done, elapsed_s=time.perf_counter() - start,
            done=done >= cfg.trials, backend=backend, device=device, method=method,
            raw_mean=raw.mean_estimate(), raw_var=raw.var_estimate(), raw_hist=raw_hist.snapshot(),
            raw_theory=raw_theory, rules={name: acc.result() for name, acc in accs.items()},
            raw_row_var=raw_rows.estimate(0),
        )


def run_simulation(
    cfg: SimulationConfig,
    cancelled: Callable[[], bool] | None = None,
    on_snapshot: Callable[[SimulationSnapshot], None] | None = None,
) -> SimulationSnapshot:
    """Run to completion and return the final snapshot (``on_snapshot`` sees every one)."""
    last = None
    for snap in simulate(cfg, cancelled):
        if on_snapshot is not None:
            on_snapshot(snap)
        last = snap
    assert last is not None
    return last


@dataclass(frozen=True)
class SweepPoint:
    index: int  #: position in the sweep's list of values
    total: int  #: number of points in the sweep
    snapshot: SimulationSnapshot  #: the finished simulation at this value
    axis: str = "d_k"  #: the swept parameter: "d_k" or "n_keys"

    @property
    def d_k(self) -> int:
        return self.snapshot.config.d_k

    @property
    def n_keys(self) -> int:
        return self.snapshot.config.n_keys

    @property
    def x(self) -> int:
        """The swept value of this point."""
        return int(getattr(self.snapshot.config, self.axis))


def sweep(
    sweep_cfg: SweepConfig,
    cancelled: Callable[[], bool] | None = None,
    on_snapshot: Callable[[SimulationSnapshot], None] | None = None,
) -> Iterator[SweepPoint]:
    """Run the base config at every value of the sweep's axis (d_k or n_keys); yield each point
    as it finishes. Point i uses the same random stream as a single run at that value with the
    same seed. Memory stays bounded at any n: keys are drawn in chunks (engine.sampling)."""
    values = sweep_cfg.values
    for i, value in enumerate(values):
        snap = run_simulation(sweep_cfg.point(value), cancelled, on_snapshot)
        yield SweepPoint(index=i, total=len(values), snapshot=snap, axis=sweep_cfg.axis)


__all__ = [
    "Cancelled", "RuleResult", "SimulationSnapshot", "SweepPoint", "run_simulation", "simulate",
    "sweep", "target_weight_estimate",
]
