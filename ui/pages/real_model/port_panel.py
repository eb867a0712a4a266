"""The Real model page's Port audit tab: open an ``.onnx`` or ``.gguf`` file (with its source
folder, by default the page's model) and see, layer by layer, the scale the port applies beside
the source's: a table (source, port, ratio, verdict) and the per-layer plot with both series.

The audit runs in its own :class:`ui.worker.Worker` (the engine's generator; never blocks the
window); a bad file is said in the status line."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
)

from engine.errors import ConfigError
from ui.plots.base import PlotPanel
from ui.plots.rule_pens import symbol_style
from ui.worker import Worker

COLUMNS = ("layer", "block", "source ×1/√d_k", "port ×1/√d_k", "ratio", "state", "port verdict")
PORT_FILTER = "Ported models (*.onnx *.gguf);;ONNX (*.onnx);;GGUF (*.gguf)"


def _cell(x: float) -> str:
    return f"{x:#.4g}" if math.isfinite(x) else "–"


class PortPanel(PlotPanel):
    figure_page = "real_model"
    plot_id = "port_audit"
    title = "Port audit"

    def build(self) -> None:
        self.result: Any = None
        self.source_folder: str | None = None  #: the source folder of the last audit
        self.source_text: str | None = None  #: and its text
        self.figure_source = self._figure_source
        #: () -> (source folder or None, text or None): the page's model and text
        self.source: Any = None
        #: () -> GB: the memory budget the source model loads under (the page's field)
        self.budget: Any = None
        self.worker = Worker(self)
        self.worker.finished.connect(self._finished)
        self.worker.error.connect(self._failed)
        self.path_edit = QLineEdit(self)
        self.path_edit.setPlaceholderText("model.onnx or model.gguf")
        self.path_edit.setToolTip("The deployed port to audit (ONNX Runtime graph or GGUF file)")
        browse = QToolButton(self)
        browse.setText("…")
        browse.setToolTip("Choose an .onnx or .gguf file")
        browse.clicked.connect(self._browse)
        self.run_button = QPushButton("Audit port", self)
        self.run_button.setToolTip("Run the port (ONNX Runtime) or read its metadata (GGUF) and "
                                   "compare every layer's scale with the source model's")
        self.run_button.clicked.connect(self.run)
        for i, w in enumerate((self.path_edit, browse, self.run_button)):
            self.header.insertWidget(1 + i, w)
        self.status = QLabel("Open a port of the model (the source is the model chosen on the "
                             "left), then Audit port.")
        self.status.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setMaximumHeight(190)
        outer = self.layout()
        outer.addWidget(self.status)
        outer.addWidget(self.table)
        self.plot = self.add_plot(0, 0, "layer", "fitted scale × √d<sub>k</sub>")
        self.plot.setTitle("scale per layer: source and port")
        self.source_curve = self.plot.plot([], [], name="source model", symbol="o",
                                           pen=pg.mkPen("#1f77b4", width=2),
                                           **symbol_style("#1f77b4", "#1f77b4"))
        self.port_curve = self.plot.plot([], [], name="port", symbol="x", symbolSize=11,
                                         pen=pg.mkPen("#d62728", width=2, style=Qt.PenStyle.DashLine),
                                         **symbol_style("#d62728", "#d62728"))

    def _browse(self) -> None:
        from ui.file_dialogs import open_file

        path = open_file(self, "Open a ported model", PORT_FILTER)
        if path:
            self.path_edit.setText(path)

    def run(self, source_and_text: tuple[str | None, str | None] | None = None) -> bool:
        """Audit the file in the path box beside the page's model and text (or, reopening a
        figure, ``source_and_text``); False, said in the status line, when it cannot start."""
        from engine.probe.port.onnx_audit import PortConfig

        if self.worker.is_running():
            self.status.setText("⚠ an audit is running: wait for it")
            return False
        source, text = source_and_text if source_and_text is not None else (
            self.source() if self.source is not None else (None, None))
        try:
            self.source_folder, self.source_text = source, text
            budget = {} if self.budget is None else {"memory_budget": self.budget()}
            cfg = PortConfig(path=self.path_edit.text().strip(), reference=source, text=text,
                             **budget)
        except ConfigError as exc:
            self.status.setText(f"⚠ {exc.message}")
            return False

        def job(cancelled: Any):
            from engine.probe.port.gguf_audit import audit_gguf
            from engine.probe.port.onnx_audit import audit_onnx

            return (audit_gguf if cfg.kind == "gguf" else audit_onnx)(cfg, cancelled=cancelled)

        self.status.setText("auditing the port…")
        self.run_button.setEnabled(False)
        self.worker.start(job)
        return True

    def _finished(self, _gen: int) -> None:
        latest = self.worker.peek_latest()
        self.run_button.setEnabled(True)
        res = getattr(getattr(latest, "item", None), "result", None)
        if res is None:
            return
        self.show_result(res)

    def _failed(self, _gen: int, exc: object) -> None:
        self.run_button.setEnabled(True)
        msg = exc.message if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
        self.status.setText(f"⚠ {msg}")

    def show_result(self, res: Any) -> None:
        self.result = res
        found = "; ".join(res.findings) if res.findings else (
            "the port scales attention as the source does in every layer"
            if res.source is not None else "no source to compare with")
        self.status.setText(f"{res.kind.upper()} {res.path}: {found}")
        rows = [(str(r.layer), r.block, _cell(r.source_x), _cell(r.port_x), _cell(r.ratio),
                 r.state or "–", r.port_verdict) for r in res.layers]
        rows += [(m.key, "", m.source, m.file, "", "FINDING" if m.finding else "", m.finding)
                 for m in res.metadata]
        self.table.setRowCount(len(rows))
        for i, row in enumerate(rows):
            for j, text in enumerate(row):
                self.table.setItem(i, j, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        self.refresh(res, force=True)

    def data_key(self, state: Any) -> Any:
        return id(state)

    def draw(self, state: Any) -> None:
        series = state.series() if state is not None and state.layers else {}
        for key, curve in (("source", self.source_curve), ("port", self.port_curve)):
            y = np.asarray(series.get(key, []), dtype=float)
            x = np.arange(y.size, dtype=float)
            ok = np.isfinite(y)
            curve.setData(x[ok], y[ok])

    def data_rows(self) -> list[dict[str, Any]]:
        res = self.result
        if res is None:
            return []
        return [{"layer": r.layer, "block": r.block, "source_scale_x_sqrt_dk": r.source_x,
                 "port_scale_x_sqrt_dk": r.port_x, "ratio": r.ratio, "state": r.state,
                 "port_verdict": r.port_verdict} for r in res.layers]

    def _figure_source(self) -> dict[str, Any] | None:
        """The port file, the source folder and the text that drew the figure (the figure's
        metadata, carried by the copy an export draws): File -> Open (``ui.figure_restore``,
        the page's ``restore_figure``) audits them again."""
        if self.result is None:
            return None
        return {"port": {"path": self.result.path, "source": self.source_folder,
                         "text": self.source_text}}

    def restore_figure(self, meta: dict[str, Any]) -> str:
        """An exported figure opened: its port file audited again beside its source folder and
        text (the figure's, not the page's). ValueError, nothing changed, when the file is not
        here or an audit runs."""
        from pathlib import Path

        port = meta["port"]
        path, source = str(port["path"]), port.get("source")
        if self.worker.is_running():
            raise ValueError("a port audit is running: wait for it, then open the figure again")
        if not Path(path).is_file():
            raise ValueError(f"the port file {path} is not here")
        if source is not None and not Path(source).is_dir():
            raise ValueError(f"the source folder {source} is not here")
        old = self.path_edit.text()
        self.path_edit.setText(path)
        if not self.run((source, port.get("text"))):
            self.path_edit.setText(old)
            raise ValueError(self.status.text().lstrip("⚠ "))
        return (f"the port audit of {Path(path).name} beside "
                f"{source or 'no source'}; it runs again")
