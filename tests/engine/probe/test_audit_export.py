"""audit.csv, layers.csv, whatif.csv, backends.csv and audit.json from hand-made AuditResults (no
model): every written file is compared with its content written out by hand."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from engine.probe.audit import AuditResult, SiteAudit
from engine.probe.audit_export import (
    AUDIT_COLUMNS,
    AUDIT_FILES,
    LAYER_COLUMNS,
    audit_rows,
    layer_rows,
    write_audit_outputs,
)
from engine.probe.scale_fit import ScaleFit

INF = math.inf


def _fit(scale, tol_log, *, misfit=None, resid=None, probe=None, ident=None, wsum=None,
         rows=3) -> ScaleFit:
    h = len(scale)
    return ScaleFit(scale=np.array(scale, dtype=float),
                    misfit=np.array(misfit or [1e-4] * h), curvature=np.ones(h),
                    tol_log=np.array(tol_log, dtype=float),
                    residual_max_abs=np.array(resid or [0.0] * h),
                    residual_probe=np.array(probe or [[0.0, 0.0]] * h),
                    worse_probe=np.zeros((h, 2)),
                    identifiable=np.array(ident or [True] * h),
                    weight_sum=np.array(wsum or [1.0] * h), weight_sum_tol=1e-6, rows=rows)


def _sites() -> tuple[SiteAudit, ...]:
    return (
        SiteAudit(name="enc.0.attn", block="encoder", features=("qk_norm", "rope"),
                  kv_head=np.array([0, 0]), declared_source="config: scaling",
                  softcap_declared=50.0, softcap=np.array([49.0, INF]), softcap_reach=40.0,
                  matches_declared=True, mismatch=""),
        SiteAudit(name="enc.1.attn", block="decoder", features=(), kv_head=np.array([3]),
                  declared_source="code", softcap_declared=None, softcap=None,
                  softcap_reach=None, matches_declared=False, mismatch="scale 0.5 vs 1",
                  declared_known=False, declared_note="a factor the config does not name",
                  shares_weights_with=0),
    )


def audit_result(**changes) -> AuditResult:
    """Layer 0: d_k 4, 2 heads; layer 1: d_k 16, 1 head (the widths differ per layer)."""
    fields = dict(
        model_name="tiny", model_type="bert", run=None, n_layers=2, n_heads=2, d_k=4,
        d_model=8, causal=False, n_tokens=3, tokens=("a", "b", "c"), inject={1: "twice"},
        declared_scale=np.array([0.5, np.nan]),
        head_fits=[_fit([0.5, 0.25], [math.log(1.1), INF], misfit=[1e-3, 2e-3],
                        resid=[0.01, 0.02], probe=[[0.1, 0.2], [0.3, 0.4]], ident=[True, False],
                        wsum=[1.0, 0.999], rows=3),
                   _fit([0.125], [0.0], misfit=[3e-3], resid=[0.03], probe=[[0.5, 0.6]],
                        wsum=[0.5], rows=2)],
        layer_fits=[_fit([0.4], [math.log(1.5)]), _fit([0.25], [INF])],
        head_verdicts=[["1/sqrt(d_k)", "other: s * sqrt(d_k) = 0.5"], ["scaled twice"]],
        layer_verdicts=["other: s * sqrt(d_k) = 0.8", "1/sqrt(d_k)"],
        note="a note", forward_s=0.5, fit_s=0.25, sites=_sites(),
        not_seen=(SimpleNamespace(name="x.attn", kind="FancyAttention", why="never called"),),
        weights_text="12 of 12 tensors from the folder", site_d_k=(4, 16), site_heads=(2, 1))
    fields.update(changes)
    return AuditResult(**fields)


#: audit.csv of audit_result(): s * sqrt(d_k) is 0.5 * 2, 0.25 * 2 and 0.125 * 4; a band
#: exp(log 1.1) - 1 = 0.1, an infinite one empty; the declared NaN and a cap at inf empty
EXPECTED_AUDIT = [
    ["layer", "head", "d_k", "fitted_scale", "scale_x_sqrt_dk", "residual_max_abs",
     "identifiable", "verdict", "tolerance_rel", "residual_at_0.9s", "residual_at_1.1s",
     "misfit_kl", "weight_sum", "n_rows", "block", "kv_head", "declared_scale", "softcap",
     "features"],
    ["0", "0", "4", "0.5", "1.0", "0.01", "True", "1/sqrt(d_k)", "0.1", "0.1", "0.2", "0.001",
     "1.0", "3", "encoder", "0", "0.5", "49.0", "qk_norm; rope"],
    ["0", "1", "4", "0.25", "0.5", "0.02", "False", "other: s * sqrt(d_k) = 0.5", "", "0.3",
     "0.4", "0.002", "0.999", "3", "encoder", "0", "0.5", "", "qk_norm; rope"],
    ["1", "0", "16", "0.125", "0.5", "0.03", "True", "scaled twice", "0.0", "0.5", "0.6",
     "0.003", "0.5", "2", "decoder", "3", "", "", ""],
]

#: layers.csv: layer 0's two heads read 'other' (= 0.8 and = 0.5 are one kind) and '1/sqrt',
#: so one agrees; layer 1's one head reads 'scaled twice' against the layer's '1/sqrt(d_k)'
EXPECTED_LAYERS = [
    list(LAYER_COLUMNS),
    ["0", "other: s * sqrt(d_k) = 0.8", "True", "0.4", "0.8", "0.5", "1", "2", "4", "8", "",
     "0.5", "encoder", "enc.0.attn", "qk_norm; rope", "config: scaling", "True", "", "50.0",
     "49.0", "True", "", ""],
    ["1", "1/sqrt(d_k)", "False", "0.25", "1.0", "", "0", "1", "16", "8", "twice", "",
     "decoder", "enc.1.attn", "", "code", "False", "scale 0.5 vs 1", "", "", "False",
     "a factor the config does not name", "0"],
]


def _csv(path: Path) -> list[list[str]]:
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def _same(got: list[list[str]], want: list[list[str]]) -> None:
    """Cells equal as text; numbers (a tolerance from expm1 of a log) to 1e-12 relative."""
    assert got[0] == want[0] and len(got) == len(want)
    for g, w in zip(got[1:], want[1:]):
        assert len(g) == len(w), (g, w)
        for col, a, b in zip(got[0], g, w):
            try:
                fa, fb = float(a), float(b)
            except ValueError:
                assert a == b, (col, a, b)
            else:
                assert fa == pytest.approx(fb, rel=1e-12) and a.isdigit() == b.isdigit(), \
                    (col, a, b)


def test_audit_and_layers_csv_are_the_hand_written_tables(tmp_path: Path) -> None:
    paths = write_audit_outputs(tmp_path / "out", [audit_result()])
    assert paths == [tmp_path / "out" / "audit.csv", tmp_path / "out" / "layers.csv",
                     tmp_path / "out" / "audit.json"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == \
        ["audit.csv", "audit.json", "layers.csv"]
    _same(_csv(paths[0]), EXPECTED_AUDIT)
    _same(_csv(paths[1]), EXPECTED_LAYERS)
    assert AUDIT_COLUMNS == tuple(EXPECTED_AUDIT[0])


def test_the_rows_keep_their_python_types() -> None:
    rows = audit_rows(audit_result())
    assert [type(rows[1][c]) for c in ("layer", "head", "d_k", "identifiable", "n_rows",
                                      "kv_head", "tolerance_rel", "softcap")] == \
        [int, int, int, bool, int, int, str, str]
    assert all(type(rows[0][c]) is float for c in ("fitted_scale", "scale_x_sqrt_dk",
                                                   "misfit_kl", "declared_scale", "softcap"))
    lrow = layer_rows(audit_result())[0]
    assert lrow["flagged"] is True and lrow["matches_declared"] is True
    assert type(lrow["softcap_declared"]) is float and type(lrow["softcap"]) is float


def test_a_layer_whose_caps_are_all_unreached_has_no_cap() -> None:
    s0, s1 = _sites()
    sites = (replace(s0, softcap=np.array([INF, INF])), replace(s1, softcap=np.array([7.0])))
    rows = layer_rows(audit_result(sites=sites))
    assert rows[0]["softcap"] == "" and rows[0]["softcap_declared"] == 50.0
    assert rows[1]["softcap"] == 7.0
    # the median of the finite caps, not their mean or first: 1, 2, 10 -> 2
    sites = (replace(s0, softcap=np.array([10.0, 1.0])), replace(s1, softcap=np.array([2.0])))
    heads3 = audit_result(sites=sites)
    assert layer_rows(heads3)[0]["softcap"] == 5.5  # two caps: their middle
    s_three = replace(s0, softcap=np.array([10.0, INF, 1.0, 2.0]), kv_head=np.zeros(4, int))
    assert layer_rows(audit_result(sites=(s_three, s1)))[0]["softcap"] == 2.0


def test_a_training_lab_audit_leads_with_the_run_and_has_no_site_cells(tmp_path: Path) -> None:
    runs = [audit_result(run=r, sites=(), not_seen=(), inject={}, forward_s=f, fit_s=t,
                         site_d_k=(), site_heads=(), declared_scale=np.array([0.5, 0.25]),
                         head_fits=[_fit([0.5, 0.25], [0.0, 0.0])] * 2,
                         head_verdicts=[["1/sqrt(d_k)"] * 2] * 2,
                         layer_verdicts=["1/sqrt(d_k)"] * 2)
            for r, f, t in (("dk", 1.0, 0.5), ("none", 2.0, 0.25))]
    paths = write_audit_outputs(tmp_path, runs)
    audit = _csv(paths[0])
    assert audit[0] == ["run", *AUDIT_COLUMNS] and len(audit) == 1 + 2 * 2 * 2
    assert [r[0] for r in audit[1:]] == ["dk"] * 4 + ["none"] * 4
    cols = audit[0]
    for c in ("block", "kv_head", "softcap", "features"):
        assert {r[cols.index(c)] for r in audit[1:]} == {""}, c
    assert [r[cols.index("scale_x_sqrt_dk")] for r in audit[1:3]] == ["1.0", "0.5"]
    layers = _csv(paths[1])
    assert layers[0] == ["run", *LAYER_COLUMNS] and [r[0] for r in layers[1:]] == \
        ["dk", "dk", "none", "none"]
    cols = layers[0]
    for c in ("block", "name", "features", "declared_source", "matches_declared", "mismatch",
              "softcap_declared", "softcap", "declared_known", "declared_note",
              "shares_weights_with", "injected"):
        assert {r[cols.index(c)] for r in layers[1:]} == {""}, c
    assert [r[cols.index("declared_scale")] for r in layers[1:3]] == ["0.5", "0.25"]
    meta = json.loads(paths[2].read_text(encoding="utf-8"))
    assert meta["runs"] == ["dk", "none"] and meta["model"]["d_k"] == 4
    assert "layer_d_k" not in meta["model"] and "layer_heads" not in meta["model"]
    assert meta["timings_s"] == {"forward": 3.0, "fit": 0.75}
    assert meta["mismatched_layers"] == [] and meta["attention_layers"] == 2


class _Whatif:
    layer = None
    model_state = "as loaded"
    sweep_s = 0.75

    def rows(self):
        return [{"m": 0.5, "ppl": 9.0}, {"m": 2.0, "ppl": 3.5}]

    def columns(self):
        return ("m", "ppl")


class _Backends:
    compared = ("sdpa", "flex")
    unavailable = {"flash": "not installed"}
    tolerance = 0.001

    def __init__(self) -> None:
        self.blocks: list = []

    def rows(self, blocks):
        self.blocks.append(blocks)
        return [{"backend": "sdpa", "layer": 1, "block": blocks[1], "output_rel_diff": 0.2,
                 "input_rel_diff": 0.0, "tolerance_rel": 0.001, "flagged": True}]

    def flagged(self):
        return [SimpleNamespace(backend="sdpa", site=1, output_rel_diff=0.2)]


def test_audit_json_and_the_optional_tables(tmp_path: Path) -> None:
    backends = _Backends()
    paths = write_audit_outputs(tmp_path, [audit_result()], whatif=_Whatif(),
                                extra={"command_line": "audit-model x"}, backends=backends)
    assert [p.name for p in paths] == ["audit.csv", "layers.csv", "whatif.csv", "backends.csv",
                                       "audit.json"]
    assert set(AUDIT_FILES) == {p.name for p in paths}
    assert (tmp_path / "whatif.csv").read_text() == "m,ppl\n0.5,9.0\n2.0,3.5\n"
    assert backends.blocks == [["encoder", "decoder"]]
    assert (tmp_path / "backends.csv").read_text() == (
        "backend,layer,block,output_rel_diff,input_rel_diff,tolerance_rel,flagged\n"
        "sdpa,1,decoder,0.2,0.0,0.001,True\n")
    meta = json.loads((tmp_path / "audit.json").read_text(encoding="utf-8"))
    method = meta.pop("method")
    assert method.startswith("per head, s minimizing mean KL(P || softmax(s q.k + mask))")
    assert meta == {
        "command": "audit-model",
        "model": {"name": "tiny", "type": "bert", "layers": 2, "heads": 2, "d_k": 4,
                  "d_model": 8, "causal": False, "layer_d_k": [4, 16], "layer_heads": [2, 1]},
        "runs": [],
        "n_tokens": 3,
        "tokens": ["a", "b", "c"],
        "whatif_layer": "all",
        "whatif_model": "as loaded",
        "backends": {"compared": ["sdpa", "flex"], "unavailable": {"flash": "not installed"},
                     "tolerance_rel_floor": 0.001,
                     "flagged": [{"backend": "sdpa", "layer": 1, "output_rel_diff": 0.2}]},
        "mismatched_layers": [1],
        "declaration_unknown_layers": [1],
        "attention_layers": 3,
        "weights": "12 of 12 tensors from the folder",
        "not_seen": [{"name": "x.attn", "class": "FancyAttention", "why": "never called"}],
        "inject": {"1": "twice"},
        "note": "a note",
        "timings_s": {"forward": 0.5, "fit": 0.25, "whatif": 0.75},
        "command_line": "audit-model x",
    }


def test_a_whatif_of_one_layer_is_named_by_its_number(tmp_path: Path) -> None:
    whatif = _Whatif()
    whatif.layer = 0
    write_audit_outputs(tmp_path, [audit_result()], whatif=whatif)
    meta = json.loads((tmp_path / "audit.json").read_text(encoding="utf-8"))
    assert meta["whatif_layer"] == 0 and "backends" not in meta
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.csv", "audit.json",
                                                          "layers.csv", "whatif.csv"]


def test_a_failed_write_leaves_the_old_files(tmp_path: Path) -> None:
    """A NaN figure is refused by the CSV writer: no new file, the old audit.csv kept."""
    (tmp_path / "audit.csv").write_text("old\n")
    bad = audit_result(head_fits=[_fit([0.5, np.nan], [0.0, 0.0]), _fit([0.125], [0.0])])
    with pytest.raises(ValueError, match="non-finite"):
        write_audit_outputs(tmp_path, [bad])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.csv"]
    assert (tmp_path / "audit.csv").read_text() == "old\n"


def test_every_row_holds_exactly_its_files_columns() -> None:
    """A cell under a misspelt key, or a 'run' of None, would be dropped by the CSV writer
    unnoticed: the rows carry the columns and nothing else, empty cells as ''."""
    for res, lead in ((audit_result(), ()), (audit_result(run="dk", sites=(), not_seen=()),
                                             ("run",))):
        for row in audit_rows(res):
            assert list(row) == [*lead, *AUDIT_COLUMNS[:14], "block", "features", "kv_head",
                                 "declared_scale", "softcap"]
            assert set(row) == {*lead, *AUDIT_COLUMNS}
        for row in layer_rows(res):
            assert set(row) == {*lead, *LAYER_COLUMNS}
    lrows = layer_rows(audit_result(run="dk", sites=(), not_seen=(), inject={}))
    assert {k: v for k, v in lrows[0].items() if v == ""} == dict.fromkeys(
        ("injected", "block", "features", "name", "declared_source", "matches_declared",
         "mismatch", "softcap_declared", "softcap", "declared_known", "declared_note",
         "shares_weights_with"), "")
    assert all(r[c] == "" for r in audit_rows(audit_result(run="dk", sites=()))
               for c in ("block", "features", "kv_head", "softcap"))
    site_rows = layer_rows(audit_result())
    assert site_rows[0]["shares_weights_with"] == "" and site_rows[1]["shares_weights_with"] == 0
    assert site_rows[0]["injected"] == "" and site_rows[1]["injected"] == "twice"


def test_audit_json_says_the_method_and_the_files_are_staged_hidden(tmp_path: Path,
                                                                     folder_at_write) -> None:
    import engine.probe.audit_export as audit_export

    seen = folder_at_write(audit_export, "write_json", tmp_path)
    write_audit_outputs(tmp_path, [audit_result()])
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0][0].startswith(".audit-model-"), seen
    meta = json.loads((tmp_path / "audit.json").read_text(encoding="utf-8"))
    assert meta["method"] == (
        "per head, s minimizing mean KL(P || softmax(s q.k + mask)); a known scale is accepted "
        "when its KL exceeds the minimum by at most the misfit (or float32 rounding), "
        "tolerance_rel is that band")
