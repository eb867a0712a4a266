"""Headless subcommands. Each module has ``add_arguments(parser)`` and ``run(args) -> int``.

No module here imports Qt or torch at import time: ``--help`` must stay instant.
"""

from __future__ import annotations

#: subcommand name -> module path (imported lazily by main.py)
COMMANDS: dict[str, tuple[str, str]] = {
    "simulate": ("ui.cli.simulate", "Monte-Carlo simulation of attention scores over d_k and scaling rules"),
    "inspect": ("ui.cli.inspect", "softmax, Jacobian and entropy of a handful of scores"),
    "train": ("ui.cli.train", "train a tiny attention model under several scaling rules side by side"),
    "experiment": ("ui.cli.experiment", "grids of training runs over seeds, learning rates, "
                   "widths: parallel, reproducible, summarised with uncertainty"),
    "coord-check": ("ui.cli.coord_check", "mean |activation| per layer vs width over the first "
                    "training steps, standard parametrization vs muP"),
    "probe-model": ("ui.cli.probe_model", "per-head attention scores of a real pretrained model "
                    "vs. the i.i.d. theory"),
    "reproduce": ("ui.cli.reproduce", "measure every published number again and compare "
                  "(exit 1 if one drifted)"),
    "audit-model": ("ui.cli.audit_model", "measure the scale each layer and head of a real model "
                    "applies; catch scaling bugs; what another scale would do (exit 3 if some "
                    "attention layers could not be seen, and so were not audited)"),
}
