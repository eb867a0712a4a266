"""The Real model page's Per head tab: the measured / i.i.d. score std, entropy and the like of
every layer and head (a grid; click a head), and the chosen head's scores and attention under a
scale picked in the form's Head detail box. Analyze runs ``engine.probe.analyze``."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.errors import ConfigError
from engine.probe.analyze import ProbeResult, ProbeSnapshot, analyze, head_detail
from engine.probe.config import PROBE_RULES, ProbeConfig
from engine.probe.export import head_table
from engine.probe.loader import text_length
from engine.probe.summary import summarize
from ui.pages.real_model.form import error_text, format_tokens
from ui.pages.real_model.panels import (
    GRID_GROUPS,
    PROBE_NAMES,
    HeadAttentionPanel,
    HeadGridPanel,
    HeadScoresPanel,
    ProbeView,
)

#: the per-head grids' least height: as every panel's (ui.plots.base), and in presentation mode,
#: where they give the head detail below them three quarters of the height
GRID_MIN_HEIGHT = 200
PRESENT_GRID_MIN_HEIGHT = 150


class PerHeadTab:
    """Part of :class:`ui.pages.real_model.page.RealModelPage` (a base class of it): the per-head
    panels, the analysis that feeds them and the head chosen (``layer``, ``head``, ``rule``)."""

    def _build_detail_box(self, side: QWidget) -> QGroupBox:
        """The scale of the detail plots, the head's summary and Export all."""
        detail_box = QGroupBox("Head detail", side)
        db = QVBoxLayout(detail_box)
        row = QHBoxLayout()
        row.addWidget(QLabel("rule:"))
        self.rule_box = QComboBox(detail_box)
        for rule in PROBE_RULES:
            self.rule_box.addItem(PROBE_NAMES[rule], rule)
        self.rule_box.setToolTip("Scale applied to q·k in the detail plots: the model's own "
                                 "(1/√d_k), none (the bug), or 1/d_k")
        self.rule_box.currentIndexChanged.connect(lambda _i: self._update_view())
        row.addWidget(self.rule_box, 1)
        db.addLayout(row)
        self.summary_label = QLabel(detail_box)
        self.summary_label.setWordWrap(True)
        self.summary_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        db.addWidget(self.summary_label)
        self.export_button = QPushButton("Export all…", detail_box)
        self.export_button.setToolTip("PNG and SVG of every plot, heads.csv, scores.npz and "
                                      "config.json into a new folder")
        self.export_button.setEnabled(False)
        self.export_button.clicked.connect(self.export_all_dialog)
        db.addWidget(self.export_button)
        return detail_box

    def _build_per_head_panels(self) -> None:
        """Nothing yet: the three panels (seven plots and four colour bars, about half a second
        of the page's first opening) are built one per event-loop turn once the page is shown
        (``_grow_per_head``), or at once by the first code that reads one of them."""
        self._per_head: dict[str, Any] = {}
        self._per_head_shape = (6, 12)  #: the blank grids' layers x heads until the panels exist
        self._per_head_group: str | None = None  #: a grid group asked for before they existed

    def _per_head_widget(self) -> QSplitter:
        """The grid over the chosen head's scores and attention (filled as the panels come)."""
        self._per_head_bottom = bottom = QSplitter(Qt.Orientation.Horizontal, self)
        self._per_head_right = right = QSplitter(Qt.Orientation.Vertical, self)
        right.addWidget(bottom)
        # the head detail (two stacked histograms, a heatmap over a curve) needs more height than
        # the per-head grids: 2:3, so that at 1280x720 its histograms keep a readable height
        return right

    #: presentation mode is on (the page's ``presenting``)
    presenting_now = False

    def _per_head_heights(self) -> None:
        """The grids over the head detail: 2:3 (1:3 in presentation mode's larger type, where
        the grids may shrink below their usual minimum: at 1280x720 the head detail's two
        stacked histograms kept 30 px of data each)."""
        right = self._per_head_right
        if right.count() < 2:
            return
        grids = 1 if self.presenting_now else 2
        grid = self._per_head.get("grid")
        if grid is not None:  # (its usual minimum, 200 px, held it at 2:3 at 1280x720)
            grid.glw.setMinimumHeight(PRESENT_GRID_MIN_HEIGHT if self.presenting_now
                                      else GRID_MIN_HEIGHT)
        right.setStretchFactor(0, grids)
        right.setStretchFactor(1, 3)
        total = max(1000, sum(right.sizes()))
        right.setSizes([total * grids // (grids + 3), total * 3 // (grids + 3)])

    _PER_HEAD = (("grid", HeadGridPanel), ("scores", HeadScoresPanel),
                 ("attention", HeadAttentionPanel))

    def _per_head_panel(self, name: str) -> Any:
        """One per-head panel, built now if it was not yet (and put in its place)."""
        panel = self._per_head.get(name)
        if panel is not None:
            return panel
        panel = dict(self._PER_HEAD)[name](self)
        self._per_head[name] = panel
        panel.export_requested.connect(self.export_panel_dialog)
        panel.figure_source = lambda: self._figure_source("probe")
        if name == "grid":
            panel.head_clicked.connect(self.select_head)
            self._per_head_right.insertWidget(0, panel)
            self._per_head_heights()
            if self._per_head_group is not None:
                panel.set_group(self._per_head_group)
            panel.show_empty(*self._per_head_shape)
        else:
            self._per_head_bottom.insertWidget(0 if name == "scores" else 1, panel)
            panel.show_empty()
        self._tab_built("per_head", panel)  # (theme, presentation mode's type, combos)
        if getattr(self, "view", None) is not None:
            panel.refresh(self.view)
        return panel

    def _grow_per_head(self) -> None:
        """The next per-head panel not built yet, then the next one a turn later: the page
        shows at once, and no turn blocks for the three panels together."""
        for name, _cls in self._PER_HEAD:
            if name not in self._per_head:
                self._per_head_panel(name)
                if len(self._per_head) < len(self._PER_HEAD):
                    QTimer.singleShot(0, self._grow_per_head)
                return

    def showEvent(self, event: Any) -> None:  # Qt's name
        super().showEvent(event)
        if len(self._per_head) < len(self._PER_HEAD):
            QTimer.singleShot(0, self._grow_per_head)

    @property
    def grid_panel(self) -> HeadGridPanel:
        return self._per_head_panel("grid")

    @property
    def scores_panel(self) -> HeadScoresPanel:
        return self._per_head_panel("scores")

    @property
    def attention_panel(self) -> HeadAttentionPanel:
        return self._per_head_panel("attention")

    @property
    def panels(self) -> tuple[Any, ...]:
        """The three per-head panels (built now if they were not yet)."""
        return (self.grid_panel, self.scores_panel, self.attention_panel)

    def built_per_head_panels(self) -> list[Any]:
        """The per-head panels built so far (builds nothing)."""
        return [self._per_head[n] for n, _c in self._PER_HEAD if n in self._per_head]

    def _show_empty_per_head(self, n_layers: int, n_heads: int) -> None:
        self._per_head_shape = (n_layers, n_heads)
        for name, panel in self._per_head.items():
            panel.show_empty(n_layers, n_heads) if name == "grid" else panel.show_empty()

    # -- running -------------------------------------------------------------------------------
    def analyze(self) -> bool:
        """Start an analysis of the current text in the worker thread; False if refused."""
        if not self.analyze_button.isEnabled() and not self.worker.is_running():
            return False
        if self.weights_path is not None:  # the lab's runs: the audit is what applies
            return self.run_audit()
        try:
            cfg = ProbeConfig(text=self.text_edit.toPlainText(), model=self.model_dir)
        except ConfigError as exc:
            self._message(error_text(exc) if exc.field != "text" else "type a text first",
                          error=True)
            return False
        models = self._models

        def job(cancelled: Any):
            if models.get(cfg.model) is None:
                yield ProbeSnapshot("loading the model (once)…", 0.02)
            loaded = self._loaded(cfg.model)
            yield from analyze(cfg, loaded, cancelled)

        return self._start("probe", job)

    def _take_probe(self, snap: ProbeSnapshot) -> None:
        """A snapshot of the analysis with its result (the worker's latest)."""
        if snap.result is not self.result:
            self.analyze_s = time.perf_counter() - self._started
            self._show_result(snap.result)

    def _probe_finished_text(self) -> str | None:
        res = self.result
        if res is None:
            return None
        note = ""
        if res.truncated_from is not None:
            note = (f" The text has {text_length(res.truncated_from, res.n_tokens)}; the "
                    f"model takes {res.n_tokens}, so it was truncated.")
        return (f"{res.n_tokens} tokens analyzed in {self.analyze_s:.2f} s "
                f"(model load {res.load_s:.1f} s when first used).{note}")

    # -- results -------------------------------------------------------------------------------
    def _show_result(self, res: ProbeResult) -> None:
        self.result = res
        self.table = head_table(res)
        if self.layer >= res.n_layers or self.head >= res.n_heads:
            self.layer, self.head = 0, 0
        self.tokens_view.setPlainText(format_tokens(res.tokens))
        limit = self._models[res.config.model].max_tokens if res.config.model in self._models else None
        cut = (f"; the text has {text_length(res.truncated_from, res.n_tokens)}, the rest was cut"
               if res.truncated_from is not None else "")
        self.tokens_count.setText(f"{res.n_tokens} tokens" + (f" (model limit {limit})" if limit
                                                              else "") + cut)
        s = summarize(res, self.table)
        se_note = (f", bootstrap SE {s.ratio_se_median:.2g} typical"
                   if s.ratio_se_median is not None else "")
        self.summary_label.setText(
            f"{res.model_name}: {res.n_layers} layers × {res.n_heads} heads, d_k {res.d_k}, "
            f"{res.n_tokens} tokens.<br>"
            f"std ratio measured / i.i.d.: {s.ratio_min:.2f} to {s.ratio_max:.2f} "
            f"(median {s.ratio_median:.2f}{se_note}).<br>"
            f"mean H/log n: model {s.entropy_norm['model']:.2f}, "
            f"no scale {s.entropy_norm['none']:.2f}, "
            f"1/d_k {s.entropy_norm['dk']:.2f}.<br>"
            f"attention matches the model to {s.attn_max_abs_diff:.1e}.")
        self.export_button.setEnabled(True)
        self._update_view()

    def select_head(self, layer: int, head: int) -> None:
        self.layer, self.head = layer, head
        self._update_view()

    @property
    def rule(self) -> str:
        return self.rule_box.currentData()

    def _update_view(self) -> None:
        res = self.result
        if res is None:
            return
        detail = head_detail(res, self.layer, self.head, self.rule)
        self.view = ProbeView(res, self.table, self.layer, self.head, detail)
        for panel in self.panels:
            panel.refresh(self.view)

    def _restore_per_head(self, view: dict[str, Any], what: str) -> str:
        """An opened per-head figure: its head and grid group, analyzed again."""
        layer, head, group = view.get("layer"), view.get("head"), view.get("group")
        if isinstance(layer, int) and isinstance(head, int) and min(layer, head) >= 0:
            self.layer, self.head = layer, head  # (out of the model's range: head 0 of layer 0)
        if group in GRID_GROUPS:
            self._per_head_group = group
            self.grid_panel.set_group(group)
        self.tabs.setCurrentIndex(0)
        self.analyze()
        return (f"the per-head analysis of {what}, layer {self.layer} head {self.head}, "
                f"{self.rule_box.currentText()}")
