"""The Real model page's Scale audit tab: which factor each head really applies to q·k (fitted
from its own scores), flagged where it is not 1/√d_k; "break it" plants a bug in a layer and the
audit runs again. For the Training lab's weights, one audit per run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.probe.audit import AuditConfig, AuditResult, AuditSnapshot, audit
from ui.pages.real_model.audit_panels import AuditPanel
from ui.pages.real_model.form import error_text


class AuditTab:
    """Part of :class:`ui.pages.real_model.page.RealModelPage` (a base class of it): the audit
    panel, the audit jobs, the planted bugs (``bugs``) and the audit shown (``audit_result``)."""

    def _build_audit_panel(self) -> AuditPanel:
        """The tab's panel (made the first time the tab is shown: ui.pages.lazy_tabs)."""
        panel = AuditPanel(self)
        panel.run_requested.connect(self.run_audit)
        panel.inject_requested.connect(self.break_layer)
        panel.clear_requested.connect(self.repair)
        panel.run_changed.connect(self.show_run)
        panel.export_requested.connect(self.export_panel_dialog)
        panel.figure_source = lambda: self._figure_source("audit")
        return panel

    def run_audit(self) -> bool:
        """Audit the current text (with the planted bugs) in the worker thread; for the
        Training lab's weights, every run on the lab's own probe examples."""
        if not self._can_start():
            return False
        if self.weights_path is not None:
            return self._audit_runs(self.weights_path)
        try:
            cfg = AuditConfig(text=self.text_edit.toPlainText(), model=self.model_dir,
                              inject=tuple(self.bugs.items()))
        except ConfigError as exc:
            self._message(error_text(exc) if exc.field != "text" else "type a text first",
                          error=True)
            return False

        def job(cancelled: Any):
            yield AuditSnapshot("loading the model (once)…", 0.02)
            loaded = self._loaded(cfg.model)
            yield from audit(cfg, loaded, cancelled)

        self.tabs.setCurrentWidget(self.audit_panel)
        return self._start("audit", job)

    def _audit_runs(self, path: Path) -> bool:
        from engine.probe.training_audit import audit_training

        results: list[AuditResult] = []
        self.run_results = results

        def job(cancelled: Any):
            last = None
            for snap in audit_training(path, cancelled=cancelled):
                if snap.result is not None:
                    results.append(snap.result)  # every run, before the worker keeps the last
                    last = snap.result
                yield AuditSnapshot(snap.stage, snap.fraction)
            yield AuditSnapshot("done", 1.0, done=True, result=last)

        self.tabs.setCurrentWidget(self.audit_panel)
        return self._start("audit", job)

    def show_run(self, index: int) -> None:
        """Show the audit of the Training lab run ``index`` (the panel's run box)."""
        if 0 <= index < len(self.run_results):
            self.audit_result = self.run_results[index]
            self._refresh_audit_views(force=True)

    def break_layer(self, layer: int, kind: str) -> bool:
        """Plant ``kind`` in ``layer`` (replacing a bug already there) and audit again."""
        self.bugs[int(layer)] = kind
        return self.run_audit()

    def repair(self) -> bool:
        self.bugs = {}
        return self.run_audit()

    def _take_audit(self, snap: AuditSnapshot) -> None:
        """A snapshot of the audit with its result (the worker's latest)."""
        if snap.result is not self.audit_result:
            self.analyze_s = time.perf_counter() - self._started
            self.audit_result = snap.result
            self.audit_panel.set_runs([r.run for r in self.run_results
                                       if self.weights_path is not None and r.run])
            self._set_sites(snap.result.n_layers, ("whatif",))
            self._refresh_audit_views(force=True)
            self.export_button.setEnabled(True)

    def _audit_finished_text(self) -> str | None:
        a = self.audit_result
        if a is None:
            return None
        flagged, mism = a.flagged_layers(), a.mismatched_layers()
        return (f"audit of {a.n_tokens} tokens in {self.analyze_s:.2f} s (fit "
                f"{a.fit_s:.2f} s); " + (f"flagged layers {flagged}" if flagged
                                         else "every layer applies 1/√d_k")
                + (f"; layers {mism} differ from what the model declares" if mism
                   else "; every layer as the model declares" if a.sites and not
                   a.unknown_layers() else "")
                + (f"; layers {a.unknown_layers()}: declaration unknown" if a.unknown_layers()
                   else ""))

    def _restore_audit(self, view: dict[str, Any], what: str) -> str:
        """An opened audit figure: its planted bugs, audited again."""
        bugs = view.get("bugs") if isinstance(view.get("bugs"), dict) else {}
        self.bugs = {int(k): v for k, v in bugs.items()  # (a layer: a few digits)
                     if str(k).isdigit() and len(str(k)) <= 4 and isinstance(v, str)}
        self.run_audit()
        planted = ", ".join(f"layer {k}: {v}" for k, v in sorted(self.bugs.items()))
        return f"the scale audit of {what}" + (f", bugs planted ({planted})" if planted else "")
