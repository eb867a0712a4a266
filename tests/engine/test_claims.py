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
