"""Published numbers, checked: the claims file, the judging rule, and that the checks have teeth."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from engine.claims import Claim, check_claims, judge, load_claims

ROOT = Path(__file__).resolve().parents[2]


def _claim(published: str, **kw) -> Claim:
    base = dict(id="x", where="README.md", text="t", kind="inspect",
                params={"scores": [8, 0, -8]}, measure={"value": "jacobian_max_abs"})
    return Claim(**{**base, **kw, "published": published})


@pytest.mark.slow
def test_every_fast_claim_holds_now() -> None:
    """CI's guard: the README, presets, tour and science notes agree with the code."""
    checks = list(check_claims(load_claims(), fast=True))
    failed = [c.row() for c in checks if c.status == "FAIL"]
    assert not failed, "\n".join(f"{r['id']}: published {r['published']}, measured {r['measured']}"
                                 for r in failed)
    assert sum(c.status == "ok" for c in checks) >= 50


def test_every_claim_is_printed_where_it_says() -> None:
    for claim in load_claims():
        source = (ROOT / claim.where.split(",")[0]).read_text(encoding="utf-8")
        if claim.published[:1] in "<>":
            continue  # a bound reads a sentence ("most rows"), not a printed number
        assert (claim.printed or claim.published) in source, (claim.id, claim.where)
        if claim.published_se:  # "0.58 ± 0.13" (README) or "0.58 +/- 0.13" (a JSON string)
            flat = " ".join(source.split())  # (a line break inside "0.78 ±\n  0.16")
            assert any(f"{claim.published} {pm} {claim.published_se}" in flat
                       for pm in ("±", "+/-")), (claim.id, claim.published_se)


def test_moving_the_saturation_cut_fails_the_readme_rows() -> None:
    """0.99 -> 0.95 turns the README's 0.8 / 36 / 73 % into 3.4 / 52 / 82 %: caught."""
    claims = [c for c in load_claims() if c.id.startswith("ref.none_saturated.")]
    assert len(claims) == 3
    moved = [dataclasses.replace(c, params={**c.params, "saturation_threshold": 0.95})
             for c in claims]
    assert [c.status for c in check_claims(moved)] == ["FAIL"] * 3
    assert [c.status for c in check_claims(claims)] == ["ok"] * 3


def test_rounding_and_standard_errors_set_the_tolerance() -> None:
    c = _claim("0.526")
    assert judge(c, 0.5264, 0.0).status == "ok"
    assert judge(c, 0.5266, 0.0).status == "FAIL"  # beyond half a unit of the last digit
    assert judge(c, 0.5266, 0.001).status == "ok"  # within 3 SE of Monte-Carlo noise
    assert judge(c, 0.5266, 0.001).tolerance == pytest.approx(0.0005 + 0.003)
    assert judge(_claim("3.35e-4"), 3.3549e-4, 0.0).status == "ok"
    assert judge(_claim("3.35e-4"), 3.356e-4, 0.0).status == "FAIL"
    assert judge(_claim("745"), 745.49, 0.0).status == "ok"
    assert judge(_claim("2,460"), 2460.4, 0.0).status == "ok"  # thousands separators as printed
    assert judge(_claim("2,460"), 2461.0, 0.0).status == "FAIL"
    with pytest.raises(ValueError):
        judge(_claim("1,2"), 1.2, 0.0)
    assert judge(_claim(">0.5"), 0.51, 0.0).status == "ok"
    assert judge(_claim(">0.5"), 0.5, 0.0).status == "FAIL"
    assert judge(_claim("<0.02"), 0.03, 0.0).status == "FAIL"
    assert judge(c, math.nan, 0.0).status == "FAIL"


def test_slow_claims_are_skipped_under_fast() -> None:
    slow = _claim("1", kind="experiment", params={"experiment": "seeds"},
                  measure={"stat": "n", "rule": "sqrt"}, slow=True)
    (check,) = check_claims([slow], fast=True)
    assert check.status == "skipped" and check.measured is None


@pytest.mark.parametrize(("content", "where", "says"), [
    ("{", "", "not valid JSON"),
    ('{"claims": []}', "claims", "at least 1"),
    ('{"claims": [{"id": "a"}]}', "claims['a'].kind", "required, but missing"),
    ('{"claims": [{"id": "a", "where": "w", "text": "t", "kind": "guess", "params": {}, '
     '"measure": {}, "published": "1"}]}', "claims['a'].kind", "must be one of"),
    ('{"claims": [{"id": "a", "where": "w", "text": "t", "kind": "inspect", "params": {}, '
     '"measure": {}, "published": "about 1"}]}', "claims['a'].published", "published must be"),
    ('{"claims": [{"id": "a", "where": "w", "text": "t", "kind": "inspect", "params": {}, '
     '"measure": {}, "published": "1", "colour": "red"}]}', "claims['a'].colour", "unknown field"),
    ('{"claims": [{"id": "a", "where": "w", "text": "t", "kind": "inspect", "params": '
     '{"scores": [1, "x"]}, "measure": {"value": "entropy"}, "published": "1"}]}',
     "claims['a'].params.scores[1]", "must be a number"),
    ('{"claims": [{"id": "a", "where": "w", "text": "t", "kind": "simulate", "params": '
     '{"scalings": 5}, "measure": {"column": "x"}, "published": "1"}]}',
     "claims['a'].params.scalings", "must be a list of names"),
    ('{"claims": [{"id": "a", "where": "w", "text": "t", "kind": "experiment", "params": '
     '{"experiment": ["seeds"]}, "measure": {}, "published": "1"}]}',
     "claims['a'].params.experiment", "must be one of"),
    ('{"claims": [{"id": "a", "where": "w", "text": "t", "kind": "inspect", "params": '
     '{"scores": [1, 2]}, "measure": {"value": "entropy"}, "published": "1", "scale": "x"}]}',
     "claims['a'].scale", "must be a number"),
])
def test_a_bad_claims_file_names_the_problem(tmp_path: Path, content: str, where: str,
                                             says: str) -> None:
    from engine.errors import FileFormatError

    path = tmp_path / "claims.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FileFormatError) as err:
        load_claims(path)
    assert err.value.option == "claims" and err.value.file == str(path)
    assert err.value.where == where and says in err.value.problem, str(err.value)


def test_the_shipped_file_is_valid_json_with_unique_ids() -> None:
    raw = json.loads((ROOT / "resources" / "claims.json").read_text(encoding="utf-8"))
    ids = [c["id"] for c in raw["claims"]]
    assert len(ids) == len(set(ids)) == len(load_claims())


def test_a_probe_claim_without_the_models_extra_is_skipped(monkeypatch) -> None:
    import engine.probe.loader as loader

    monkeypatch.setattr(loader, "models_extra_available", lambda: False)
    claim = next(c for c in load_claims() if c.kind == "probe")
    (check,) = check_claims([claim])
    assert check.status == "skipped" and "models extra" in check.note


# -- a check's row: every column, blank where there is no number ---------------------------------
def test_a_check_row_has_every_column_and_blanks_where_there_is_no_number() -> None:
    from engine.claims import ROW_COLUMNS, ClaimCheck

    c = _claim("0.526", where="README.md, table", text="the text")
    row = ClaimCheck(c, 0.5, 0.01, 0.0035, "ok", "a note").row()
    assert row == {"id": "x", "where": "README.md, table", "status": "ok", "published": "0.526",
                   "measured": 0.5, "se": 0.01, "tolerance": 0.0035,
                   "command": 'inspect {"scores"=[8,0,-8]}', "text": "the text", "note": "a note"}
    assert tuple(row) == ROW_COLUMNS
    for measured in (None, math.nan, math.inf, -math.inf):
        blank = ClaimCheck(c, measured, 0.0, math.nan, "skipped").row()
        assert (blank["measured"], blank["tolerance"], blank["note"]) == ("", "", "")
    assert ClaimCheck(c, 0.0, 0.0, 0.0, "ok").row()["measured"] == 0.0  # a zero is a number


# -- an inspect claim: the figure at its field path, by hand -------------------------------------
LN3 = math.log(3)


@pytest.mark.parametrize(("params", "value", "expected"), [
    ({"scores": [LN3, 0.0]}, "top_weight", 0.75),  # e^ln3 / (e^ln3 + e^0) = 3 / 4
    ({"scores": [LN3, 0.0]}, "weights.1", 0.25),
    # the largest |entry| of diag(p) - p p^T is p (1 - p) = 3/16
    ({"scores": [LN3, 0.0]}, "quarter_over_max_entry", 0.25 / 0.1875),
    ({"scores": [LN3, 0.0]}, "entropy", -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))),
    ({"scores": [2 * LN3, 0.0], "scale": 2.0}, "top_weight", 0.75),
    ({"scores": [1.0, 0.0], "ssmax_s": 1.0}, "top_weight", 2 / 3),  # z = s ln 2: 2 / (2 + 1)
    ({"scores": [0.0, 0.0], "sink": 0.0}, "key_mass", 2 / 3),  # three equal logits, one a sink
    ({"scores": [0.0, 0.0], "sink": 0.0}, "sink_weight", 1 / 3),
    ({"scores": [0.0, 0.0], "sigmoid": True}, "weights.0", 1 / 3),  # sigmoid(0 - ln 2) = 1 / 3
    ({"scores": [10.0, 0.0], "softcap": 5.0}, "scaled.0", 5 * math.tanh(2.0)),
    # YaRN: (0.1 ln(4 / 1) + 1)^2 times the score
    ({"scores": [1.0, 0.0, 0.0, 0.0], "yarn_n_ref": 1}, "scaled.0", (0.1 * math.log(4) + 1) ** 2),
])
def test_an_inspect_claim_reads_its_figure_at_its_field_path(params, value, expected) -> None:
    claim = _claim("1", params=params, measure={"value": value}, scale=100.0)
    (check,) = check_claims([claim])
    assert check.measured == pytest.approx(100 * expected, rel=1e-9)
    assert check.se == 0.0 and check.tolerance == pytest.approx(0.5) and check.claim is claim
    published = _claim(f"{100 * expected:.4f}", params=params, measure={"value": value},
                       scale=100.0)
    assert [c.status for c in check_claims([published, claim])] == ["ok", "FAIL"]


# -- a coord claim: the slope of its (param, kind, step), mean and SE over seeds -----------------
COORD = {"widths": [64, 128], "steps": 1, "seeds": 2}


def _coord(measure: dict, published: str = "0", **kw) -> Claim:
    return Claim(id=f"c{len(str(measure))}{published}", where="w", text="t", kind="coord",
                 params=COORD, measure=measure, published=published, **kw)


@pytest.fixture
def fake_coord(monkeypatch) -> dict:
    """The coord check replaced by fixed slopes (what is tested is how a claim picks one)."""
    import engine.training.coord_check as cc

    calls = {"runs": 0, "progress": [(False, ()), (True, ("rows",))]}
    fitted = [cc.Slope("sp", "sqrt", "readout", 1, 0.5, 0.02, 2),
              cc.Slope("mup", "dk", "readout", 1, -0.25, 0.01, 2),
              cc.Slope("mup", "dk", "readout", 0, 7.0, 1.0, 2),
              cc.Slope("mup", "dk", "MLP output", 1, 9.0, 1.0, 2),
              cc.Slope("mup", "dk", "embedding", 1, math.nan, math.nan, 0)]

    def run(cfg, cancelled=None):
        assert cfg.widths[0] == 64 and cfg.seeds == 2
        calls["runs"] += 1
        for finished, rows in calls["progress"]:
            if cancelled is not None and cancelled():  # (as the real check does)
                return
            yield type("P", (), {"finished": finished, "rows": rows})()

    def fit(rows):
        assert rows == ("rows",)  # the last progress's rows
        return fitted

    monkeypatch.setattr(cc, "run_coord_check", run)
    monkeypatch.setattr(cc, "slopes", fit)
    return calls


def test_a_coord_claim_reads_the_slope_of_its_param_kind_and_step(fake_coord) -> None:
    mup = {"param": "mup", "kind": "readout", "step": 1}
    slope, se, scaled = check_claims([
        _coord({**mup, "stat": "slope"}, "-0.25"), _coord({**mup, "stat": "se"}, "0.01"),
        _coord({**mup, "stat": "slope"}, "0.5", scale=-2.0)])
    assert fake_coord["runs"] == 1  # one check, three claims
    assert (slope.measured, slope.se, slope.status) == (-0.25, 0.01, "ok")
    assert slope.tolerance == pytest.approx(0.005 + 3 * 0.01)
    assert (se.measured, se.se, se.status) == (0.01, 0.0, "ok")  # a printed SE: rounding alone
    assert (scaled.measured, scaled.se, scaled.status) == (0.5, 0.02, "ok")
    (sp,) = check_claims([_coord({"param": "sp", "kind": "readout", "step": 1, "stat": "slope"},
                                 "0.5")])
    assert (sp.measured, sp.se) == (0.5, 0.02)


@pytest.mark.parametrize("kind", ["embedding", "attention output"])
def test_a_coord_claim_without_its_slope_fails_naming_it(fake_coord, kind) -> None:
    """embedding: zero seeds have a slope (zero at init); attention output: none was fitted."""
    (check,) = check_claims([_coord({"param": "mup", "kind": kind, "step": 1, "stat": "slope"})])
    assert check.status == "FAIL" and check.measured is None
    assert check.note == f"no slope of {kind} at step 1 under mup (zero at some width)"


@pytest.mark.parametrize("progress", [[], [(False, ())]])
def test_a_coord_check_that_did_not_finish_is_cancelled(fake_coord, progress) -> None:
    from engine.errors import Cancelled

    fake_coord["progress"] = progress
    with pytest.raises(Cancelled):
        list(check_claims([_coord({"param": "mup", "kind": "readout", "step": 1,
                                   "stat": "slope"})]))


def test_the_cancel_flag_reaches_the_coord_check(fake_coord) -> None:
    from engine.errors import Cancelled

    asked = []

    def cancelled() -> bool:  # no at the check's own first look, yes inside the coord check
        asked.append(1)
        return len(asked) > 1

    with pytest.raises(Cancelled):
        list(check_claims([_coord({"param": "mup", "kind": "readout", "step": 1,
                                   "stat": "slope"})], cancelled=cancelled))
    assert len(asked) == 2


def test_claims_of_different_runs_do_not_share_a_run(fake_coord) -> None:
    """Runs are cached by their parameters: two configs are two runs, two score lists two
    inspections."""
    mup = {"param": "mup", "kind": "readout", "step": 1, "stat": "slope"}
    wide = dataclasses.replace(_coord(mup), id="wide", params={**COORD, "widths": [64, 256]})
    list(check_claims([_coord(mup), wide]))
    assert fake_coord["runs"] == 2
    lopsided, even = check_claims([_claim("1", params={"scores": [LN3, 0.0]},
                                     measure={"value": "top_weight"}),
                              _claim("1", id="y", params={"scores": [0.0, 0.0]},
                                     measure={"value": "top_weight"})])
    assert (lopsided.measured, even.measured) == (pytest.approx(0.75), pytest.approx(0.5))


# -- where a problem inside a claim is reported ----------------------------------------------------
@pytest.mark.parametrize(("field", "where"), [
    ("d_k", "params.d_k"), ("", "params"), ("value", "params"), ("params", "params"),
])
def test_a_problem_inside_a_claim_is_placed_under_its_part(field, where) -> None:
    from engine.claims import _in
    from engine.errors import ConfigError

    def bad() -> None:
        raise ConfigError(field, "what is wrong")

    with pytest.raises(ConfigError) as err:
        _in("params", bad)
    assert (err.value.field, err.value.message) == (where, "what is wrong")
    assert _in("params", lambda: 42) == 42


@pytest.mark.parametrize(("item", "path"), [
    ({"id": "ref.x"}, "claims['ref.x']"), ({"id": "a" * 100}, None), ({"id": "a" * 101}, "claims[3]"),
    ({"id": ""}, "claims[3]"), ({"id": 5}, "claims[3]"), ({}, "claims[3]"),
])
def test_a_claim_is_named_by_its_short_id_else_by_its_index(item, path) -> None:
    from engine.claims import _claim_path

    got = _claim_path(3, item)
    if path is None:  # 100 characters: still the id (quoted, cut for display)
        assert got.startswith("claims['aaaa") and got != "claims[3]"
    else:
        assert got == path
