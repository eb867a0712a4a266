"""The training result files, the same from the CLI and from the GUI's "Export all"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.io import package_versions, write_csv, write_json, write_npz

RESULT_FILES = ("metrics.csv", "metrics_heads.csv", "histograms.npz", "config.json", "weights.pt")


def write_training_outputs(out: Path, trainer: Any, snap: Any, extra: dict[str, Any] | None = None
                           ) -> list[Path]:
    """metrics.csv (means over layers and heads), metrics_heads.csv (per head), histograms.npz
    (every per-head array and the logit histograms), config.json, weights.pt (all atomic)."""
    from engine.training.trainer import HEAD_CSV_COLUMNS

    out = Path(out)
    paths = [write_csv(out / "metrics.csv", snap.metrics_rows(), snap.csv_columns),
             write_csv(out / "metrics_heads.csv", snap.head_rows(), HEAD_CSV_COLUMNS),
             write_npz(out / "histograms.npz", snap.histogram_arrays())]
    meta = {"command": "train", "config": snap.config.to_dict(), "rules": list(snap.rules),
            "head_dim": snap.config.head_dim, "device": snap.device, "steps_done": snap.step,
            "elapsed_s": snap.elapsed_s, "steps_per_s": snap.steps_per_s,
            "diverged_step": {r: int(s) for r, s in zip(snap.rules, snap.diverged_step, strict=True)},
            "weights_file": "weights.pt: torch.load -> {config, step, weights: {rule: state_dict}}",
            "versions": package_versions(), **(extra or {})}
    paths.append(write_json(out / "config.json", meta))
    trainer.save_weights(out / "weights.pt")
    paths.append(out / "weights.pt")
    return paths
