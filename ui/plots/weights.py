"""Softmax weights: a heatmap of sample rows (keys sorted by weight) and bars of one row.

The heatmap shows one rule (chosen in the header); the bars show the selected row for every
compared rule side by side, in the rules' colours. Rows are the engine's ``sample_weights``. A thin
dashed line on the heatmap, labelled "row r → bars", marks the row the bars show.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QComboBox, QLabel, QSpinBox

from engine.simulate import SimulationSnapshot
from ui.plots.base import PlotPanel
from ui.plots.finite import finite
from ui.theme import Theme, rule_color

MAX_BAR_KEYS = 64  #: bars beyond this rank are too thin to read; the CSV still has them all


#: characters the heatmap's rule box shows ("softcap", "sigmoid"; "yarn_dynamic" is elided,
#: whole in its list): fixed, so the box's width never depends on the run's rules; its label is
#: "rule:" (was "heatmap:") to keep the page's third column as wide as before (267 px at 1280)
RULE_BOX_CHARS = 7


class WeightsPanel(PlotPanel):
    plot_id = "weights"
    title = "Softmax weights"

    def build(self) -> None:
        self.rule_box = QComboBox(self)
        self.rule_box.setToolTip("Scaling rule whose sample rows the heatmap shows")
        # as wide as the longest rule name whatever it holds: filled on a run's first data, a
        # box sized to its items moved the grid's columns by 20 px (every panel laid out and
        # painted again in that event-loop turn: a 40 ms stall of the window)
        self.rule_box.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.rule_box.setMinimumContentsLength(RULE_BOX_CHARS)  # longer names are elided
        self.row_box = QSpinBox(self)
        self.row_box.setRange(0, 63)
        self.row_box.setToolTip("Sample row (one query) shown in the bar chart, for every rule")
        self.header.insertWidget(2, QLabel("rule:"))  # (whose rows the heatmap shows)
        self.header.insertWidget(3, self.rule_box)
        self.header.insertWidget(4, QLabel("row:"))
        self.header.insertWidget(5, self.row_box)
        self.rule_box.currentIndexChanged.connect(lambda _i: self.invalidate())
        self.row_box.valueChanged.connect(lambda _v: self.invalidate())

        self.heat = self.add_plot(0, 0, "key rank (by weight)", "sample row", legend=False)
        self.heat.invertY(True)
        self.image, self.cbar = self.add_heatmap(self.heat, "weight p")
        # marks the row the bar chart shows: thin, dashed, and says what it is
        self.row_marker = pg.InfiniteLine(
            angle=0, movable=False, label="row {value:.0f} → bars",
            labelOpts={"position": 0.97, "anchors": [(1, 1), (1, 0)]})
        font = self.row_marker.label.textItem.font()
        font.setPointSizeF(font.pointSizeF() * 0.8)
        self.row_marker.label.setFont(font)
        self.heat.addItem(self.row_marker)
        self.bars_plot = self.add_plot(0, 1, "key rank", "weight p")
        self.bars_plot.setYRange(0, 1, padding=0.02)
        # the heatmap (with its colour bar) gets the larger share; its title no longer forces it
        self.glw.ci.layout.setColumnStretchFactor(0, 3)
        self.glw.ci.layout.setColumnStretchFactor(1, 2)
        self.bars: dict[str, pg.BarGraphItem] = {}

    def theme_changed(self, theme: Theme) -> None:
        self.row_marker.setPen(pg.mkPen(theme.foreground + "B0", width=1, style=Qt.PenStyle.DashLine))
        self.row_marker.label.setColor(theme.foreground)
        self.row_marker.label.fill = pg.mkBrush(theme.background + "C0")
        for axis in ("left", "bottom", "right"):
            ax = self.cbar.getAxis(axis) if hasattr(self.cbar, "getAxis") else None
            if ax is not None:
                ax.setPen(theme.foreground)
                ax.setTextPen(theme.foreground)

    def copy_view_to(self, clone: PlotPanel) -> None:
        """The heatmap's rule and the bar chart's row."""
        clone.rule_box.setCurrentText(self.rule_box.currentText())
        clone.row_box.setValue(self.row_box.value())
        clone.refresh(self._state, force=True)

    def data_key(self, state: Any) -> Any:
        snap = getattr(state, "snapshot", None)
        if snap is None:
            return None
        return (id(snap), self.rule_box.currentText(), self.row_box.value())

    def view_controls(self) -> dict[str, Any]:
        return {"heatmap": self.rule_box, "row": self.row_box}

    def apply_view_state(self, state: Any) -> list[str]:
        """The heatmap's rule may not be in the box yet (the figure's run has not drawn): it is
        picked when that run's rules arrive."""
        wanted = state.get("heatmap") if isinstance(state, dict) else None
        self._wanted_rule = wanted if isinstance(wanted, str) else None
        done = super().apply_view_state(state)
        if self._wanted_rule and not any(d.startswith("heatmap") for d in done):
            done.append(f"heatmap {self._wanted_rule}")
        return done

    def prepare(self, state: Any, most: int) -> bool:
        return self._sync(tuple(state.snapshot.rules), most)

    def _sync(self, rules: tuple[str, ...], most: int | None = None) -> bool:
        """The heatmap's rule box and one bar series per rule (at most ``most`` new ones made
        now); True once every rule has its bars."""
        if tuple(self.rule_box.itemText(i) for i in range(self.rule_box.count())) != rules:
            current = getattr(self, "_wanted_rule", None) or self.rule_box.currentText()
            self._wanted_rule = None
            self.rule_box.blockSignals(True)
            self.rule_box.clear()
            self.rule_box.addItems(rules)
            # default: the standard rule if compared, so the heatmap shows the healthy case
            pick = current if current in rules else ("sqrt" if "sqrt" in rules else rules[0])
            self.rule_box.setCurrentText(pick)
            self.rule_box.blockSignals(False)
        for name in [n for n in self.bars if n not in rules]:
            self.bars_plot.removeItem(self.bars.pop(name))
        for name in rules:
            if name not in self.bars:
                if most is not None and most <= 0:
                    return False
                most = None if most is None else most - 1
                colour = rule_color(name)
                item = pg.BarGraphItem(x=[0], height=[0], width=0.8, brush=colour, pen=colour,
                                       name=name)  # short: the plot is narrow
                self.bars_plot.addItem(item)
                self.bars[name] = item
        return True

    def draw(self, state: Any) -> None:
        snap: SimulationSnapshot = state.snapshot
        self._snap = snap
        rules = tuple(snap.rules)
        self._sync(rules)
        shown = self.rule_box.currentText() or rules[0]
        weights = finite(snap.rules[shown].sample_weights)
        if weights.size:
            self.image.setImage(weights.T, autoLevels=False)
            # pixel (key k, row r) centred on (k, r), like the bars
            self.image.setRect(QRectF(-0.5, -0.5, weights.shape[1], weights.shape[0]))
            top = float(weights.max()) if weights.size else 1.0
            self.cbar.setLevels((0.0, max(top, 1e-12)))
            self.row_box.setMaximum(max(0, weights.shape[0] - 1))
        row = self.row_box.value()
        self.row_marker.setValue(row)
        width = 0.8 / max(1, len(rules))
        for i, name in enumerate(rules):
            w = finite(snap.rules[name].sample_weights)
            if row >= w.shape[0]:
                continue
            vals = w[row]
            keys = np.arange(vals.size)
            shown_keys = keys[:MAX_BAR_KEYS]
            self.bars[name].setOpts(x=shown_keys - 0.4 + width * (i + 0.5), height=vals[:MAX_BAR_KEYS],
                                    width=width)
        self.heat.setTitle(f"{shown}: {weights.shape[0]} rows × {weights.shape[1] if weights.ndim == 2 else 0} keys",
                           color=self.theme.foreground, size="9pt")
        self.bars_plot.setTitle(f"row {row}", color=self.theme.foreground, size="9pt")

    def data_rows(self) -> list[dict[str, Any]]:
        """Every sample row of every rule (the heatmap's data; the bars are ``selected_row``),
        built on export rather than at every redraw."""
        snap = getattr(self, "_snap", None)
        if snap is None:
            return []
        selected = self.row_box.value()
        rows: list[dict[str, Any]] = []
        for name, result in snap.rules.items():
            w = finite(result.sample_weights)
            for r in range(w.shape[0]):
                rows += [{"rule": name, "row": r, "key_rank": k, "weight": float(v),
                          "selected_row": r == selected} for k, v in enumerate(w[r])]
        return rows
