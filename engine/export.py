"""The files a simulation run leaves behind (the CLI and the GUI's "Export all" write the same):
``summary.csv`` (one row per d_k and rule), ``histograms.npz`` and ``config.json``."""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.io import package_versions, write_csv, write_json, write_npz
from engine.simulate import SimulationSnapshot

#: Columns of summary.csv, in order (a public interface: add, never rename).
SUMMARY_COLUMNS = (
    "d_k", "n_keys", "trials", "scaling",
    "raw_score_mean", "raw_score_mean_se", "raw_score_var", "raw_score_var_se", "raw_score_std",
    "raw_score_var_theory",
    "logit_mean", "logit_mean_se", "logit_var", "logit_var_se", "logit_std", "logit_var_theory",
    "raw_score_row_var", "raw_score_row_var_se", "logit_row_var", "logit_row_var_se",
    "logit_row_std", "logit_row_var_theory",
    "top_weight_mean", "top_weight_se", "saturated_frac", "saturated_frac_se",
    "entropy_mean", "entropy_se", "entropy_norm_mean", "entropy_norm_se",
    "jacobian_fro_mean", "jacobian_fro_se", "jacobian_max_abs_mean", "jacobian_max_abs_se",
    "saturation_threshold", "method", "backend", "device", "dtype",
    "key_mass_mean", "key_mass_se", "sink_weight_mean", "sink_weight_se",
)
#: added to summary.csv when the correlation is not 0 (key 0 is a target key, the "needle")
TARGET_COLUMNS = ("target_weight_mean", "target_weight_se")


def summary_columns(snapshots: Sequence[SimulationSnapshot]) -> tuple[str, ...]:
    with_target = any(s.config.correlation != 0.0 for s in snapshots)
    return SUMMARY_COLUMNS + (TARGET_COLUMNS if with_target else ())


def summary_rows(snapshots: Sequence[SimulationSnapshot]) -> list[dict[str, Any]]:
    return [row for snap in snapshots for row in snap.summary_rows()]


def histogram_arrays(snapshots: Sequence[SimulationSnapshot]) -> dict[str, np.ndarray]:
    """Every histogram of every d_k, named ``d{d_k}_{what}_{edges|counts|outside}`` (with
    several key counts: ``d{d_k}_n{n_keys}_{what}_...``)."""
    arrays: dict[str, np.ndarray] = {}
    several_n = len({s.config.n_keys for s in snapshots}) > 1
    for snap in snapshots:
        c = snap.config
        prefix = f"d{c.d_k}_n{c.n_keys}_" if several_n else f"d{c.d_k}_"
        arrays.update(snap.histogram_arrays(prefix=prefix))
    return arrays


def config_record(snapshots: Sequence[SimulationSnapshot], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``config.json``: every parameter (``config`` reloads with SimulationConfig.from_dict), the
    d_k list, what actually ran (backend, device, method) and package versions."""
    if not snapshots:
        raise ValueError("no results to describe")
    first = snapshots[0]
    record: dict[str, Any] = {
        "app": "attention-scaling-lab",
        "kind": "simulation",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "config": first.config.to_dict(),
        "d_ks": [s.config.d_k for s in snapshots],
        "n_keys": [s.config.n_keys for s in snapshots],
        "resolved": [{"d_k": s.config.d_k, "backend": s.backend, "device": s.device,
                      "dtype": s.config.dtype, "method": s.method, "trials_done": s.trials_done,
                      "complete": s.done, "elapsed_s": round(s.elapsed_s, 6)} for s in snapshots],
        "versions": package_versions(),
    }
    if extra:
        record.update(extra)
    return record


#: the files ``write_simulation_outputs`` writes
SIMULATION_FILES = ("summary.csv", "histograms.npz", "config.json")


def write_simulation_outputs(
    out_dir: str | os.PathLike[str],
    snapshots: Sequence[SimulationSnapshot],
    extra_config: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write summary.csv, histograms.npz and config.json into ``out_dir`` (each atomically)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [
        write_csv(out / "summary.csv", summary_rows(snapshots), summary_columns(snapshots)),
        write_npz(out / "histograms.npz", histogram_arrays(snapshots)),
        write_json(out / "config.json", config_record(snapshots, extra_config)),
    ]
