"""Per-score table (score, scaled score, p_i, p_i(1 - p_i)) as a cheap model over the result.

``Qt.UserRole`` returns the raw float, so tests and copy-paste never go through the display text.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

from engine.inspect import InspectResult
from ui.pages.inspector.fmt import sig

COLUMNS = (
    ("score", "score s_i", "scores"),
    ("scaled", "s_i / scale", "scaled"),
    ("weight", "p_i", "weights"),
    ("p_one_minus_p", "p_i (1 − p_i)", "p_one_minus_p"),
)

_Index = QModelIndex | QPersistentModelIndex


class EntriesModel(QAbstractTableModel):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._result: InspectResult | None = None

    def set_result(self, result: InspectResult) -> None:
        self.beginResetModel()
        self._result = result
        self.endResetModel()

    def column(self, key: str) -> list[float]:
        """A whole column as floats (e.g. ``column("weight")``)."""
        if self._result is None:
            return []
        return [float(v) for v in self._values(key)]

    def _values(self, key: str):
        """A column's array: "scaled" is scores / scale before any soft-cap, as its header says
        (the result's ``scaled`` holds the capped logits, 4.98 for 16 at c = 5)."""
        r = self._result
        if key == "scaled":
            if r.softcap is not None:  # undo c·tanh(z/c) exactly: z from the scores themselves
                return r.scores / r.scale
            return r.scaled
        return getattr(r, {k: a for k, _, a in COLUMNS}[key])

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if self._result is None or parent.isValid() else int(self._result.scores.size)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if self._result is None or not index.isValid():
            return None
        value = float(self._values(COLUMNS[index.column()][0])[index.row()])
        if role == Qt.ItemDataRole.DisplayRole:
            return sig(value)
        if role == Qt.ItemDataRole.UserRole:
            return value
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section][1]
        return str(section)
