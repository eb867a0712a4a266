"""One job of an experiment: train the config's rules side by side and reduce the run to plain
data. ``run_job`` is a top-level function of plain arguments and a plain result, so it pickles to
a worker process or a Dask worker; it never raises (an exception comes back as an error record).

Every training step runs under the one numerics policy (``engine.training.numerics``: single
thread, subnormals flushed), so a job's numbers depend only on its config, not on how many jobs
share the machine.
"""

from __future__ import annotations

import json
import math
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: per-rule results of a job: the summary.csv columns after job, the axes and scaling
RESULT_FIELDS = ("final_loss", "final_accuracy", "probe_accuracy", "steps_to_target",
                 "max_logit_abs", "max_logit_std", "min_entropy_norm", "diverged_step",
                 "collapsed", "seconds", "clip_events")


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def rule_results(snap: Any, target: float, seconds: float) -> dict[str, dict[str, Any]]:
    """Per rule: the final figures, steps to ``target`` training accuracy (None if never), the
    extremes over the run, divergence and collapse. ``seconds`` is the job's wall time (its
    rules train together, step by step)."""
    import numpy as np

    out: dict[str, dict[str, Any]] = {}
    for r, rule in enumerate(snap.rules):
        ok = np.flatnonzero(snap.valid[:, r])
        acc = snap.scalars["accuracy"][ok, r]
        hit = np.flatnonzero(acc >= target)
        div = int(snap.diverged_step[r])
        res: dict[str, Any] = {
            "final_loss": None, "final_accuracy": None, "probe_accuracy": None,
            "steps_to_target": int(snap.log_steps[ok[hit[0]]]) if hit.size else None,
            "max_logit_abs": None, "max_logit_std": None, "min_entropy_norm": None,
            "diverged_step": div if div >= 0 else None,
            "collapsed": bool((snap.collapse_step[r] >= 0).any()),
            "seconds": seconds,
            "clip_events": _clip_events(snap, r, rule),
        }
        if ok.size:
            last = ok[-1]
            if div < 0:  # a diverged run has no final figures (its last valid ones would flatter it)
                res["final_loss"] = _finite(snap.scalars["loss"][last, r])
                res["final_accuracy"] = _finite(snap.scalars["accuracy"][last, r])
                res["probe_accuracy"] = _finite(snap.scalars["probe_accuracy"][last, r])
            res["max_logit_abs"] = _finite(snap.heads["logit_max_abs"][ok, r].max())
            res["max_logit_std"] = _finite(snap.heads["logit_std"][ok, r].max())
            res["min_entropy_norm"] = _finite(snap.heads["entropy_norm"][ok, r].min())
        res.update(length_results(snap, r, ok, div))
        out[rule] = res
    return out


def _clip_events(snap: Any, r: int, rule: str) -> int | None:
    """qkclip: how many (head, update) pairs were clipped over the run; None for other rules."""
    from engine.rules import RULE_REGISTRY

    clipped = getattr(snap, "clipped_per_step", None)
    if not RULE_REGISTRY[rule].qk_clip or clipped is None:
        return None
    return int(clipped[r].sum())


def length_results(snap: Any, r: int, ok: Any, div: int) -> dict[str, float | None]:
    """``accuracy_len{N}`` and ``entropy_norm_len{N}`` of run ``r`` at its last evaluated log (None
    after a divergence, like the final figures; empty without evaluation lengths)."""
    from engine.training.observe import length_columns

    columns = length_columns(snap.config.eval_lengths)
    if not ok.size or div >= 0:
        return dict.fromkeys(columns)
    at = snap.length_logs(r) if hasattr(snap, "length_logs") else ok  # (eval_every: some logs)
    if not at.size:
        return dict.fromkeys(columns)
    return {c: _finite(snap.scalars[c][at[-1], r]) for c in columns}


def write_progress(path: str, step: int, steps: int) -> None:
    """The job's step progress, for the runner to read while the job runs (atomic: a reader
    never sees half a file; a shared filesystem carries it from a Dask worker)."""
    from engine.io import atomic_write_text

    try:
        atomic_write_text(path, json.dumps({"step": int(step), "steps": int(steps)}))
    except OSError:
        pass  # (only a progress bar misses it; the job goes on)


#: the largest progress file read (two integers)
PROGRESS_FILE_MAX = 4096


def read_progress(path: str | os.PathLike[str]) -> float | None:
    """The fraction in [0, 1] a progress file says, None if there is none (or a foreign one:
    read bounded, its two integers checked)."""
    from engine.readers.json_file import read_json
    from engine.readers.schema import Int

    try:
        data = read_json(path, max_bytes=PROGRESS_FILE_MAX, kind="progress file")
        step, steps = Int(lo=0).check(data["step"]), Int(lo=0).check(data["steps"])
    except (ValueError, KeyError, TypeError):  # (FileFormatError and SchemaError are ValueErrors)
        return None
    return min(max(step / max(steps, 1), 0.0), 1.0)


def run_job(config: dict[str, Any], target: float = 0.9,
            cancelled: Callable[[], bool] | None = None,
            progress_path: str | None = None) -> dict[str, Any]:
    """Train ``config`` (a ``TrainingConfig.to_dict()``) and return the JobResult as plain data:
    ``{"config", "target", "rules": {rule: {RESULT_FIELDS, accuracy_len{N}, entropy_norm_len{N}}},
    "rows": [metrics.csv rows], "seconds", "device", "kernels", "fingerprint", "error": None |
    str, "cancelled": bool}``: ``kernels`` are the CPU kernels the job really ran on
    (``engine.cpu_kernels.kernels_in_use``: the pin holds in every worker, or this says where it
    did not) and ``fingerprint`` everything that decides its numbers
    (``engine.experiments.fingerprint``).
    ``cancelled`` (in-process runs only) stops the training between steps; such a result is not a
    finished job. ``progress_path``: a file rewritten (``write_progress``) at each log step and
    removed before the result is returned."""
    start = time.perf_counter()
    result: dict[str, Any] = {"config": config, "target": target, "rules": {}, "rows": [],
                              "seconds": 0.0, "device": "", "kernels": "", "fingerprint": "",
                              "error": None, "cancelled": False}
    try:
        from engine.cpu_kernels import kernels_in_use
        from engine.experiments.fingerprint import job_fingerprint
        from engine.training.config import TrainingConfig
        from engine.training.trainer import Trainer

        cfg = TrainingConfig.from_dict(config)
        trainer = Trainer(cfg)
        result["device"] = trainer.device
        result["kernels"] = kernels_in_use()
        result["fingerprint"] = job_fingerprint(config, trainer.device, result["kernels"])
        for _ in trainer.iterate(cancelled):
            if progress_path is not None:
                write_progress(progress_path, trainer.step, cfg.steps)
        snap = trainer.snapshot()
        if not snap.done:
            result["cancelled"] = True
        seconds = time.perf_counter() - start
        result["rules"] = rule_results(snap, target, seconds)
        result["rows"] = snap.metrics_rows()
        result["seconds"] = seconds
    except Exception as exc:  # a job's failure is recorded; the grid goes on
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc(limit=8)
        result["seconds"] = time.perf_counter() - start
    finally:
        if progress_path is not None:
            Path(progress_path).unlink(missing_ok=True)
    return result


def metrics_csv_columns(eval_lengths: tuple[int, ...] = ()) -> tuple[str, ...]:
    """The training metrics.csv columns, then those of the evaluation lengths."""
    from engine.training.observe import CSV_COLUMNS, length_columns

    return CSV_COLUMNS + length_columns(eval_lengths)
