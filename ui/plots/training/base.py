"""The base of the Training page's panels: what they draw (:class:`TrainingView`) and when they
redraw (the snapshot, and for heatmaps the selected run/layer/head)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ui.plots.base import PlotPanel
from ui.plots.empty_hint import EmptyHint


@dataclass(frozen=True)
class TrainingView:
    """What the panels draw: the snapshot and the heatmaps' selection."""

    snapshot: Any  #: TrainingSnapshot or None
    run: int = 0
    layer: int = 0
    head: int = 0


class TrainingPanel(PlotPanel):
    """A panel whose picture depends on the snapshot (and, for heatmaps, on the selection)."""

    uses_selection = False
    figure_page = "training"
    #: what an empty panel says will appear (before Start, after Reset)
    empty_text = ""

    @classmethod
    def has_figure(cls, snap: Any) -> bool:
        """Whether ``train --figures`` writes this plot for ``snap`` (a panel that would show
        nothing worth a file says no)."""
        return True

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.glw.setMinimumSize(160, 130)  # four columns, three rows fit beside the form at 1280x720
        self.hint = EmptyHint(self.plot_items()[0])
        self.show_empty()

    def show_empty(self, why: str | None = None) -> None:
        """What will appear and how; ``why``: why the panel stays empty instead (a run shown from
        logged rows that do not hold what it draws)."""
        self._empty_why = why
        text = self.empty_text or f"{self.title}\nof each checked rule"
        when = why or "appears after Start or Step"
        # (the header names the plot: in a short plot the hint says only when it fills)
        self.hint.show(f"{text}\n{when}", self.theme.foreground, when, why or "Start or Step")

    def theme_changed(self, theme: Any) -> None:
        hint = getattr(self, "hint", None)
        if hint is not None and hint.visible:
            self.show_empty(getattr(self, "_empty_why", None))

    def refresh(self, state: Any, force: bool = False) -> bool:
        drawn = super().refresh(state, force)
        if drawn and self.hint.visible:
            self.hint.hide()
        return drawn

    def data_key(self, state: Any) -> Any:
        snap = getattr(state, "snapshot", None)
        if snap is None:
            return None
        sel = (state.run, state.layer, state.head) if self.uses_selection else None
        return (id(snap), sel, self.extra_key())

    def clear_data(self) -> None:
        super().clear_data()
        self.show_empty()
        if self.uses_selection:  # its title named the run, layer, head (and step) of the old data
            for plot in self.plot_items():
                plot.titleLabel.setText("")
                plot.setTitle(None)

    def extra_key(self) -> Any:
        return None

    def view_state(self) -> dict[str, Any]:
        """The view choices, and for a heatmap the run (its rule), layer and head it shows."""
        state = super().view_state()
        view, snap = self._state, getattr(self._state, "snapshot", None)
        if self.uses_selection and snap is not None and 0 <= view.run < len(snap.rules):
            state.update(run=snap.rules[view.run], layer=int(view.layer), head=int(view.head))
        return state
