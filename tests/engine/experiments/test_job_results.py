"""A job's per-rule results from a hand-made training snapshot (no training): steps to target is
the first logged step at or above the target, the final figures are the last logged values, the
extremes run over every valid log, and a diverged run has no final figures."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from engine.experiments.job import RESULT_FIELDS, rule_results
from engine.training.config import TrainingConfig

STEPS = np.array([0, 10, 20, 30, 40])


def _snapshot(accuracy: list[list[float]], diverged: tuple[int, ...] = (-1, -1),
              valid: np.ndarray | None = None) -> SimpleNamespace:
    """Two runs ("sqrt", "none"), five logs; every figure distinct so that a swap shows."""
    acc = np.array(accuracy, dtype=float).T  # (logs, runs)
    n, runs = acc.shape
    loss = 3.0 - 2.0 * acc + np.arange(runs) * 0.01
    probe = acc * 0.5 + 0.01
    # the extremes sit at a middle log (neither the first nor the last) and in head 1
    bump = np.array([1.0, 2.0, 5.0, 3.0, 2.5])[:n, None, None, None] * np.array([1.0, 1.5])
    heads = {
        "logit_max_abs": bump * (1 + np.arange(runs))[None, :, None, None],
        "logit_std": bump[::-1] * 0.5 + 0.1 * np.arange(runs)[None, :, None, None],
        "entropy_norm": np.broadcast_to(1.0 / (1.0 + bump), (n, runs, 1, 2)).copy(),
    }
    return SimpleNamespace(
        rules=("sqrt", "none"), config=TrainingConfig(scalings=("sqrt", "none")), log_steps=STEPS,
        valid=np.ones((n, runs), bool) if valid is None else valid,
        scalars={"accuracy": acc, "loss": loss, "probe_accuracy": probe},
        heads=heads, diverged_step=np.array(diverged),
        collapse_step=np.array([[[-1, -1]], [[-1, 20]]]))


def test_steps_to_target_is_the_first_logged_step_at_or_above_it():
    snap = _snapshot([[0.1, 0.5, 0.9, 0.95, 0.85],      # reaches 0.9 exactly at step 20
                      [0.1, 0.89, 0.8999, 0.91, 0.99]])  # first at or above at step 30
    res = rule_results(snap, 0.9, 1.5)
    assert res["sqrt"]["steps_to_target"] == 20
    assert res["none"]["steps_to_target"] == 30
    never = rule_results(_snapshot([[0.1, 0.2, 0.3, 0.4, 0.5], [0.0] * 5]), 0.9, 1.0)
    assert never["sqrt"]["steps_to_target"] is None and never["none"]["steps_to_target"] is None
    at_start = rule_results(_snapshot([[0.95, 0.1, 0.2, 0.3, 0.4], [0.0] * 5]), 0.9, 1.0)
    assert at_start["sqrt"]["steps_to_target"] == 0


def test_final_figures_are_the_last_logged_values_and_extremes_span_the_run():
    snap = _snapshot([[0.1, 0.5, 0.9, 0.95, 0.85], [0.2, 0.3, 0.4, 0.6, 0.7]])
    res = rule_results(snap, 0.9, 2.5)
    for r, rule in enumerate(("sqrt", "none")):
        assert set(res[rule]) >= set(RESULT_FIELDS)
        assert res[rule]["final_accuracy"] == snap.scalars["accuracy"][-1, r]
        assert res[rule]["final_loss"] == snap.scalars["loss"][-1, r]
        assert res[rule]["probe_accuracy"] == snap.scalars["probe_accuracy"][-1, r]
        assert res[rule]["max_logit_abs"] == snap.heads["logit_max_abs"][:, r].max()
        assert res[rule]["max_logit_std"] == snap.heads["logit_std"][:, r].max()
        assert res[rule]["min_entropy_norm"] == snap.heads["entropy_norm"][:, r].min()
        assert res[rule]["seconds"] == 2.5 and res[rule]["diverged_step"] is None
    assert res["sqrt"]["final_accuracy"] == 0.85 and res["sqrt"]["final_loss"] == pytest.approx(1.3)
    assert res["sqrt"]["max_logit_abs"] == 7.5 and res["none"]["max_logit_abs"] == 15.0
    assert res["sqrt"]["min_entropy_norm"] == pytest.approx(1 / 8.5)
    assert res["sqrt"]["collapsed"] is False and res["none"]["collapsed"] is True


def test_a_diverged_run_has_no_final_figures_but_keeps_its_extremes_before():
    valid = np.ones((5, 2), bool)
    valid[3:, 1] = False  # run b diverged at step 25: logs 30 and 40 are not valid
    snap = _snapshot([[0.1, 0.5, 0.9, 0.95, 0.85], [0.2, 0.95, 0.4, 0.0, 0.0]],
                     diverged=(-1, 25), valid=valid)
    res = rule_results(snap, 0.9, 1.0)
    b = res["none"]
    assert b["diverged_step"] == 25
    assert b["final_loss"] is None and b["final_accuracy"] is None and b["probe_accuracy"] is None
    assert b["steps_to_target"] == 10
    assert b["max_logit_abs"] == snap.heads["logit_max_abs"][:3, 1].max()  # valid logs only
    assert res["sqrt"]["final_accuracy"] == 0.85


def test_a_run_without_a_valid_log_has_every_figure_empty_but_present():
    valid = np.ones((5, 2), bool)
    valid[:, 0] = False  # sqrt's very first log was already not finite
    snap = _snapshot([[0.95] * 5, [0.2] * 5], diverged=(0, -1), valid=valid)
    snap.config = TrainingConfig(scalings=("sqrt", "none"), eval_lengths=(4, 16))
    snap.scalars.update({f"{m}_len{n}": np.full((5, 2), 0.5) for m in ("accuracy", "entropy_norm")
                         for n in (4, 16)})
    res = rule_results(snap, 0.9, 1.0)["sqrt"]
    assert res["diverged_step"] == 0  # step 0 is a step: not "never diverged"
    for name in ("final_loss", "final_accuracy", "probe_accuracy", "steps_to_target",
                 "max_logit_abs", "max_logit_std", "min_entropy_norm", "clip_events",
                 "accuracy_len4", "entropy_norm_len4", "accuracy_len16", "entropy_norm_len16"):
        assert name in res and res[name] is None, name


def test_a_divergence_or_a_collapse_at_step_0_counts():
    valid = np.ones((5, 2), bool)
    valid[1:, 1] = False
    snap = _snapshot([[0.1, 0.5, 0.9, 0.95, 0.85], [0.2, 0.0, 0.0, 0.0, 0.0]],
                     diverged=(-1, 0), valid=valid)
    snap.collapse_step = np.array([[[0, -1]], [[-1, -1]]])  # sqrt's head 0 collapsed at step 0
    res = rule_results(snap, 0.9, 1.0)
    assert res["none"]["diverged_step"] == 0 and res["none"]["final_loss"] is None
    assert res["none"]["max_logit_abs"] == 3.0  # the one valid log: 1.0 x head 1.5 x run 2
    assert res["sqrt"]["collapsed"] is True and res["none"]["collapsed"] is False


def test_a_figure_that_is_not_finite_is_none():
    snap = _snapshot([[0.1, 0.5, 0.9, 0.95, 0.85], [0.2, 0.3, 0.4, 0.6, 0.7]])
    snap.scalars["loss"][-1, 0] = np.nan
    snap.heads["logit_max_abs"][2, 1, 0, 1] = np.inf
    res = rule_results(snap, 0.9, 1.0)
    assert res["sqrt"]["final_loss"] is None and res["none"]["final_loss"] == pytest.approx(1.61)
    assert res["none"]["max_logit_abs"] is None and res["sqrt"]["max_logit_abs"] == 7.5
    assert isinstance(res["sqrt"]["final_accuracy"], float)


def test_qk_clip_events_are_counted_for_the_qkclip_rule_only():
    snap = _snapshot([[0.1] * 5, [0.2] * 5])
    snap.rules = ("sqrt", "qkclip")
    snap.clipped_per_step = np.array([[1, 1, 1], [0, 2, 5]])  # (run, step): sqrt's never read
    res = rule_results(snap, 0.9, 1.0)
    assert res["qkclip"]["clip_events"] == 7 and res["sqrt"]["clip_events"] is None
    del snap.clipped_per_step  # a snapshot that does not count them
    assert rule_results(snap, 0.9, 1.0)["qkclip"]["clip_events"] is None


def _with_lengths(length_logs=None):
    """Accuracy at N = 4 / 16 per log: run r, log i -> 0.1 i + 0.01 r (and 0.5 + that at 16)."""
    snap = _snapshot([[0.1, 0.5, 0.9, 0.95, 0.85], [0.2, 0.3, 0.4, 0.6, 0.7]])
    snap.config = TrainingConfig(scalings=("sqrt", "none"), eval_lengths=(4, 16))
    grid = 0.1 * np.arange(5)[:, None] + 0.01 * np.arange(2)[None, :]
    snap.scalars.update({"accuracy_len4": grid, "accuracy_len16": 0.5 + grid,
                         "entropy_norm_len4": 1 - grid, "entropy_norm_len16": 0.9 - grid})
    if length_logs is not None:
        snap.length_logs = length_logs
    return snap


def test_the_length_results_are_those_of_the_last_evaluated_log():
    res = rule_results(_with_lengths(), 0.9, 1.0)  # every log evaluated: the last, log 4
    assert res["none"]["accuracy_len4"] == pytest.approx(0.41)
    assert res["none"]["entropy_norm_len16"] == pytest.approx(0.49)
    assert res["sqrt"]["accuracy_len16"] == pytest.approx(0.9)
    # evaluated at logs 0 and 2 only (eval_every): log 2's figures, per run
    res = rule_results(_with_lengths(lambda r: np.array([0, 2]) if r == 1 else np.array([1])),
                       0.9, 1.0)
    assert res["none"]["accuracy_len4"] == pytest.approx(0.21)
    assert res["sqrt"]["accuracy_len4"] == pytest.approx(0.1)
    res = rule_results(_with_lengths(lambda r: np.array([], int)), 0.9, 1.0)  # never evaluated
    assert res["sqrt"]["accuracy_len4"] is None and res["none"]["entropy_norm_len16"] is None


def test_no_length_results_after_a_divergence():
    snap = _with_lengths()
    snap.diverged_step = np.array([-1, 0])
    res = rule_results(snap, 0.9, 1.0)
    assert res["none"]["accuracy_len4"] is None and res["none"]["entropy_norm_len16"] is None
    assert res["sqrt"]["accuracy_len4"] == pytest.approx(0.4)
