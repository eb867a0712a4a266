"""Published numbers, checked: every figure the docs, presets and tour state, measured again.

A claim is data (``resources/claims.json``): where it is published, what produces it (a
simulation, the inspector, an experiment over seeds, the real model), the published value as printed, and how close the
measurement must come. The tolerance is half a unit of the last printed digit (rounding), plus a
multiple of the measured standard error for Monte-Carlo figures (default 3 SE): a changed random
stream may move a figure by its noise, a changed formula or threshold moves it by more.
``published`` may also be a bound, ``">0.5"`` or ``"<0.05"``.

Training claims are ``experiment`` claims: a figure over seeds (a success count, a Wilson bound,
median steps, a mean with its standard error, a median; ``engine.experiments.select``) of a
built-in experiment or of an experiment spec written in the claim. Training is bit-reproducible
on one machine but chaotic across machines (unscaled runs flip with the CPU's vector width, the
torch version, ARM or CUDA), so their tolerance is statistical, from the spread over the seeds
(``judge_experiment``; docs/CLAIMS.md): a mean or median agrees within rounding plus
``se_multiple`` (3) combined standard errors, a success count when the Wilson 95 % intervals of
the published and the measured count overlap. Only what is deterministic across machines (the
number of runs, figures at step 0, before any training step) keeps the rounding alone. A best
learning rate and its shift with the width (``optimum``) are judged like a Monte-Carlo figure,
rounding plus 3 of their standard errors over the seeds, and so are the figures computed from
them (an interval end, a factor, a printed bootstrap SE: ``engine.experiments.transfer.figure_se``):
x86 machines of two vendors do not agree to the last digit even under the kernel pin
(docs/NUMERICS.md), so nothing computed from seeds is judged by its digits alone. A coord-check
slope (``coord``, mean ± SE over its seeds) is judged the same way, its printed SE by rounding.
Each experiment runs once per check (its jobs on a process pool), whatever the number of its
claims.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from engine.bundled import resource
from engine.errors import ConfigError, FileFormatError, quote

CLAIMS_FILE = resource("claims.json")
#: no kind for a single training run: a training claim rests on seeds (an experiment)
KINDS = ("simulate", "inspect", "probe", "experiment", "optimum", "coord")
#: standard errors allowed on top of rounding for Monte-Carlo figures, for statistical
#: experiment claims (combined standard errors) and for the bootstrap or seed standard errors of
#: ``optimum`` and ``coord`` figures, unless a claim says
DEFAULT_SE_MULTIPLE = 3.0
#: how an experiment claim is judged: by its rounding alone, or statistically (see the module)
TOLERANCES = ("exact", "statistical")


@dataclass(frozen=True)
class Claim:
    id: str
    where: str  #: the file and section that publish it
    text: str  #: the sentence as published (short)
    kind: str  #: "simulate", "inspect", "probe", "experiment", "optimum" or "coord"
    #: the config of the run (SimulationConfig fields, or scores and scale; for an experiment ``{"experiment": NAME}`` (built-in) or ``{"spec": {...}}`` (its from_dict))
    params: dict[str, Any]
    measure: dict[str, Any]  #: what to read from the run (see the measurers below)
    published: str  #: as printed: "4.05", "3.35e-4", or a bound ">0.5"
    printed: str = ""  #: how the source writes it, when not as ``published`` ("1/d_k", "3.4·10⁻⁴")
    scale: float = 1.0  #: the measurement times this is compared (100 for a percentage)
    se_multiple: float | None = None  #: default: DEFAULT_SE_MULTIPLE
    slow: bool = False  #: skipped under --fast
    #: experiments: the standard error printed with a mean or median ("0.45 ± 0.09" -> "0.09"),
    #: judged too and used in the combined standard error
    published_se: str = ""
    #: experiments: "exact" or "statistical"; default: exact for the number of runs and for
    #: figures at step 0 (deterministic across machines), statistical otherwise
    tolerance: str = ""

    def __post_init__(self) -> None:
        if self.se_multiple is None:
            object.__setattr__(self, "se_multiple", DEFAULT_SE_MULTIPLE)
        if self.kind == "experiment" and not self.tolerance:
            m = self.measure
            exact = m.get("stat") == "n" or str(m.get("value", "")).endswith("@0")
            object.__setattr__(self, "tolerance", "exact" if exact else "statistical")

    @property
    def command(self) -> str:
        """The run that produces it, as parameters (for the table)."""
        return f"{self.kind} {json.dumps(self.params, separators=(',', '='))}"


@dataclass(frozen=True)
class ClaimCheck:
    claim: Claim
    measured: float | None  #: None when skipped
    se: float  #: standard error of ``measured`` (0 for exact figures), already scaled
    tolerance: float  #: allowed |measured - published| (nan for a bound)
    status: str  #: "ok", "FAIL" or "skipped"
    note: str = ""

    def row(self) -> dict[str, Any]:
        c = self.claim

        def finite(x: float | None) -> float | str:  # CSV cells: blank where there is no number
            return x if x is not None and math.isfinite(x) else ""

        return {"id": c.id, "where": c.where, "status": self.status, "published": c.published,
                "measured": finite(self.measured), "se": self.se, "tolerance": finite(self.tolerance),
                "command": c.command, "text": c.text, "note": self.note}


ROW_COLUMNS = ("id", "where", "status", "published", "measured", "se", "tolerance", "command",
               "text", "note")


#: the largest claims file read (the shipped one is ~60 kB)
CLAIMS_FILE_MAX = 4_000_000


def load_claims(path: str | Path | None = None) -> list[Claim]:
    """Read and validate the claims file, every claim's fields and its run's parameters; a
    problem is one FileFormatError (``FILE: claims['ref.x'].params.d_k: what is wrong``)."""
    from engine.readers.json_file import read_json
    from engine.readers.schema import AnyObject, ListOf, Record, errors_in_file

    path = Path(path) if path is not None else CLAIMS_FILE
    source = str(path)
    raw = read_json(path, max_bytes=CLAIMS_FILE_MAX, kind="claims file", option="claims")
    with errors_in_file(source, option="claims"):
        Record({"claims": ListOf(AnyObject(), max_items=10_000, min_items=1)},
               required=frozenset({"claims"}), extra="keep").check(raw)
    claims, seen = [], set()
    for i, item in enumerate(raw["claims"]):
        with errors_in_file(source, _claim_path(i, item), option="claims"):
            claim = _claim(item)
            if claim.id in seen:
                raise ConfigError("id", f"{quote(claim.id)} appears twice")
        seen.add(claim.id)
        claims.append(claim)
    return claims


def _claim_path(index: int, item: dict[str, Any]) -> str:
    """``claims['ref.x']`` by the claim's id (a short string), else ``claims[3]``."""
    cid = item.get("id")
    return f"claims[{quote(cid)}]" if isinstance(cid, str) and 0 < len(cid) <= 100 else \
        f"claims[{index}]"


def _claim(item: dict[str, Any]) -> Claim:
    """One claim, its fields' types, its kind's parameters and what it measures checked
    (ConfigError naming the field inside the claim)."""
    from engine.readers.schema import AnyObject, Number, OneOf, Text, dataclass_schema

    item = dataclass_schema(Claim, {
        "kind": Text(choices=KINDS), "params": AnyObject(), "measure": AnyObject(),
        "published": OneOf((Text(max_chars=100), Number()), what="a number as printed"),
        "published_se": OneOf((Text(max_chars=100), Number()), what="a number as printed"),
        "tolerance": Text(choices=TOLERANCES),
    }, label="field").check(item)
    try:
        _parse_published(str(item["published"]))
    except ValueError as exc:
        raise ConfigError("published", str(exc)) from None
    try:
        if item.get("published_se", ""):
            _parse_published(str(item["published_se"]))
    except ValueError as exc:
        raise ConfigError("published_se", str(exc)) from None
    if item["kind"] != "experiment" and (item.get("tolerance") or item.get("published_se")):
        raise ConfigError("tolerance" if item.get("tolerance") else "published_se",
                          "tolerance and published_se are for experiment claims")
    claim = Claim(**{**item, "published": str(item["published"]),
                     "published_se": str(item.get("published_se", ""))})
    _check_run(claim)
    return claim


def _check_run(claim: Claim) -> None:
    """The claim's run and measure are well-formed before anything runs (torch-free)."""
    from engine.readers.schema import Boolean, Int, ListOf, Number, OneOf, Record, Text

    name = Text(max_chars=200)
    value_path = Record({"value": OneOf((name, Int()), what="a field path")},
                        required=frozenset({"value"}))
    if claim.kind == "simulate":
        from engine.config import SimulationConfig

        _in("params", lambda: SimulationConfig.from_dict(claim.params))
        _in("measure", lambda: Record({"rule": name, "column": name, "se": name,
                                       "transform": Text(choices=("sqrt",))},
                                      required=frozenset({"column"})).check(claim.measure))
    elif claim.kind == "inspect":
        _in("params", lambda: Record({"scores": ListOf(Number(), max_items=100_000, min_items=2),
                                      "scale": Number(), "ssmax_s": Number(),
                                      "sink": Number(), "softcap": Number(),
                                      "sigmoid": Boolean(), "yarn_n_ref": Int()},
                                     required=frozenset({"scores"})).check(claim.params))
        _in("measure", lambda: value_path.check(claim.measure))
    elif claim.kind == "probe":
        from engine.probe.config import ProbeConfig
        from engine.readers.schema import dataclass_schema

        probe = dataclass_schema(ProbeConfig, {"text": Text(max_chars=500_000)})
        _in("params", lambda: Record({**probe.fields, "text_preset": name}).check(claim.params))
        _in("measure", lambda: value_path.check(claim.measure))
    elif claim.kind == "coord":
        from engine.training.coord_check import CoordCheckConfig

        _in("params", lambda: CoordCheckConfig.from_dict(claim.params))
        _in("measure", lambda: coord_selector(claim))
    else:  # an experiment (or its best learning rate): its spec, and what is selected from it
        spec = _in("params", lambda: experiment_of(claim))
        selector = _in("measure", lambda: selector_of(claim))
        _in("measure", lambda: selector.check(spec))
        if claim.published_se and selector.stat not in ("mean", "median", "median_steps"):
            raise ConfigError("published_se", "goes with a mean or a median")


def _in(where: str, check: Callable[[], Any]) -> Any:
    """``check()``, its ConfigError's field placed under ``where``."""
    try:
        return check()
    except ConfigError as exc:
        inside = exc.field not in ("", "value", where)
        raise ConfigError(f"{where}.{exc.field}" if inside else where, exc.message) from None


def _parse_published(text: str) -> tuple[str, float, float]:
    """(op, value, half a unit of the last printed digit); op is "=", ">" or "<". Thousands
    separators as printed are allowed ("2,460": its last digit is the unit)."""
    s = text.strip()
    op = "="
    if s[:1] and s[:1] in "<>":
        op, s = s[0], s[1:].strip()
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    try:
        d = Decimal(s)
    except InvalidOperation:
        raise ValueError(f"published must be a number as printed or a bound, got {quote(text)}") from None
    if not d.is_finite():
        raise ValueError(f"published must be finite, got {quote(text)}")
    exponent = d.as_tuple().exponent
    assert isinstance(exponent, int)
    return op, float(d), 0.5 * 10.0 ** exponent


def judge(claim: Claim, measured: float, se: float) -> ClaimCheck:
    """Compare one measurement (already scaled) with its published value."""
    op, value, half = _parse_published(claim.published)
    if not math.isfinite(measured):
        return ClaimCheck(claim, measured, se, math.nan, "FAIL", "the measurement is not finite")
    if op == ">":
        return ClaimCheck(claim, measured, se, math.nan, "ok" if measured > value else "FAIL")
    if op == "<":
        return ClaimCheck(claim, measured, se, math.nan, "ok" if measured < value else "FAIL")
    tol = half + (claim.se_multiple or 0.0) * se
    ok = abs(measured - value) <= tol * (1 + 1e-9)
    return ClaimCheck(claim, measured, se, tol, "ok" if ok else "FAIL")


def _wilson_text(k: int, n: int) -> str:
    from engine.experiments.point import wilson_interval

    lo, hi = wilson_interval(k, n)
    return f"{k}/{n} ({lo:.2f}-{hi:.2f})"


def published_count(claim: Claim, n: int) -> int | None:
    """The success count of ``n`` runs that a count claim publishes: the count itself, a rate
    times n, or the count whose Wilson bound is the published bound at its printed digits (None
    where no count of n runs has it)."""
    from engine.experiments.point import wilson_interval

    _, value, half = _parse_published(claim.published)
    stat = claim.measure["stat"]
    if stat == "successes":
        return round(value)
    if stat == "rate":
        return round(value * n)
    side = stat == "rate_hi"
    fits = [k for k in range(n + 1)
            if abs(wilson_interval(k, n)[side] - value) <= half * (1 + 1e-9)]
    return fits[0] if len(fits) == 1 else None


def judge_experiment(claim: Claim, fig: Any) -> ClaimCheck:
    """Judge a figure over seeds (``engine.experiments.select.Figure``, not yet scaled).

    - exact (``tolerance``): the rounding alone, as a deterministic figure;
    - a success count, rate or Wilson bound: ok when the Wilson 95 % intervals of the published
      count and the measured one (of the same n runs) overlap, about 2.8 combined standard errors;
    - a mean or median: |measured - published| <= rounding + resolution (steps: the log
      interval) + se_multiple * sqrt(SE_measured^2 + SE_published^2), where SE_published is the
      printed ``published_se`` or, when none is printed, the measured SE again (the same number
      of seeds estimates the same spread); a printed SE is judged too, with the standard error
      of a standard error, SE / sqrt(2 (n - 1));
    - a standard error alone (stat ``se``): likewise with the standard error of a standard error;
    - the best value of an axis (stat ``best``): ok when the published value is one whose mean
      the seeds cannot tell from the best one's (within 3 combined standard errors).
    """
    from engine.experiments.select import COUNT_STATS

    op = _parse_published(claim.published)[0]
    measured, se = fig.value * claim.scale, fig.se * abs(claim.scale)
    if not math.isfinite(measured):
        return ClaimCheck(claim, measured, se, math.nan, "FAIL", "the measurement is not finite")
    if op != "=" or claim.tolerance == "exact":
        return _judge_exact(claim, measured, se)
    if claim.measure["stat"] in COUNT_STATS:
        return _judge_count(claim, measured, fig.n, fig.successes)
    if claim.measure["stat"] == "best":
        return _judge_best(claim, measured, [x * claim.scale for x in fig.accepted])
    if not math.isfinite(se):
        return ClaimCheck(claim, measured, se, math.nan, "FAIL",
                          f"no standard error from {fig.n} run(s): cannot judge over seeds")
    return _judge_spread(claim, measured, se, fig.n, fig.resolution * abs(claim.scale))


def _judge_exact(claim: Claim, measured: float, se: float) -> ClaimCheck:
    """Rounding alone, for the figure and for its printed standard error."""
    check = judge(dataclasses.replace(claim, se_multiple=0.0), measured, 0.0)
    if check.status == "ok" and claim.published_se:
        se_check = judge(dataclasses.replace(claim, published=claim.published_se,
                                             se_multiple=0.0), se, 0.0)
        if se_check.status != "ok":
            return dataclasses.replace(check, status="FAIL", note=(
                f"published SE {claim.published_se}, measured {se:.4g}: beyond rounding"))
    return check


def _judge_count(claim: Claim, measured: float, n: int, got: int) -> ClaimCheck:
    """The published and the measured count of ``n`` runs: do their Wilson intervals overlap?"""
    from engine.experiments.point import wilson_interval

    pub = published_count(claim, n)
    if pub is None:
        return ClaimCheck(claim, measured, 0.0, math.nan, "FAIL",
                          f"no count of {n} runs has the published bound {claim.published}")
    (plo, phi), (mlo, mhi) = wilson_interval(pub, n), wilson_interval(got, n)
    ok = plo <= mhi and mlo <= phi
    return ClaimCheck(claim, measured, 0.0, math.nan, "ok" if ok else "FAIL",
                      f"published {_wilson_text(pub, n)}, measured {_wilson_text(got, n)}: "
                      f"the Wilson 95 % intervals {'overlap' if ok else 'do not overlap'}")


def _judge_best(claim: Claim, measured: float, accepted: list[float]) -> ClaimCheck:
    """The published best axis value is one the seeds cannot tell from the measured best (its
    mean within 3 combined standard errors: ``engine.experiments.select.TIE_SE``)."""
    _, value, half = _parse_published(claim.published)
    ok = any(abs(x - value) <= half * (1 + 1e-9) for x in accepted)
    tied = ", ".join(f"{x:g}" for x in sorted(accepted))
    return ClaimCheck(claim, measured, 0.0, math.nan, "ok" if ok else "FAIL",
                      f"tied with the best (3 combined SE): {tied}")


def _judge_spread(claim: Claim, measured: float, se: float, n: int, resolution: float
                  ) -> ClaimCheck:
    """A mean, median or SE within rounding + resolution + k combined standard errors."""
    _, value, half = _parse_published(claim.published)
    k = claim.se_multiple or 0.0
    if claim.measure["stat"] == "se":  # each SE's own SE is SE / sqrt(2 (n - 1)); se is ours
        combined = math.hypot(se, se * value / measured if measured > 0 else se)
        tol = half + k * combined
        ok = abs(measured - value) <= tol * (1 + 1e-9)
        return ClaimCheck(claim, measured, combined, tol, "ok" if ok else "FAIL",
                          "standard error of a standard error over seeds")
    pub_se = _parse_published(claim.published_se)[1] if claim.published_se else se
    combined = math.hypot(se, pub_se)
    tol = half + resolution + k * combined
    ok = abs(measured - value) <= tol * (1 + 1e-9)
    note = f"{k:g} combined SE (measured SE {se:.3g}"
    note += f", published {claim.published_se})" if claim.published_se else ", twice)"
    if ok and claim.published_se and n > 1:
        se_half = _parse_published(claim.published_se)[2]
        se_tol = se_half + k * combined / math.sqrt(2 * (n - 1))
        if abs(se - pub_se) > se_tol * (1 + 1e-9):
            return ClaimCheck(claim, measured, combined, tol, "FAIL",
                              f"the mean holds, its SE does not: published {claim.published_se}, "
                              f"measured {se:.3g}, tolerance ± {se_tol:.3g}")
    return ClaimCheck(claim, measured, combined, tol, "ok" if ok else "FAIL", note)


# -- measurers: one per kind; each returns (value, standard error) before scaling -------------------
@dataclass
class _Cache:
    """The runs of one check, by their parameters (each is made once), and what experiments need:
    the number of worker processes, the pool (made at the first experiment, shut at the end), a
    folder whose finished jobs are reused, the cancel flag."""

    runs: dict[str, Any] = field(default_factory=dict)
    workers: int | None = None
    cache_dir: Path | None = None
    cancelled: Callable[[], bool] | None = None
    pool: Any = None
    note: Callable[[str], None] | None = None  #: told when an experiment starts its jobs

    def get(self, key: Mapping[str, Any], make: Callable[[], Any]) -> Any:
        k = json.dumps(key, sort_keys=True)
        if k not in self.runs:
            try:
                self.runs[k] = make()
            except MeasurementFailed as exc:  # remembered: the other claims of it fail alike
                self.runs[k] = exc
        if isinstance(self.runs[k], MeasurementFailed):
            raise self.runs[k]
        return self.runs[k]

    def executor(self) -> Any:
        if self.pool is None:
            from engine.experiments.pool import default_workers, process_pool

            self.pool = process_pool(self.workers or default_workers())
        return self.pool

    def close(self, abort: bool = False) -> None:
        """Shut the pool; ``abort`` (cancelled, Ctrl-C, an error) ends its workers at once."""
        if self.pool is not None:
            if abort:
                from engine.experiments.pool import stop_executor

                stop_executor(self.pool, True, [])
            else:
                self.pool.shutdown(wait=True)
            self.pool = None


def _measure_simulate(claim: Claim, cache: _Cache) -> tuple[float, float]:
    from engine.config import SimulationConfig
    from engine.simulate import run_simulation

    snap = cache.get({"simulate": claim.params},
                     lambda: run_simulation(SimulationConfig.from_dict(claim.params)))
    rows = {row["scaling"]: row for row in snap.summary_rows()}
    m = claim.measure
    rule = m.get("rule", next(iter(rows)))
    if rule not in rows:
        raise ConfigError("claims", f"claim {quote(claim.id)}: rule {quote(rule)} was not run")
    row = rows[rule]
    column = m["column"]
    if column not in row:
        raise ConfigError("claims", f"claim {quote(claim.id)}: no column {quote(column)} in summary.csv")
    value = float(row[column])
    se = float(row[m["se"]]) if "se" in m else 0.0
    if m.get("transform") == "sqrt":  # a standard deviation from a variance (delta method)
        value, se = math.sqrt(value), (se / (2 * math.sqrt(value)) if value > 0 else 0.0)
    return value, se


def _measure_inspect(claim: Claim, cache: _Cache) -> tuple[float, float]:
    from engine.inspect import inspect_scores
    from engine.softmax import JACOBIAN_ENTRY_MAX

    p = claim.params
    options = {k: p[k] for k in ("sink", "softcap", "sigmoid", "yarn_n_ref") if k in p}
    r = cache.get({"inspect": p}, lambda: inspect_scores(p["scores"], p.get("scale", 1.0),
                                                         p.get("ssmax_s"), **options))
    d = r.to_dict()
    d["top_weight"] = float(max(r.weights))
    d["quarter_over_max_entry"] = JACOBIAN_ENTRY_MAX / r.jacobian_max_abs
    value: Any = d
    for part in str(claim.measure["value"]).split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return float(value), 0.0


class Unavailable(Exception):
    """What a claim needs is not installed here (e.g. the real model): reported as skipped."""


class MeasurementFailed(Exception):
    """The run behind a claim failed (e.g. a job of its experiment raised): reported as FAIL."""


def experiment_of(claim: Claim) -> Any:
    """The claim's experiment (a built-in one by name, or a spec in the claim), on the CPU: the
    published figures were measured there and CUDA's arithmetic differs."""
    from engine.experiments.builtin import builtin
    from engine.experiments.spec import ExperimentSpec

    p = claim.params
    if set(p) not in ({"experiment"}, {"spec"}):
        raise ConfigError("params", "needs exactly one of experiment (a built-in name) or spec")
    spec = builtin(p["experiment"]) if "experiment" in p else ExperimentSpec.from_dict(p["spec"])
    return dataclasses.replace(spec, base=spec.base.replace(device="cpu"))


def selector_of(claim: Claim) -> Any:
    """The claim's figure of its experiment: a statistic over seeds (``experiment``) or a best
    learning rate and its shift with the width (``optimum``, engine.experiments.transfer)."""
    if claim.kind == "optimum":
        from engine.experiments.transfer import OptimumSelector

        return OptimumSelector.from_dict(claim.measure)
    from engine.experiments.select import Selector

    return Selector.from_dict(claim.measure)


def coord_selector(claim: Claim) -> tuple[Any, str, str, int, str]:
    """A coord check claim: (its config, param, kind, step, stat: slope or se)."""
    from engine.training.coord_check import KINDS as COORD_KINDS
    from engine.training.coord_check import CoordCheckConfig

    cfg = CoordCheckConfig.from_dict(claim.params)
    m = claim.measure
    if set(m) != {"param", "kind", "step", "stat"} or m["stat"] not in ("slope", "se") \
            or m["param"] not in cfg.params or m["kind"] not in COORD_KINDS \
            or m["step"] not in range(cfg.steps + 1):
        raise ConfigError("measure", "needs param (one of the check's), kind "
                                     f"({', '.join(COORD_KINDS)}), step (0..{cfg.steps}) and "
                                     "stat (slope or se)")
    return cfg, m["param"], m["kind"], int(m["step"]), m["stat"]


def _measure_coord(claim: Claim, cache: _Cache) -> tuple[float, float]:
    """A slope of the coord check (engine.training.coord_check), mean ± SE over its seeds."""
    from collections import deque

    from engine.errors import Cancelled
    from engine.training.coord_check import run_coord_check, slopes

    cfg, param, kind, step, stat = coord_selector(claim)

    def run() -> list[Any]:
        last = deque(run_coord_check(cfg, cache.cancelled), maxlen=1)
        if not last or not last[0].finished:
            raise Cancelled
        return slopes(last[0].rows)

    fitted = cache.get({"coord": cfg.to_dict()}, run)
    s = next((s for s in fitted if (s.param, s.kind, s.step) == (param, kind, step)), None)
    if s is None or s.seeds == 0:
        raise MeasurementFailed(f"no slope of {kind} at step {step} under {param} (zero at "
                                "some width)")
    return (s.slope, s.se) if stat == "slope" else (s.se, 0.0)


def _measure_experiment(claim: Claim, cache: _Cache) -> Any:
    """A figure over the seeds of an experiment (``engine.experiments.select``, or a best
    learning rate: ``engine.experiments.transfer``); the experiment runs once per check, on the
    cache's pool, its jobs kept in ``cache_dir`` and reused from it only under the same
    fingerprint (code, torch, CPU kernels); every job that judges a claim must carry this
    machine's fingerprint."""
    from engine.errors import Cancelled
    from engine.experiments.runner import expected_fingerprint, run_experiment, scan_results

    spec = experiment_of(claim)

    def run() -> list[dict[str, Any]]:
        out = cache.cache_dir / spec.name if cache.cache_dir is not None else None
        cached = scan_results(spec, out, fingerprints=True)[0] if out is not None else {}
        pending = len(spec.jobs()) - len(cached)  # (no pool for an experiment all in the cache)
        if pending and cache.note is not None:
            from engine.experiments.pool import default_workers

            cache.note(f"experiment {spec.name}: running {pending} of {len(spec.jobs())} jobs on "
                       f"{cache.workers or default_workers()} worker(s)")
        progress = run_experiment(spec, out, workers=cache.workers or None,
                                  executor=cache.executor() if pending else None,
                                  resume=out is not None, cancelled=cache.cancelled,
                                  fingerprints=True)
        last = deque(progress, maxlen=1)[0]  # (the last snapshot holds every result)
        if last.cancelled:
            raise Cancelled
        failed = [r for r in last.results if r.get("error")]
        if failed:
            raise MeasurementFailed(f"{len(failed)} of {last.total} jobs of {spec.name!r} "
                                    f"failed: {failed[0]['error']}")
        jobs = {job.key: job for job in spec.jobs()}
        foreign = [r for r in last.results
                   if r.get("fingerprint") != expected_fingerprint(jobs[r["key"]])]
        if foreign:  # e.g. a worker whose torch had chosen its kernels before the pin
            raise MeasurementFailed(f"{len(foreign)} of {last.total} jobs of {spec.name!r} ran "
                                    f"under another fingerprint ({foreign[0].get('kernels')})")
        return list(last.results)

    results = cache.get({"experiment": spec.to_dict()}, run)
    return selector_of(claim).measure(spec, results)


def _measure_probe(claim: Claim, cache: _Cache) -> tuple[float, float]:
    """A figure of the probe summary (engine.probe.summary) on a preset text of
    resources/probe_texts.json (``text_preset``: its name up to the first " (") or ``text``."""
    from engine.probe.analyze import analyze, run_to_result
    from engine.probe.config import ProbeConfig
    from engine.probe.loader import models_extra_available
    from engine.probe.summary import summarize

    if not models_extra_available():
        raise Unavailable("the models extra is not installed")
    params = dict(claim.params)
    name = params.pop("text_preset", None)
    if name is not None:
        from engine.probe.texts import load_text_presets

        texts = load_text_presets()
        found = [text for title, text in texts if title.split(" (")[0] == name]
        if not found:
            raise ConfigError("claims", f"claim {quote(claim.id)}: no probe text named {quote(name)}")
        params["text"] = found[0]

    def run() -> Any:
        try:
            return summarize(run_to_result(analyze(ProbeConfig(**params))))
        except FileFormatError as exc:  # a file of the model folder (the bundled model's)
            if exc.option == "model":
                raise Unavailable(str(exc)) from None
            raise
        except ConfigError as exc:
            if exc.field == "model":
                raise Unavailable(exc.message) from None
            raise

    value: Any = dataclasses.asdict(cache.get({"probe": claim.params}, run))
    for part in str(claim.measure["value"]).split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return float(value), 0.0


MEASURERS: dict[str, Callable[[Claim, _Cache], Any]] = {
    "simulate": _measure_simulate, "inspect": _measure_inspect, "probe": _measure_probe,
    "experiment": _measure_experiment, "optimum": _measure_experiment, "coord": _measure_coord,
}


def check_claims(claims: list[Claim], fast: bool = False,
                 cancelled: Callable[[], bool] | None = None, workers: int | None = None,
                 cache_dir: str | Path | None = None,
                 note: Callable[[str], None] | None = None) -> Iterator[ClaimCheck]:
    """Measure and judge each claim in turn (runs shared by several claims are done once);
    under ``fast`` the slow ones are reported as skipped. Experiments run their jobs on a pool
    of ``workers`` processes (default: one per core); with ``cache_dir`` each experiment's
    finished jobs are kept in ``cache_dir/NAME`` and reused by the next check; ``note`` is told
    when an experiment starts running (minutes of silence otherwise)."""
    from engine.errors import Cancelled

    cache = _Cache(workers=workers, cancelled=cancelled, note=note,
                   cache_dir=Path(cache_dir) if cache_dir is not None else None)
    try:
        for claim in claims:
            if cancelled is not None and cancelled():
                raise Cancelled
            if fast and claim.slow:
                yield ClaimCheck(claim, None, 0.0, math.nan, "skipped",
                                 "slow: skipped under --fast")
                continue
            try:
                got = MEASURERS[claim.kind](claim, cache)
            except Unavailable as exc:
                yield ClaimCheck(claim, None, 0.0, math.nan, "skipped", f"unavailable: {exc}")
                continue
            except MeasurementFailed as exc:
                yield ClaimCheck(claim, None, 0.0, math.nan, "FAIL", str(exc))
                continue
            if claim.kind == "experiment":
                yield judge_experiment(claim, got)
                continue
            value, se = got
            yield judge(claim, value * claim.scale, se * abs(claim.scale))
    except BaseException:  # (GeneratorExit too: a consumer that stops early)
        cache.close(abort=True)
        raise
    cache.close()
