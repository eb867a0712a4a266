"""The Real model page's What-if tab: the model rerun with its attention logits times m (every
layer, or one), its entropy and output change per m, and the heads at the m picked."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from engine.probe.loader import tokenize
from engine.probe.whatif import WhatIfSnapshot, whatif
from ui.pages.real_model.audit_panels import WhatIfPanel, WhatIfView


class WhatIfTab:
    """Part of :class:`ui.pages.real_model.page.RealModelPage` (a base class of it): the what-if
    panel, its sweep job and the multiplier shown (``whatif_index``)."""

    def _build_whatif_panel(self) -> WhatIfPanel:
        """The tab's panel (made the first time the tab is shown: ui.pages.lazy_tabs)."""
        panel = WhatIfPanel(self)
        panel.run_requested.connect(self.run_whatif)
        panel.index_changed.connect(self.set_whatif_index)
        panel.export_requested.connect(self.export_panel_dialog)
        panel.figure_source = lambda: self._figure_source("whatif")
        return panel

    def run_whatif(self, layer: int | None = None) -> bool:
        """Rerun the model with its logits × m (every layer, or ``layer``) in the worker."""
        if not self._can_start():
            return False
        if self.weights_path is not None:
            self._message("the what-if reruns transformers models; Training lab weights are "
                          "audited as saved", error=True)
            return False
        text, model = self.text_edit.toPlainText(), self.model_dir
        bugs = dict(self.bugs)  # the what-if runs on the model as the audit left it
        if not text.strip():
            self._message("type a text first", error=True)
            return False

        def job(cancelled: Any):
            yield WhatIfSnapshot("loading the model (once)…", 0.02)
            loaded = self._loaded(model)
            tok = tokenize(loaded, text)
            yield from whatif(loaded, tok.ids, layer=layer, cancelled=cancelled, bugs=bugs)

        self.tabs.setCurrentWidget(self.whatif_panel)
        return self._start("whatif", job)

    def set_whatif_index(self, index: int) -> None:
        self.whatif_index = int(index)
        self._refresh_audit_views()

    def whatif_view(self) -> WhatIfView | None:
        w = self.whatif_result
        if w is None:
            return None
        std = None
        a = self.audit_result
        if a is not None and a.inject == w.injected:  # the audit measured the model swept
            x = float(np.median(a.layer_scale_x_sqrt_dk()))
            std = 1.0 / x if x > 0 else None
        return WhatIfView(w, min(self.whatif_index, len(w.multipliers) - 1), std)

    def _take_whatif(self, snap: WhatIfSnapshot) -> None:
        """A snapshot of the sweep with its result (the worker's latest)."""
        if snap.result is not self.whatif_result:
            self.analyze_s = time.perf_counter() - self._started
            self.whatif_result = snap.result
            ms = snap.result.multipliers
            self.whatif_index = int(np.argmin(np.abs(np.log(ms))))  # m = 1 first
            wanted, self._wanted_whatif_index = self._wanted_whatif_index, None
            if wanted is not None and 0 <= wanted < len(ms):  # an opened figure's m
                self.whatif_index = wanted
            self._refresh_audit_views(force=True)
            self.export_button.setEnabled(True)

    def _whatif_finished_text(self) -> str | None:
        w = self.whatif_result
        if w is None:
            return None
        return f"what-if: {len(w.multipliers)} reruns of the {w.model_state} in {w.sweep_s:.2f} s"

    def _restore_whatif(self, view: dict[str, Any], what: str) -> str:
        """An opened what-if figure: its layer swept again, at its multiplier."""
        layer = view.get("whatif_layer")
        index = view.get("whatif_index")
        self._wanted_whatif_index = index if isinstance(index, int) else None
        self.run_whatif(layer if isinstance(layer, int) else None)
        where = f"layer {layer}" if isinstance(layer, int) else "every layer"
        return f"the what-if sweep of {what} ({where})"
