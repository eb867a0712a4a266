"""The Training page's length panel: accuracy (with its interval) and entropy per eval length."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")


def test_length_panel_draws_the_latest_log_per_rule(qtbot):
    from engine.training.config import TrainingConfig
    from engine.training.trainer import run_training
    from ui.plots.training.lengths import LengthPanel, wilson
    from ui.plots.training.panels import PANEL_CLASSES, TrainingView

    assert LengthPanel in PANEL_CLASSES
    cfg = TrainingConfig(d_model=16, items_max=4, classes=4, key_dim=4, steps=2, log_every=1,
                         batch=4, probe_size=2, scalings=("sqrt", "ssmax"), eval_lengths=(16, 64),
                         eval_size=20, device="cpu")
    _, snap = run_training(cfg)
    panel = LengthPanel()
    qtbot.addWidget(panel)
    panel.refresh(TrainingView(snap), force=True)
    rows = [r for r in panel.data_rows() if r["set"] == "evaluation"]
    assert {(r["scaling"], r["items"]) for r in rows} == {(a, n) for a in ("sqrt", "ssmax") for n in (16, 64)}
    probe = [r for r in panel.data_rows() if r["set"] != "evaluation"]
    assert [(r["scaling"], r["items"]) for r in probe] == [("sqrt", 4), ("ssmax", 4)]
    assert probe[0]["accuracy"] == snap.scalars["probe_accuracy"][-1, 0]
    for r in rows:
        i = snap.rules.index(r["scaling"])
        assert r["accuracy"] == snap.scalars[f"accuracy_len{r['items']}"][-1, i]
        assert r["accuracy_lo95"] <= r["accuracy"] <= r["accuracy_hi95"]
    x, _y = panel.items["sqrt"][0].getData()
    np.testing.assert_allclose(10.0 ** x, [16, 64])
    assert panel.acc_plot.getAxis("bottom").labelText == "items in the set"
    assert [t.text for _s, t in panel.acc_plot.legend.items] == ["sqrt: q·k/√d_k", "ssmax: s·ln n·q·k/√d_k"]
    lo, hi = wilson(0, 20)
    assert lo == 0.0 and 0.1 < hi < 0.2  # a rate of 0/20 still has an upper bound
    # without evaluation lengths the panel says how to get them
    _, plain = run_training(cfg.replace(eval_lengths=()))
    panel.refresh(TrainingView(plain), force=True)
    assert "eval_lengths" in panel.header_label.text()
    assert {r["set"] for r in panel.data_rows()} == {"probe (training sizes)"}


def test_length_panel_shows_recall_pairs_at_the_latest_evaluated_log(qtbot):
    """eval_every = 2: after logs 0 and 1 only log 0 holds an evaluation; the x axis is pairs."""
    from engine.training.config import TrainingConfig
    from engine.training.trainer import Trainer
    from ui.plots.training.lengths import LengthPanel
    from ui.plots.training.panels import TrainingView

    cfg = TrainingConfig(task="recall", d_model=16, heads=2, layers=2, classes=32, pairs=2,
                         positions="sinusoidal", steps=4, log_every=1, batch=4, probe_size=2,
                         scalings=("sqrt", "logn"), eval_lengths=(8, 32), eval_size=10,
                         eval_every=2, hist_bins=20, device="cpu", lr=0.05)
    trainer = Trainer(cfg)
    trainer.advance()
    trainer.advance()
    snap = trainer.snapshot()
    assert snap.length_evaluated.tolist() == [True, False]
    panel = LengthPanel()
    qtbot.addWidget(panel)
    panel.refresh(TrainingView(snap), force=True)
    rows = [r for r in panel.data_rows() if r["set"] == "evaluation"]
    assert len(rows) == 4 and {r["step"] for r in rows} == {0}
    for r in rows:
        i = snap.rules.index(r["scaling"])
        assert r["accuracy"] == snap.scalars[f"accuracy_len{r['items']}"][0, i]
    assert panel.acc_plot.getAxis("bottom").labelText == "key-value pairs"
    assert "2 pairs" in panel.header_label.text()


def test_logged_rows_with_evaluation_lengths_rebuild_the_length_panel(qtbot):
    """An experiment job's metrics rows (e.g. of the ``length`` experiment) opened in the
    Training page: the length columns and which logs hold them survive the rebuild."""
    from engine.training.config import TrainingConfig
    from engine.training.trainer import run_training
    from ui.pages.training.metrics_view import snapshot_from_rows
    from ui.plots.training.lengths import LengthPanel
    from ui.plots.training.panels import TrainingView

    cfg = TrainingConfig(d_model=16, items_max=4, classes=4, key_dim=4, steps=4, log_every=1,
                         batch=4, probe_size=2, scalings=("sqrt", "logn"), eval_lengths=(16,),
                         eval_size=20, eval_every=3, device="cpu")
    _, snap = run_training(cfg)
    rebuilt = snapshot_from_rows(snap.metrics_rows(), cfg)
    for r in range(2):
        assert list(rebuilt.length_logs(r)) == list(snap.length_logs(r))
        i = snap.length_logs(r)[-1]
        assert rebuilt.scalars["accuracy_len16"][i, r] == snap.scalars["accuracy_len16"][i, r]
    panel = LengthPanel()
    qtbot.addWidget(panel)
    panel.refresh(TrainingView(rebuilt), force=True)
    got = {(row["scaling"], row["items"]): row["accuracy"] for row in panel.data_rows()
           if row["set"] == "evaluation"}
    assert got == {(rule, 16): snap.scalars["accuracy_len16"][snap.length_logs(r)[-1], r]
                   for r, rule in enumerate(snap.rules)}
