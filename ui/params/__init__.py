"""The parameter dock: widgets <-> SimulationConfig, both ways (``ParamPanel``)."""

from __future__ import annotations

from ui.params.panel import ParamPanel

__all__ = ["ParamPanel"]
