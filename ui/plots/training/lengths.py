"""The Training page's length panel: accuracy and attention entropy at each evaluation length.

Runs with ``eval_lengths`` are also evaluated, without gradient, on sets of other sizes (recall:
more pairs; engine.training.lengths). Here: the latest evaluated log of each run, against the set
size (log axis), accuracy with its 95 % Wilson interval over the ``eval_size`` examples, and the mean entropy /
ln(n) of the query's attention row. The dotted line marks the longest training set (items_max);
the open circles there are the probe batch (training set sizes, items_min..items_max; recall: its
pairs), the reference the longer sets are compared with.
"""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from engine.rules import rule_label
from ui.plots.log_ticks import log_ticks
from ui.plots.rule_pens import symbol_style
from ui.plots.training.base import TrainingPanel
from ui.theme import Theme, rule_color

Z95 = 1.959964


def wilson(k: float, m: int) -> tuple[float, float]:
    """95 % Wilson interval of a rate k/m (valid at 0 and 1, unlike p ± z se)."""
    p = k / m
    den = 1 + Z95**2 / m
    centre = (p + Z95**2 / (2 * m)) / den
    half = Z95 * math.sqrt(p * (1 - p) / m + Z95**2 / (4 * m * m)) / den
    return max(0.0, centre - half), min(1.0, centre + half)



def _x_ticks(rng: Any) -> list[list[tuple[float, str]]] | None:
    """log_ticks where they label at least two ticks, else pyqtgraph's own."""
    ticks = log_ticks(*rng)
    return ticks if len(ticks[0]) >= 2 else None

class LengthPanel(TrainingPanel):
    plot_id = "train_lengths"
    title = "Accuracy and entropy at other lengths"
    empty_text = "Accuracy at other\nset sizes (retrieval,\neval_lengths)"

    @classmethod
    def has_figure(cls, snap: Any) -> bool:
        """Without eval_lengths there is only the probe batch's point per rule: no file."""
        return bool(snap.config.eval_lengths)

    def build(self) -> None:
        self.acc_plot = self.add_plot(0, 0, "items in the set", "accuracy (eval. sets)")
        self.ent_plot = self.add_plot(0, 1, "items in the set", "entropy / log(n)", legend=False)
        for p in (self.acc_plot, self.ent_plot):
            p.setLogMode(x=True)
            p.setYRange(0.0, 1.0, padding=0.02)
            # decade (and 2, 5) labels that follow the view: pyqtgraph's own crowd a narrow panel
            axis = p.getAxis("bottom")
            p.getViewBox().sigXRangeChanged.connect(
                lambda _vb, rng, axis=axis: axis.setTicks(_x_ticks(rng)))
            axis.setTicks(_x_ticks(p.viewRange()[0]))
        self.markers = [pg.InfiniteLine(angle=90, movable=False) for _ in range(2)]
        self.acc_plot.addItem(self.markers[0])
        self.ent_plot.addItem(self.markers[1])
        self.items: dict[str, tuple[pg.PlotDataItem, pg.ErrorBarItem, pg.PlotDataItem]] = {}
        self.probe_acc = pg.ScatterPlotItem(size=9, brush=None)
        self.probe_ent = pg.ScatterPlotItem(size=9, brush=None)
        self.acc_plot.addItem(self.probe_acc)
        self.ent_plot.addItem(self.probe_ent)
        self._rows: list[dict[str, Any]] = []

    def theme_changed(self, theme: Theme) -> None:
        super().theme_changed(theme)  # the empty panel's hint follows the theme
        for line in self.markers:
            line.setPen(pg.mkPen(theme.foreground, width=1, style=Qt.PenStyle.DotLine))

    def _sync(self, rules: tuple[str, ...]) -> None:
        for rule in [r for r in self.items if r not in rules]:
            acc, err, ent = self.items.pop(rule)
            self.acc_plot.removeItem(acc)
            self.acc_plot.removeItem(err)
            self.ent_plot.removeItem(ent)
        for rule in rules:
            if rule not in self.items:
                pen = pg.mkPen(rule_color(rule), width=2)
                acc = pg.PlotDataItem(pen=pen, symbol="o", symbolSize=5, name=rule_label(rule),
                                      **symbol_style(rule_color(rule), None))
                err = pg.ErrorBarItem(pen=pg.mkPen(rule_color(rule), width=1), beam=0.03)
                ent = pg.PlotDataItem(pen=pen, symbol="o", symbolSize=5,
                                      **symbol_style(rule_color(rule), None))
                self.acc_plot.addItem(err)
                self.acc_plot.addItem(acc)
                self.ent_plot.addItem(ent)
                self.items[rule] = (acc, err, ent)

    def _draw_probe(self, snap: Any) -> None:
        """The probe batch's accuracy and mean entropy / log n at the training length."""
        cfg = snap.config
        x_train = cfg.items_max if cfg.task == "retrieval" else cfg.pairs
        for line in self.markers:
            line.setValue(math.log10(x_train))
        acc_pts, ent_pts = [], []
        for r, rule in enumerate(snap.rules):
            ok = np.flatnonzero(snap.valid[:, r])
            if ok.size == 0:
                continue
            i = ok[-1]
            acc = float(snap.scalars["probe_accuracy"][i, r])
            ent = float(snap.heads["entropy_norm"][i, r].mean())
            lo, hi = wilson(acc * cfg.probe_size, cfg.probe_size)
            pen = pg.mkPen(rule_color(rule), width=2)
            acc_pts.append({"pos": (math.log10(x_train), acc), "pen": pen})
            ent_pts.append({"pos": (math.log10(x_train), ent), "pen": pen})
            self._rows.append({"scaling": rule, "step": int(snap.log_steps[i]), "items": x_train,
                               "set": "probe (training sizes)", "accuracy": acc,
                               "accuracy_lo95": lo, "accuracy_hi95": hi, "entropy_norm": ent})
        self.probe_acc.setData(acc_pts)
        self.probe_ent.setData(ent_pts)

    def draw(self, state: Any) -> None:
        snap = state.snapshot
        cfg = snap.config
        lengths = tuple(cfg.eval_lengths)
        self._rows = []
        self._sync(tuple(snap.rules) if lengths else ())
        self._draw_probe(snap)
        x_name = "items in the set" if cfg.task == "retrieval" else "key-value pairs"
        for p in (self.acc_plot, self.ent_plot):  # recall's lengths are pairs
            if p.getAxis("bottom").labelText != x_name:
                p.setLabel("bottom", x_name)
        if not lengths:
            self._caption("open circles: the probe batch at the training sizes; set eval_lengths "
                          "to evaluate at longer sets (recall: more pairs)")
            return
        x = np.array(lengths, dtype=np.float64)
        m = cfg.eval_size
        for r, rule in enumerate(snap.rules):
            ok = snap.length_logs(r)  # the logs that hold an evaluation (eval_every)
            acc_item, err_item, ent_item = self.items[rule]
            if ok.size == 0:
                for item in (acc_item, ent_item):
                    item.setData([], [])
                err_item.setData(x=np.zeros(0), y=np.zeros(0), top=np.zeros(0), bottom=np.zeros(0))
                continue
            i = ok[-1]
            acc = np.array([snap.scalars[f"accuracy_len{n}"][i, r] for n in lengths])
            ent = np.array([snap.scalars[f"entropy_norm_len{n}"][i, r] for n in lengths])
            lo_hi = np.array([wilson(a * m, m) for a in acc])
            acc_item.setData(x, acc)
            ent_item.setData(x, ent)
            err_item.setData(x=np.log10(x), y=acc, top=lo_hi[:, 1] - acc, bottom=acc - lo_hi[:, 0])
            step = int(snap.log_steps[i])
            self._rows += [{"scaling": rule, "step": step, "items": int(n), "set": "evaluation",
                            "accuracy": float(a),
                            "accuracy_lo95": float(lo), "accuracy_hi95": float(hi),
                            "entropy_norm": float(e)}
                           for n, a, (lo, hi), e in zip(lengths, acc, lo_hi, ent, strict=True)]
        trained = (f"{cfg.items_max} items" if cfg.task == "retrieval"
                   else f"{cfg.pairs} pairs")
        self._caption(f"latest evaluation, {m} examples per size, bars: 95 % interval; dotted: "
                      f"trained up to {trained} (open circles: the probe batch)")

    def _caption(self, text: str) -> None:
        """The header: title and caption (a narrow panel cuts the caption; its tooltip has it)."""
        self.header_label.setText(f"<b>{self.title}</b> &nbsp; {html.escape(text)}")
        self.header_label.setToolTip(text)

    def data_rows(self) -> list[dict[str, Any]]:
        return list(self._rows)
