"""Sessions: the parameters of the app saved to a JSON file and opened again.

A session holds the Simulation parameters and sweep axis, and the parameters of the pages that
have a form of their own (Training, Real model). A page that was not built yet gets its part when
it is built. Opening also accepts an exported config.json or an exported figure (PNG/SVG carry
their parameters). A bad file is refused before anything changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QFileDialog

from engine.config import SimulationConfig
from engine.errors import ConfigError, FileFormatError, quote
from engine.io import write_json
from ui.session_file import check_real_model_part, check_training_part, read_session_file
from ui.window.part import WindowPart


@dataclass(frozen=True)
class PageParams:
    """How a page's parameters go into a session and come back: ``key`` in the file, the page's
    class name, ``check`` (raises ConfigError/ValueError on a bad value, before anything changes)."""

    key: str
    page: str
    check: Callable[[Any], None]


#: the pages whose parameters a session carries (each page has ``session_params()`` and
#: ``apply_session_params(data) -> bool``, False while it is busy and cannot take them yet)
PAGE_PARAMS = (
    PageParams("training", "TrainingPage", check_training_part),
    PageParams("real_model", "RealModelPage", check_real_model_part),
)


class Sessions(WindowPart):
    """Saves and opens the main window's sessions; holds a page's part until that page exists."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        #: a session's parameters for pages not built yet (or busy), by session key
        self.pending: dict[str, Any] = {}

    def save(self, path: str | Path) -> Path:
        """The Simulation parameters, and each page's when that page was opened (or a session
        brought them in). An invalid page form is left out; the rest is still saved."""
        w = self.window
        cfg = w.params.config_from_widgets()
        data: dict[str, Any] = {"app": "attention-scaling-lab", "kind": "session",
                                "config": cfg.to_dict(), "sweep_axis": w.sweep_axis}
        for spec in PAGE_PARAMS:
            page = w.pages.get(spec.page)
            if page is not None and hasattr(page, "session_params"):
                try:
                    data[spec.key] = page.session_params()
                except ConfigError:
                    pass  # an invalid form is not saved; the simulation still is
            elif spec.key in self.pending:
                data[spec.key] = self.pending[spec.key]
        return write_json(path, data)

    def open(self, path: str | Path) -> SimulationConfig | None:
        """Load a session or an exported config.json (the config is under "config") and rerun;
        an exported figure (PNG or SVG) reopens into its page (ui.figure_restore: None for a
        figure of another page than Simulation; a figure from before figures named their page
        opens as the session it carries)."""
        w = self.window
        if Path(path).suffix.lower() in (".png", ".svg"):
            from ui.figure_restore import open_figure, page_figure

            meta = page_figure(path)  # a figure that names its page; None: a session in a figure
            if meta is not None:
                return open_figure(w, path, meta)
        data = read_session_file(path, w.params.widget_values)  # every part checked
        cfg = SimulationConfig.from_dict(data["config"])
        parts = {spec.key: data[spec.key] for spec in PAGE_PARAMS if data.get(spec.key) is not None}
        for spec in PAGE_PARAMS:  # refuse a bad file before changing anything
            if spec.key in parts:
                spec.check(parts[spec.key])
        w.params.set_config(cfg)
        if data.get("sweep_axis") in ("d_k", "n_keys"):  # sessions before the n sweep have none
            w.set_sweep_axis(data["sweep_axis"], rerun=False)
        self.pending.update({k: v if not isinstance(v, dict) else dict(v) for k, v in parts.items()})
        self.apply_pending()
        w.rerun()
        return cfg

    def apply_pending(self) -> None:
        """Put a session's page parameters into those pages (once they exist and are idle)."""
        for spec in PAGE_PARAMS:
            page = self.window.pages.get(spec.page)
            if spec.key not in self.pending or page is None:
                continue
            apply = getattr(page, "apply_session_params", None)
            if callable(apply) and apply(self.pending[spec.key]):
                del self.pending[spec.key]

    def save_dialog(self) -> None:
        w = self.window
        path, _ = QFileDialog.getSaveFileName(w, "Save session",
                                              str(w.window_settings.last_dir() / "session.json"),
                                              "Session (*.json)")
        if not path:
            return
        try:
            self.save(path)
            w.window_settings.remember_dir(Path(path).parent)
            w.statusBar().showMessage(f"saved {path}", 5000)
        except ConfigError as exc:
            w.message("Save session", f"The parameters are invalid: {exc}", error=True)
        except OSError as exc:
            w.message("Save session", f"Cannot write {path}: {exc.strerror or exc}", error=True)

    def open_dialog(self) -> None:
        w = self.window
        path, _ = QFileDialog.getOpenFileName(
            w, "Open a session, config.json or exported figure", str(w.window_settings.last_dir()),
            "Session, config or figure (*.json *.png *.svg);;JSON (*.json);;Figure (*.png *.svg)")
        if not path:
            return
        try:
            self.open(path)
            w.window_settings.remember_dir(Path(path).parent)
        except FileFormatError as exc:  # the reader's one line: FILE: field path: problem
            self.window.message("Open session", f"Cannot open {exc}", error=True)
        except (OSError, ValueError) as exc:  # ConfigError is a ValueError
            self.window.message("Open session", f"Cannot open {path}: {quote(str(exc), 300)}",
                                error=True)
