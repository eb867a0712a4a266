"""Links between the main window's pages: no page imports another, so what one page needs from
another goes through the window. The Experiments page takes its base configuration from the
Training page's form, and opens a finished job's logged curves in the Training page."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QWidget

from engine.errors import ConfigError
from ui.window.part import WindowPart


class PageLinks(WindowPart):
    """Connects a page to the others when the window builds it."""

    def connect_page(self, cls: str, page: QWidget) -> None:
        """The links of a page just built (by its class name); most pages have none."""
        w = self.window
        if cls == "ExperimentsPage" and hasattr(page, "open_job"):
            page.set_base_config_source(self.training_config)
            page.open_job.connect(self.open_experiment_job)
        restore = getattr(page, "restore_settings", None)
        if w._remember and callable(restore):  # the page's remembered choices (save_settings)
            restore(w.settings)

    def training_config(self) -> Any:
        """The Training page's current TrainingConfig (the page is built if needed)."""
        page = self.window.ensure_page("TrainingPage")
        if page is None or not hasattr(page, "current_config"):
            raise ConfigError("training", "the Training page is not available")
        return page.current_config()

    def open_experiment_job(self, result: dict, title: str) -> bool:
        """Show a finished experiment job's logged curves in the Training page."""
        from engine.training.config import TrainingConfig

        w = self.window
        page = w.ensure_page("TrainingPage")
        if page is None or not hasattr(page, "show_metrics"):
            w.message("Open job", "The Training page is not available.", error=True)
            return False
        cfg = TrainingConfig.from_dict(result["config"])
        diverged = {rule: r.get("diverged_step") for rule, r in result.get("rules", {}).items()}
        source = f"experiment job {result['index']}" if "index" in result else title
        if not page.show_metrics(result["rows"], title, cfg, diverged, result.get("seconds", 0.0),
                                 result.get("device", ""), source):
            w.message("Open job", "The Training page is training: stop its run first, then "
                                  "click the job again.", error=True)
            return False
        w.tabs.setCurrentWidget(page)
        return True
