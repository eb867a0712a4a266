"""Published numbers, checked: every figure the docs, presets and tour state, measured again.

A claim is data (``resources/claims.json``): where it is published, what produces it (a
simulation, the inspector, an experiment over seeds, the real model), the published value as printed, and how close the
measurement must come. The tolerance is half a unit of the last printed digit (rounding), plus a
multiple of the measured standard error for Monte-Carlo figures (default 3 SE): a changed random
stream may move a figure by its noise, a changed formula or threshold moves it by more.
``published`` may also be a bound, ``">0.5"`` or ``"<0.05"``.

Training claims are ``experiment`` claims: a figure over seeds (a success count, a Wilson bound,
median steps, a mean or its standard error; ``engine.experiments.select``) of a built-in
experiment or of an experiment spec written in the claim. Their tolerance is the rounding alone
(``se_multiple`` 0): every training step runs single-threaded with subnormals flushed
(``engine/training/numerics.py``), so rerunning the same experiment gives the same numbers bit
for bit, and any change beyond the printed digits means the code, not the noise, moved. Each
experiment runs once per check (its jobs on a process pool), whatever the number of its claims.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, FileFormatError
from engine.validate import quote

CLAIMS_FILE = Path(__file__).resolve().parents[1] / "resources" / "claims.json"
#: no kind for a single training run: a training claim rests on seeds (an experiment)
KINDS = ("simulate", "inspect", "probe", "experiment", "optimum", "coord")
#: kinds whose runs are reproducible bit for bit (training: single-threaded, subnormals flushed)
EXACT_KINDS = ("experiment", "optimum", "coord")
#: standard errors allowed on top of rounding for Monte-Carlo figures, unless a claim says
DEFAULT_SE_MULTIPLE = 3.0
#: ... and for experiments: none (their runs are reproducible bit for bit, see above)
EXPERIMENT_SE_MULTIPLE = 0.0


@dataclass(frozen=True)
class Claim:
    id: str
    where: str  #: the file and section that publish it
    text: str  #: the sentence as published (short)
    kind: str  #: "simulate", "inspect", "probe" or "experiment"
    #: the config of the run (SimulationConfig fields, or scores and scale; for an experiment ``{"experiment": NAME}`` (built-in) or ``{"spec": {...}}`` (its from_dict))
    params: dict[str, Any]
    measure: dict[str, Any]  #: what to read from the run (see the measurers below)
    published: str  #: as printed: "4.05", "3.35e-4", or a bound ">0.5"
    printed: str = ""  #: how the source writes it, when not as ``published`` ("1/d_k", "3.4·10⁻⁴")
    scale: float = 1.0  #: the measurement times this is compared (100 for a percentage)
    se_multiple: float | None = None  #: default: DEFAULT_SE_MULTIPLE (experiments: 0)
    slow: bool = False  #: skipped under --fast

    def __post_init__(self) -> None:
        if self.se_multiple is None:
            object.__setattr__(self, "se_multiple", EXPERIMENT_SE_MULTIPLE
                               if self.kind in EXACT_KINDS else DEFAULT_SE_MULTIPLE)

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
    }, label="field").check(item)
    try:
        _parse_published(str(item["published"]))
    except ValueError as exc:
        raise ConfigError("published", str(exc)) from None
    claim = Claim(**{**item, "published": str(item["published"])})
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
        _in("measure", lambda: selector_of(claim).check(spec))


def _in(where: str, check: Callable[[], Any]) -> Any:
    """``check()``, its ConfigError's field placed under ``where``."""
    try:
        return check()
    except ConfigError as exc:
        inside = exc.field not in ("", "value", where)
        raise ConfigError(f"{where}.{exc.field}" if inside else where, exc.message) from None


def _parse_published(text: str) -> tuple[str, float, float]:
    """(op, value, half a unit of the last printed digit); op is "=", ">" or "<"."""
    s = text.strip()
    op = "="
    if s[:1] and s[:1] in "<>":
        op, s = s[0], s[1:].strip()
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
            from engine.experiments.runner import default_workers, process_pool

            self.pool = process_pool(self.workers or default_workers())
        return self.pool

    def close(self, abort: bool = False) -> None:
        """Shut the pool; ``abort`` (cancelled, Ctrl-C, an error) ends its workers at once."""
        if self.pool is not None:
            if abort:
                from engine.experiments.runner import stop_executor

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
    import dataclasses

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


def _measure_experiment(claim: Claim, cache: _Cache) -> tuple[float, float]:
    """A figure over the seeds of an experiment (``engine.experiments.select``, or a best
    learning rate: ``engine.experiments.transfer``); the experiment runs once per check, on the
    cache's pool, its jobs kept in (and reused from) ``cache_dir``."""
    from engine.errors import Cancelled
    from engine.experiments.runner import run_experiment, scan_results

    spec = experiment_of(claim)

    def run() -> list[dict[str, Any]]:
        out = cache.cache_dir / spec.name if cache.cache_dir is not None else None
        cached = scan_results(spec, out)[0] if out is not None else {}
        pending = len(spec.jobs()) - len(cached)  # (no pool for an experiment all in the cache)
        if pending and cache.note is not None:
            from engine.experiments.runner import default_workers

            cache.note(f"experiment {spec.name}: running {pending} of {len(spec.jobs())} jobs on "
                       f"{cache.workers or default_workers()} worker(s)")
        progress = run_experiment(spec, out, workers=cache.workers or None,
                                  executor=cache.executor() if pending else None,
                                  resume=out is not None, cancelled=cache.cancelled)
        last = deque(progress, maxlen=1)[0]  # (the last snapshot holds every result)
        if last.cancelled:
            raise Cancelled
        failed = [r for r in last.results if r.get("error")]
        if failed:
            raise MeasurementFailed(f"{len(failed)} of {last.total} jobs of {spec.name!r} "
                                    f"failed: {failed[0]['error']}")
        return list(last.results)

    results = cache.get({"experiment": spec.to_dict()}, run)
    return selector_of(claim).measure(spec, results)


def _measure_probe(claim: Claim, cache: _Cache) -> tuple[float, float]:
    """A figure of the probe summary (engine.probe.summary) on a preset text of
    resources/probe_texts.json (``text_preset``: its name up to the first " (") or ``text``."""
    import dataclasses

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

        texts = load_text_presets(CLAIMS_FILE.parent / "probe_texts.json")
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


MEASURERS: dict[str, Callable[[Claim, _Cache], tuple[float, float]]] = {
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
                value, se = MEASURERS[claim.kind](claim, cache)
            except Unavailable as exc:
                yield ClaimCheck(claim, None, 0.0, math.nan, "skipped", f"unavailable: {exc}")
                continue
            except MeasurementFailed as exc:
                yield ClaimCheck(claim, None, 0.0, math.nan, "FAIL", str(exc))
                continue
            yield judge(claim, value * claim.scale, se * abs(claim.scale))
    except BaseException:  # (GeneratorExit too: a consumer that stops early)
        cache.close(abort=True)
        raise
    cache.close()
