"""The Training page: a tiny model trained under several scaling rules, watched live.

Flow: the form -> a frozen TrainingConfig -> ``Trainer`` (engine, torch) whose ``iterate()`` runs
in ``ui.worker.Worker``'s thread -> the worker keeps only the latest snapshot -> a 30 Hz timer
takes it and each visible panel redraws if its data changed.

Controls: Start (from step 0 with the form's config), Pause/Resume (stop iterating and keep the
trainer; iterate again), Step (one step, observed, while paused), Stop (end the run, keep the
results for export), Reset (forget the run; the next Start re-creates the same initial weights).
The trainer is only touched by one thread at a time: every control first stops the worker and
waits for its thread.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSize, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSpinBox,
    QWidget,
)

from engine.errors import ConfigError
from engine.training.config import TrainingConfig
from ui.pages.base import LivePage, PanelRedraw
from ui.pages.training.controls import TrainingControls
from ui.pages.training.metrics_view import NOT_IN_ROWS, UNLOGGED, snapshot_from_rows
from ui.plots.base import panel_grid
from ui.plots.header_elide import elide_title
from ui.plots.rule_strip import rule_parts, show_parts, strip_label, style_key_part
from ui.plots.training.panels import PANEL_CLASSES, GradPanel, TrainingPanel, TrainingView
from ui.theme import ERROR_TEXT, current_theme, themed_css

PANELS_PER_TICK = 3  #: panels painted per timer tick at most (the rest catch up next tick)
SNAPSHOT_INTERVAL_S = 0.05  #: the engine yields at most this often (the GUI draws the latest)
JOIN_S = 10.0
#: plot_id -> (row, column, column span): four columns, three rows, so that every panel fits a
#: 1280x720 projector beside the form without scrolling (the two heatmaps at the bottom get two columns)
GRID = {
    "train_loss": (0, 0, 1), "train_accuracy": (0, 1, 1), "train_entropy": (0, 2, 1),
    "train_logit_std": (0, 3, 1),
    "train_grads": (1, 0, 1), "train_jacobian": (1, 1, 1), "train_grad_chain": (1, 2, 1),
    "train_logit_dist": (1, 3, 1),
    "train_probe_attention": (2, 0, 2), "train_lengths": (2, 2, 2),
}
COLUMNS = 4
#: the last column's share of the width against COLUMN_STRETCH for each other column
COLUMN_STRETCH, LAST_COLUMN_STRETCH = 8, 11
#: three rows of this fit the plot area of a 1280x720 screen's window, its title bar included
#: (1280x688 inside: 519 px for the rows; 170 scrolled them by 3 px)
PANEL_MIN_HEIGHT = 165
#: ... and in presentation mode, whose larger type makes the bar, status line and rule strip
#: taller (three rows of 170 left the bottom row 11 px below a 1280x720 screen's edge)
PRESENT_MIN_HEIGHT = 140


class _PlotsArea(QScrollArea):
    """The plots' scroll area asks for no more height than its rows' minimum: the page's
    word-wrapped status line gives the page a height for its width, which the tab's scroll area
    (ui.window.page_tabs) reads from the preferred heights, and this one's preferred height
    made the page 1 px taller than a 1280x720 window's in presentation mode (it scrolled)."""

    def sizeHint(self) -> QSize:  # Qt's name
        return QSize(super().sizeHint().width(), self.minimumSizeHint().height())


class TrainingPage(LivePage, PanelRedraw):
    #: "idle" | "starting" | "running" | "paused" | "stopped" | "done" | "error" | "viewing"
    #: ("viewing": logged rows shown by ``show_metrics``, no trainer)
    state_changed = Signal(str)
    join_s = JOIN_S

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("training_page")
        self.trainer: Any = None
        self.snapshot: Any = None
        self.status = "idle"
        #: an opened figure's heatmap selection (run rule, layer, head), applied on the next draw
        self._wanted_selection: tuple[str, int, int] | None = None
        self.worker.finished.connect(self._on_finished)
        self.worker.error.connect(self._on_error)
        self.worker.cancelled.connect(lambda _g: None)

        self.controls = TrainingControls()
        right = self.form_beside(self.controls, 250, 330)
        right.addLayout(self._build_bar())
        self.status_label = QLabel(self)
        self.status_label.setWordWrap(True)
        right.addWidget(self.status_label)
        #: the on-screen legend of every plot: each rule's colour and line pattern, once (the
        #: plots keep their legends for exported figures)
        self.rule_strip = strip_label(self)
        self._strip_rules: tuple[str, ...] = ()
        right.addWidget(self.rule_strip)
        right.addWidget(self._build_plots(), 1)

        self.view: TrainingView | None = None
        self.timer.start()
        self.controls.changed.connect(self._validate)
        self._set_status("idle")
        self._validate()

    # -- construction --------------------------------------------------------------------------
    def _build_bar(self) -> QHBoxLayout:
        """The run buttons, why Start is refused, and the heatmaps' run/layer/head choice."""
        bar = QHBoxLayout()
        self.buttons = self.add_buttons(bar, (
            ("start", "Start", "Train every checked rule from step 0 (same initial weights, same batches)"),
            ("pause", "Pause", "Pause or resume training (the state is kept)"),
            ("step", "Step", "One training step (observed), while paused or before starting"),
            ("stop", "Stop", "End the run; the results stay for inspection and export"),
            ("reset", "Reset", "Forget the run: the next Start re-creates the same initial weights"),
            ("export", "Export all…", "PNG/SVG of every plot, metrics.csv, metrics_heads.csv, "
                                       "histograms.npz, config.json and the trained weights"),
        ))
        self.buttons["start"].clicked.connect(self.start)
        self.buttons["pause"].clicked.connect(self.toggle_pause)
        self.buttons["step"].clicked.connect(self.step)
        self.buttons["stop"].clicked.connect(self.stop)
        self.buttons["reset"].clicked.connect(self.reset)
        self.buttons["export"].clicked.connect(self.export_all_dialog)
        #: why Start is refused, next to it (the form's own message sits at its bottom)
        self.start_reason = QLabel(self)
        self.start_reason.setObjectName("start_reason")
        self.start_reason.setWordWrap(True)
        self.start_reason.setMaximumWidth(260)
        bar.addWidget(self.start_reason)
        bar.addSpacing(12)
        bar.addWidget(QLabel("heatmaps:"))
        self.run_box = QComboBox(self)
        self.run_box.setToolTip("Run (scaling rule) shown by the two heatmaps")
        self.layer_box = QSpinBox(self)
        self.layer_box.setPrefix("layer ")
        self.layer_box.setToolTip("Layer shown by the two heatmaps")
        self.head_box = QSpinBox(self)
        self.head_box.setPrefix("head ")
        self.head_box.setToolTip("Head shown by the two heatmaps")
        for w in (self.run_box, self.layer_box, self.head_box):
            bar.addWidget(w)
        self.run_box.currentIndexChanged.connect(self._selection_changed)
        self.layer_box.valueChanged.connect(self._selection_changed)
        self.head_box.valueChanged.connect(self._selection_changed)
        bar.addStretch(1)
        return bar

    def _build_plots(self) -> QScrollArea:
        """The plot panels in a scrollable grid; each exports through the page."""
        scroll = _PlotsArea(self)
        scroll.setWidgetResizable(True)
        inner = QWidget(scroll)
        grid, panels = panel_grid(inner, PANEL_CLASSES, GRID, min_height=PANEL_MIN_HEIGHT, margin=2,
                                  spacing=4)
        for c in range(COLUMNS):
            # the last column a little wider: its logit heatmap shares it with a colour bar,
            # and at 1280x720 an equal share left the heatmap a 40 px sliver
            grid.setColumnStretch(c, LAST_COLUMN_STRETCH if c == COLUMNS - 1 else COLUMN_STRETCH)
        for r in range(3):
            grid.setRowStretch(r, 1)
        self.panels: dict[str, TrainingPanel] = panels
        for panel in panels.values():
            panel.set_legend_on_screen(False)  # the rule strip above names the rules
            # a long header caption is cut in a narrow column instead of widening the grid
            panel.header_label.setMinimumWidth(1)
            if panel.header_label.text() == f"<b>{panel.title}</b>":  # (its title alone: "…")
                elide_title(panel.header_label, panel.title, panel.header)
            panel.export_requested.connect(self.export_panel_dialog)  # its ⋯ menu, right-click
        scroll.setWidget(inner)
        return scroll

    # -- controls ------------------------------------------------------------------------------
    def presenting(self, on: bool) -> None:
        """Presentation mode: the form is left out (at the larger type its right half was cut:
        the second column of rules read "sq", "te", "qk"), the plots take its room; Start,
        Step and Stop stay above them; the rows may be lower (PRESENT_MIN_HEIGHT) and still
        fill the height there is."""
        self.form_column.setVisible(not on)
        for panel in self.panels.values():
            panel.setMinimumHeight(PRESENT_MIN_HEIGHT if on else PANEL_MIN_HEIGHT)

    def start(self) -> None:
        """Train from step 0 with the form's config (any current run is discarded)."""
        try:
            cfg = self.controls.config_from_widgets()
        except ConfigError:
            return
        self._halt()
        self.trainer = None
        self.snapshot = None
        self._launch(cfg, single=False)

    def toggle_pause(self) -> None:
        if self.status in ("running", "starting"):
            self.pause()
        elif self.status == "paused":
            self.resume()

    def pause(self) -> None:
        if self.status not in ("running", "starting"):
            return
        self._halt()
        self._catch_up()
        self._set_status("paused")

    def resume(self) -> None:
        if self.status != "paused" or self.trainer is None:
            return
        self._launch(self.trainer.cfg, single=False)

    def step(self) -> None:
        """One observed step; starts a trainer first when there is none."""
        if self.status in ("running", "starting"):
            self.pause()
        if self.status in ("stopped", "done"):
            return
        if self.trainer is None:
            try:
                cfg = self.controls.config_from_widgets()
            except ConfigError:
                return
        else:
            cfg = self.trainer.cfg
        self._launch(cfg, single=True)

    def stop(self) -> None:
        if self.status not in ("running", "starting", "paused"):
            return
        self._halt()
        self._catch_up()
        self._set_status("stopped")

    def reset(self) -> None:
        self._halt()
        self.trainer = None
        self.snapshot = None
        self.view = None
        for panel in self.panels.values():
            panel.clear_data()
        self._show_form_rules()
        self._set_status("idle")

    # -- the API other pages use (through the window) -------------------------------------------
    def current_config(self) -> Any:
        """The form's TrainingConfig (raises ConfigError naming the field if it is invalid)."""
        return self.controls.config_from_widgets()

    def session_params(self) -> dict[str, Any]:
        """The form's parameters for a session (ConfigError if the form is invalid)."""
        return self.controls.config_from_widgets().to_dict()

    def apply_session_params(self, data: dict[str, Any]) -> bool:
        """Put a session's parameters into the form; False while a run owns the form."""
        if self.status not in ("idle", "stopped", "done", "error", "viewing"):
            return False
        self.controls.set_config(TrainingConfig.from_dict(data))
        return True

    def show_metrics(self, rows: list[dict[str, Any]], title: str, config: Any,
                     diverged: dict[str, int | None] | None = None, seconds: float = 0.0,
                     device: str = "", source: str = "") -> bool:
        """Show logged metrics rows (e.g. one experiment job's) in the curve plots without
        training; the form takes ``config`` and the preset box names ``source`` ("experiment
        job 3"; else the title). False (and a note in the status line) while a run of this page
        is active."""
        if self.status in ("running", "starting", "paused", "stepping"):
            self._update_status_text("a training run is active: stop it to view another run",
                                     error=True)
            return False
        snap = snapshot_from_rows(rows, config, diverged, seconds, device)
        # the form shows what the curves are of (Start reruns it), and the preset box says so
        self.controls.show_source(source or title, f"{title}: its logged curves; the form holds "
                                  "its parameters (Start trains it again).", config)
        self.trainer = None
        self.snapshot = snap
        for pid in NOT_IN_ROWS:
            self.panels[pid].clear_data()
            self.panels[pid].show_empty(UNLOGGED)
        self._sync_selection()
        self._update_view()
        self._set_status("viewing", f"{title}: logged curves (per-head plots show the mean over "
                                    "heads; logit histograms and probe weights are not logged)")
        return True

    def _viewing_rows(self) -> bool:
        """A snapshot without a trainer is one shown from logged rows (``show_metrics``)."""
        return self.snapshot is not None and self.trainer is None

    # -- the run -------------------------------------------------------------------------------
    def _halt(self) -> None:
        """Stop the worker and wait for its thread, so the trainer has one user at a time."""
        if self.worker.is_running():
            self.worker.stop()
            self.worker.join(JOIN_S)

    def _trainer_free(self) -> bool:
        """No thread is inside the trainer (a step of a huge model can outlast ``_halt``'s wait:
        then the GUI keeps the last snapshot and does not touch the trainer)."""
        return self.worker.join(0.0)

    def _launch(self, cfg: Any, single: bool) -> None:
        if self.trainer is not None and self.trainer.cfg == cfg and not self._trainer_free():
            self._update_status_text("the last step is still finishing: try again in a moment")
            return
        holder = self

        def factory(cancelled):
            if holder.trainer is None or holder.trainer.cfg != cfg:
                from engine.training.trainer import Trainer  # imports torch (once)

                holder.trainer = Trainer(cfg)
                yield holder.trainer.snapshot()
            if single:
                holder.trainer.advance(force_log=True)
                yield holder.trainer.snapshot()
                return
            yield from holder.trainer.iterate(cancelled, min_interval_s=SNAPSHOT_INTERVAL_S)

        self._single = single
        self.worker.start(factory)
        if single:
            self._set_status("stepping")
        else:
            self._set_status("starting" if self.trainer is None else "running")

    def _on_finished(self, _generation: int) -> None:
        self._take()
        if self._single:
            done = self.trainer is not None and self.trainer.done
            self._set_status("done" if done else "paused")
        else:
            self._set_status("done")

    def _on_error(self, _generation: int, exc: Any) -> None:
        self._set_status("error", f"{type(exc).__name__}: {exc}")

    # -- drawing -------------------------------------------------------------------------------
    def _take(self) -> bool:
        got = self.worker.take_latest()
        if got is None:
            return False
        self.snapshot = got.item
        if self.status == "starting":
            self._set_status("running")
        self._sync_selection()
        self._update_view()
        self._update_status_text()
        return True

    def _catch_up(self) -> None:
        """After the thread ended: show the trainer's own latest state (nothing is lost)."""
        got = self.worker.take_latest()
        if got is not None:
            self.snapshot = got.item
        if self.trainer is not None and self._trainer_free():
            self.snapshot = self.trainer.snapshot()
        if self.snapshot is not None:
            self._sync_selection()
            self._update_view()

    def tick(self) -> None:
        self._take()
        self.redraw()

    def redraw(self, budget: int = PANELS_PER_TICK) -> list[str]:
        """Redraw at most ``budget`` changed, visible panels, taking turns."""
        return self.redraw_panels(budget)

    def redraw_source(self) -> Any:
        return self.view

    def drawn_ids(self) -> list[str]:
        """Logged rows (``show_metrics``) have no logit histograms or probe weights."""
        return [pid for pid in self.panels if not (self._viewing_rows() and pid in NOT_IN_ROWS)]

    def _sync_selection(self) -> None:
        snap = self.snapshot
        rules = tuple(snap.rules)
        wanted = self._wanted_selection
        if tuple(self.run_box.itemText(i) for i in range(self.run_box.count())) != rules or wanted:
            current = wanted[0] if wanted else self.run_box.currentText()
            self.run_box.blockSignals(True)
            self.run_box.clear()
            self.run_box.addItems(rules)
            pick = current if current in rules else ("none" if "none" in rules else rules[0])
            self.run_box.setCurrentText(pick)
            self.run_box.blockSignals(False)
        self.layer_box.setRange(0, snap.config.layers - 1)
        self.head_box.setRange(0, snap.config.heads - 1)
        if wanted:  # an opened figure's heatmap: its run, layer and head once they exist
            self._wanted_selection = None
            self.layer_box.setValue(wanted[1])
            self.head_box.setValue(wanted[2])

    def restore_figure(self, meta: dict[str, Any], name: str) -> str:
        """An exported figure opened (File -> Open): the form takes its parameters (the preset
        box names the figure), the plot its view choices (log y; a heatmap's run, layer and
        head, applied when the run draws). Returns what was restored, in words; ValueError (a
        ConfigError) when the parameters are bad or a run is active."""
        if self.status in ("running", "starting", "paused", "stepping"):
            raise ValueError("the Training page is training: stop its run first, then open the "
                             "figure again")
        cfg = TrainingConfig.from_dict(meta.get("training"))
        plot = str(meta.get("plot", ""))
        panel = self.panels.get(plot)
        view = meta.get("view") if isinstance(meta.get("view"), dict) else {}
        self.controls.show_source(f"figure {name}", f"The parameters of the figure {name}; Start "
                                  f"trains them again (seed {cfg.seed}: the same curves).", cfg)
        done = panel.apply_view_state(view) if panel is not None else []
        run, layer, head = view.get("run"), view.get("layer"), view.get("head")
        if isinstance(run, str) and isinstance(layer, int) and isinstance(head, int):
            self._wanted_selection = (run, layer, head)
            done.append(f"heatmap of {run}, layer {layer}, head {head}")
        if panel is not None:
            panel.flash()
        title = panel.title.lower() if panel is not None else plot
        rules = ", ".join(cfg.scalings)
        return (f"the {title} figure's training ({cfg.task}, {rules}, {cfg.steps} steps, seed "
                f"{cfg.seed}) is in the Training form: Start trains it again"
                + (f"; {', '.join(done)}" if done else ""))

    def _selection_changed(self) -> None:
        self._update_view()

    def _update_view(self) -> None:
        if self.snapshot is None:
            return
        self.view = TrainingView(self.snapshot, max(self.run_box.currentIndex(), 0),
                                 self.layer_box.value(), self.head_box.value())
        if tuple(self.snapshot.rules) != self._strip_rules:
            self._show_rules(tuple(self.snapshot.rules))

    def _show_rules(self, rules: tuple[str, ...]) -> None:
        self._strip_rules = rules
        theme = current_theme()
        key = ("Gradient norms", GradPanel.STYLE_KEY)
        show_parts(self.rule_strip, rule_parts(rules) + [style_key_part(*key, theme)],
                   rule_parts(rules, short=True) + [style_key_part(*key, theme, short=True)])

    def _show_form_rules(self) -> None:
        """Before a run (nothing drawn yet) the strip names the rules Start will train, each
        in the colour and line its curves will take: it stood empty, two blank lines above
        empty plots, and its legend appeared only with the first step."""
        if self.snapshot is None:
            self._show_rules(tuple(r for r, cb in self.controls.rule_checks.items()
                                   if cb.isChecked()))

    # -- status --------------------------------------------------------------------------------
    def _validate(self) -> None:
        try:
            self.controls.config_from_widgets()
            reason = ""
        except ConfigError as exc:
            reason = f"Start needs {exc.field}: {exc.message}"
        self.buttons["start"].setEnabled(not reason)
        themed_css(self.start_reason, ERROR_TEXT)
        self.start_reason.setText(reason)
        self.start_reason.setToolTip(reason)
        self.start_reason.setVisible(bool(reason))
        self._update_buttons()
        self._show_form_rules()

    def _set_status(self, status: str, message: str = "") -> None:
        self.status = status
        self._update_buttons()
        self._update_status_text(message, error=status == "error")
        self.state_changed.emit(status)

    def _update_buttons(self) -> None:
        s = self.status
        running = s in ("running", "starting", "stepping")
        self.buttons["pause"].setText("Resume" if s == "paused" else "Pause")
        self.buttons["pause"].setEnabled(running or s == "paused")
        self.buttons["step"].setEnabled(s in ("idle", "paused", "error"))
        self.buttons["stop"].setEnabled(running or s == "paused")
        self.buttons["export"].setEnabled(self.snapshot is not None and self.trainer is not None)
        # Resume and Step continue the run with its own config: the form must not pretend otherwise
        self.controls.set_locked(running or s == "paused")

    def _update_status_text(self, message: str = "", error: bool = False) -> None:
        snap = self.snapshot
        red = current_theme().error
        parts = [f"<b>{self.status}</b>"]
        if snap is not None:
            parts.append(f"step {snap.step}/{snap.config.steps} on {snap.device}, "
                         f"{snap.steps_per_s:.1f} steps/s")
            marks = []
            for r, rule in enumerate(snap.rules):
                if snap.diverged_step[r] >= 0:
                    marks.append(f"<span style='color:{red}'>✖ {rule} diverged at step "
                                 f"{int(snap.diverged_step[r])}</span>")
                heads = [(int(layer), int(head)) for layer, head
                         in zip(*(snap.collapse_step[r] >= 0).nonzero(), strict=True)]
                if heads:
                    where = ", ".join(f"L{layer}H{head}" for layer, head in heads[:6])
                    more = f" (+{len(heads) - 6})" if len(heads) > 6 else ""
                    since = int(snap.collapse_step[r][snap.collapse_step[r] >= 0].min())
                    # say what was measured, not a failure: near one-hot attention is often the
                    # learned solution (retrieval attends to one item; a right sqrt run at 99 %
                    # ends there); only with a stalled loss is it the failure. Not in red.
                    marks.append(f"◆ {rule}: low entropy "
                                 f"(H/log n &lt; {snap.config.collapse_threshold:g} since step "
                                 f"{since}) in {where}{more}: one-hot attention, read it with "
                                 "the loss")
            parts += marks
        if message:  # only a failure in red: "exported to ..." must not read as one
            text = html.escape(message)
            parts.append(f"<span style='color:{red}'>{text}</span>" if error else text)
        self.status_label.setText(" · ".join(parts))

    def status_summary(self) -> str:
        """One plain line for the window's status bar while this page is shown."""
        snap = self.snapshot
        text = f"Training: {self.status}"
        if snap is not None:
            text += f" · step {snap.step:,}/{snap.config.steps:,} · {len(snap.rules)} rules"
        return text

    # -- export --------------------------------------------------------------------------------
    def report(self, text: str, error: bool = False) -> None:
        self._update_status_text(text, error=error)

    def export_panel(self, plot_id: str, path: str | Path, kind: str) -> Path:
        """One panel as PNG, SVG or its data as CSV (its ⋯ menu); ExportError says why not."""
        from ui.export.plot_files import export_panel

        panel = self._panel_to_export(plot_id)
        return export_panel(panel, path, kind)

    def _panel_to_export(self, plot_id: str) -> Any:
        """The panel drawn with the latest view; ExportError when there is nothing to draw."""
        from ui.export.plot_files import ExportError

        if self.view is None:
            raise ExportError("Nothing to export yet: start a training run first.")
        if self._viewing_rows() and plot_id in NOT_IN_ROWS:
            raise ExportError(f"{self.panels[plot_id].title}: not in the logged rows shown.")
        panel = self.panels[plot_id]
        panel.refresh(self.view, force=True)
        return panel

    def export_panel_dialog(self, panel: Any, kind: str) -> None:
        """The shared dialog, once the panel has something to draw (else it says why)."""
        from ui.export.plot_files import ExportError

        try:
            self._panel_to_export(panel.plot_id)
        except ExportError as exc:
            self.report(str(exc), True)
            return
        super().export_panel_dialog(panel, kind)

    def export_all(self, parent: str | Path) -> Path:
        """Figures (PNG, SVG, CSV) and the result files into a new time-stamped folder under
        ``parent``; a running training is paused for the copy and resumed afterwards."""
        from engine.training.export import write_training_outputs
        from ui.export.plot_files import ExportError, export_figures, new_export_dir

        if self.trainer is None or self.snapshot is None:
            raise ExportError("Nothing to export yet: start a training run first.")
        was_running = self.status in ("running", "starting")
        if was_running:
            self.pause()
        if not self._trainer_free():
            raise ExportError("The last training step is still finishing: export again in a "
                              "moment.")
        try:
            snap = self.trainer.snapshot()
            view = TrainingView(snap, max(self.run_box.currentIndex(), 0), self.layer_box.value(),
                                self.head_box.value())
            for panel in self.panels.values():
                panel.refresh(view, force=True)
            with new_export_dir(parent) as (stage, out):
                export_figures(self.panels.values(), stage)
                write_training_outputs(stage, self.trainer, snap, {"source": "gui"})
        finally:
            if was_running:
                self.resume()
        return out

    def theme_changed(self, theme: Any) -> None:
        self.controls.apply_theme(theme)
        self._show_rules(self._strip_rules)
        self._update_status_text()
