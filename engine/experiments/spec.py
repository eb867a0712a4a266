"""An experiment: a base training config, axes (lists of values of its fields), and the figures
and verdict to compute from the results. The grid of jobs is the product of the axes.

Torch-free (the GUI form and ``--help`` use it). Every job's config is built and validated when
the spec is constructed, so an invalid axis value is refused before anything runs, with an error
that names the axis and the value.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from engine.errors import ConfigError, quote
from engine.training.config import TrainingConfig
from engine.validate import check_choice, check_float

#: fields that are not axes: the rules are trained side by side inside every job, and where a
#: job runs is the runner's business
NOT_AXES = ("scalings", "device")
#: most jobs in one grid
JOBS_MAX = 100_000
#: figure kinds (see ``engine.experiments.figures``)
FIGURE_KINDS = ("by_rule", "vs_axis", "vs_step", "vs_length", "optimum", "lr_sensitivity")
#: verdict kinds (see ``engine.experiments.figures.verdict``)
VERDICT_KINDS = ("by_rule", "ends_of_axis", "longest_length", "transfer", "lr_sensitivity")
#: what ``vs_length`` figures and the ``longest_length`` verdict show at each evaluation length
LENGTH_METRICS = ("accuracy", "entropy_norm")


def _field_types() -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(TrainingConfig)}


def axis_fields() -> tuple[str, ...]:
    """Fields of the training config that may be an axis (numbers, choices, switches)."""
    return tuple(name for name, typ in _field_types().items()
                 if name not in NOT_AXES and typ in ("int", "float", "str", "bool"))


def parse_value(field_name: str, text: str) -> Any:
    """One axis value typed as its field (from the command line or a form)."""
    typ = _field_types().get(field_name)
    text = text.strip()
    try:
        if typ == "int":
            as_float = float(text)
            if not as_float.is_integer():
                raise ValueError
            return int(as_float)
        if typ == "float":
            return float(text)
        if typ == "bool":
            if text.lower() in ("true", "1", "yes", "on"):
                return True
            if text.lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError
    except ValueError:
        raise ConfigError("axis", f"{field_name}={text}: not a valid {typ}") from None
    return text


@dataclass(frozen=True)
class Axis:
    """One field of the training config and the values it takes (in order)."""

    field: str
    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        allowed = axis_fields()
        if self.field not in allowed:
            raise ConfigError("axis", f"{quote(self.field)} is not a field that can vary (one of "
                                      f"{', '.join(allowed)})")
        values = (self.values,) if isinstance(self.values, (str, int, float)) else self.values
        values = tuple(values)
        if not values:
            raise ConfigError("axis", f"{self.field}: needs at least one value")
        if len(set(values)) != len(values):
            raise ConfigError("axis", f"{self.field}: lists a value twice: "
                                      f"{quote(', '.join(map(str, values)), 80)}")
        object.__setattr__(self, "values", values)

    @classmethod
    def parse(cls, text: str) -> Axis:
        """``field=v1,v2,...`` (the CLI's ``--axis``)."""
        name, sep, rest = text.partition("=")
        if not sep or not rest.strip():
            raise ConfigError("axis", f"{quote(text)}: expected FIELD=V1,V2,...")
        name = name.strip().replace("-", "_")
        if name not in axis_fields():
            Axis(name, (0,))  # the same error as the constructor
        return cls(name, tuple(parse_value(name, v) for v in rest.split(",") if v.strip()))


@dataclass(frozen=True)
class FigureSpec:
    """What to draw from the results (data, not code; see ``engine.experiments.figures``).

    ``y``: a per-rule result (``success``, ``steps_to_target``, ``final_loss``, ...) or a
    metrics.csv column at a step (``logit_std@0``, ``entropy_norm_mean@end``) for ``by_rule`` and
    ``vs_axis``; a metrics.csv column for ``vs_step``; ``accuracy`` or ``entropy_norm`` after
    training at each of the base config's evaluation lengths for ``vs_length``; the loss whose
    learning-rate sensitivity each rule gets (``final_loss``) for ``lr_sensitivity``, along the
    axis ``x``. ``x``: the axis drawn along x (``vs_axis``, ``optimum``), that splits the curves
    (``vs_step``) or that the sensitivity runs over (``lr_sensitivity``).
    ``panel`` (``vs_axis``): one figure per value of that axis and rule, one curve per value of
    the other axes (e.g. a panel per param, a curve per width). ``optimum``: the value of the
    axis ``over`` (e.g. lr) where y is smallest, against x (e.g. the width), one series per rule
    and value of the other axes (``engine.experiments.transfer``)."""

    kind: str
    y: str
    title: str
    x: str = ""
    y_label: str = ""
    x_log: bool = False
    y_log: bool = False
    panel: str = ""
    over: str = ""

    def __post_init__(self) -> None:
        check_choice("figures", self.kind, FIGURE_KINDS)
        if self.kind in ("vs_axis", "optimum", "lr_sensitivity") and not self.x:
            raise ConfigError("figures", f"{quote(self.title)}: a {self.kind} figure needs x (an axis)")
        if self.kind == "optimum" and not self.over:
            raise ConfigError("figures", f"{quote(self.title)}: an optimum figure needs over (an axis)")
        if self.panel and self.kind != "vs_axis":
            raise ConfigError("figures", f"{quote(self.title)}: panel is for vs_axis figures")
        if self.kind == "vs_length":
            check_choice("figures", self.y, LENGTH_METRICS)


@dataclass(frozen=True)
class VerdictSpec:
    """The verdict line: ``metric`` per rule over all jobs (``by_rule``), at the first and last
    value of the axis ``over`` (``ends_of_axis``), or (``accuracy`` or ``entropy_norm``) at the
    longest evaluation length after training (``longest_length``), or the learning-rate
    sensitivity of ``metric`` along ``over`` with each rule judged against the first one
    (``lr_sensitivity``, engine.experiments.sensitivity), each with its uncertainty; or
    (``transfer``) the value of ``over`` (e.g. lr) where ``metric`` is smallest, at the first
    and last value of the axis ``width``, and how far it moves, per rule and value of the other
    axes (``engine.experiments.transfer``).
    ``at`` restricts it to the jobs at some axis values (e.g. one learning rate, where pooling all
    of them would let the largest dominate); given as a mapping, kept as (axis, value) pairs."""

    kind: str = "by_rule"
    metric: str = "success"
    over: str = ""
    at: tuple[tuple[str, Any], ...] = ()
    width: str = ""

    def __post_init__(self) -> None:
        check_choice("verdict", self.kind, VERDICT_KINDS)
        if self.kind == "transfer" and not (self.over and self.width):
            raise ConfigError("verdict", "transfer needs over (e.g. lr) and width (an axis)")
        at = self.at.items() if isinstance(self.at, dict) else self.at
        try:
            pairs = tuple((str(k), v) for k, v in at)
        except (TypeError, ValueError):
            raise ConfigError("verdict", f"at must map axes to one value each, got {quote(self.at)}"
                              ) from None
        object.__setattr__(self, "at", pairs)
        if self.kind in ("ends_of_axis", "lr_sensitivity") and not self.over:
            raise ConfigError("verdict", f"{self.kind} needs over (an axis)")
        if self.kind == "longest_length":
            check_choice("verdict", self.metric, LENGTH_METRICS)


@dataclass(frozen=True)
class Job:
    """One point of the grid: its index, a stable key (the axis values), its config."""

    index: int
    key: str
    values: dict[str, Any]
    config: TrainingConfig


def job_key(values: dict[str, Any]) -> str:
    return ",".join(f"{k}={v!r}" for k, v in values.items()) or "base"


@dataclass(frozen=True)
class ExperimentSpec:
    """A base config, its axes, the success target, and the figures and verdict to compute."""

    name: str
    base: TrainingConfig
    axes: tuple[Axis, ...] = ()
    title: str = ""
    description: str = ""
    #: a run reaches the target when its training accuracy at a log step is at least this
    target: float = 0.9
    figures: tuple[FigureSpec, ...] = ()
    verdict: VerdictSpec = field(default_factory=VerdictSpec)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("name", "an experiment needs a name")
        if not isinstance(self.base, TrainingConfig):
            raise ConfigError("base", "must be a TrainingConfig")
        axes = tuple(self.axes)
        names = [a.field for a in axes]
        if len(set(names)) != len(names):
            raise ConfigError("axis", f"an axis is given twice: {', '.join(names)}")
        object.__setattr__(self, "axes", axes)
        object.__setattr__(self, "figures", tuple(self.figures))
        object.__setattr__(self, "target", check_float("target", self.target, 0.0, 1.0,
                                                       lo_open=True))
        n = math.prod(len(a.values) for a in axes)
        if n > JOBS_MAX:
            raise ConfigError("axis", f"the grid has {n:,} jobs, more than {JOBS_MAX:,}")
        for fig in self.figures:
            for key in ("x", "panel", "over"):
                name = getattr(fig, key)
                if name and name not in names:
                    raise ConfigError("figures", f"{quote(fig.title)}: {key}={quote(name)} is not "
                                                 "an axis")
        if not self.base.eval_lengths and (
                any(f.kind == "vs_length" for f in self.figures)
                or self.verdict.kind == "longest_length"):
            raise ConfigError("eval_lengths", "a vs_length figure or a longest_length verdict "
                                              "needs evaluation lengths in the base config")
        for key in ("over", "width"):
            name = getattr(self.verdict, key)
            if name and name not in names:
                raise ConfigError("verdict", f"{key}={quote(name)} is not an axis")
        for name, value in self.verdict.at:
            axis = next((a for a in axes if a.field == name), None)
            if axis is None or name == self.verdict.over:
                raise ConfigError("verdict", f"at: {quote(name)} is not an axis other than over")
            if value not in axis.values:
                raise ConfigError("verdict", f"at: {name}={quote(value)} is not one of the axis's "
                                             f"values {list(axis.values)}")
        for axis in axes:  # each value alone first: the error names that value
            for v in axis.values:
                try:
                    self.base.replace(**{axis.field: v})
                except ConfigError as exc:
                    raise ConfigError("axis", f"{axis.field}={quote(v)}: {exc.message}") from None
                except TypeError:
                    raise ConfigError("axis", f"{axis.field}={quote(v)}: wrong type") from None
        object.__setattr__(self, "_jobs", tuple(self._build_jobs()))

    def _build_jobs(self) -> list[Job]:
        jobs = []
        for index, combo in enumerate(itertools.product(*(a.values for a in self.axes))):
            values = {a.field: v for a, v in zip(self.axes, combo)}
            try:
                cfg = self.base.replace(**values, **self._mup_base_width(values))
            except ConfigError as exc:
                raise ConfigError("axis", f"{job_key(values)}: {exc.field}: {exc.message}") from None
            jobs.append(Job(index, job_key(values), values, cfg))
        return jobs

    def _mup_base_width(self, values: dict[str, Any]) -> dict[str, int]:
        """muP's base width, where the grid leaves it open (0): the narrowest value of the width
        axis, for the jobs that run under mup (the sp jobs' configs stay as they were)."""
        param = values.get("param", self.base.param)
        width_field = values.get("width_axis", self.base.width_axis)
        widths = next((a.values for a in self.axes if a.field == width_field), None)
        if param != "mup" or self.base.base_width or "base_width" in values or not widths:
            return {}
        return {"base_width": min(widths)}

    def jobs(self) -> list[Job]:
        """The grid: the product of the axes (the last axis varies fastest)."""
        return list(self._jobs)  # type: ignore[attr-defined]

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.field for a in self.axes)

    @property
    def rules(self) -> tuple[str, ...]:
        return self.base.scalings

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict; ``from_dict`` rebuilds the same spec (the same jobs)."""
        return {"name": self.name, "title": self.title, "description": self.description,
                "base": self.base.to_dict(),
                "axes": {a.field: list(a.values) for a in self.axes},
                "target": self.target,
                "figures": [dataclasses.asdict(f) for f in self.figures],
                "verdict": dataclasses.asdict(self.verdict)}

    @classmethod
    def from_dict(cls, data: Any) -> ExperimentSpec:
        """From ``to_dict``'s output (experiment.json) or a built-in experiment file, where
        ``preset`` names the training preset that ``base`` (then a few overrides) starts from.
        The structure and types are checked first (``spec_schema``): an error names the field
        path (``base.lr``, ``axes.seed[3]``, ``figures[1].kind``)."""
        if not isinstance(data, dict):
            raise ConfigError("experiment", f"must be a mapping, got {type(data).__name__}")
        data = spec_schema().check(data)
        base_data = dict(data.get("base") or {})
        if "preset" in data:
            from engine.training.presets import preset

            start = preset(data["preset"]).config.to_dict()
            start.update(base_data)
            base_data = start
        try:
            base = TrainingConfig.from_dict(base_data)
        except ConfigError as exc:
            raise ConfigError(f"base.{exc.field}", exc.message) from None
        figures = tuple(FigureSpec(**f) for f in data.get("figures") or ())
        verdict = VerdictSpec(**(data.get("verdict") or {}))
        return cls(name=data.get("name", "experiment"), base=base,
                   axes=tuple(Axis(k, tuple(v) if isinstance(v, list) else v)
                              for k, v in (data.get("axes") or {}).items()),
                   title=data.get("title", ""), description=data.get("description", ""),
                   target=data.get("target", 0.9), figures=figures, verdict=verdict)


def spec_schema() -> Any:
    """The structure of an experiment dict (experiment.json's "experiment", a built-in file, a
    claim's "spec"): types and sizes only; the dataclasses check the values."""
    from engine.readers.schema import (
        AnyObject,
        Boolean,
        Int,
        ListOf,
        MapOf,
        Nullable,
        Number,
        OneOf,
        Record,
        Text,
        dataclass_schema,
    )

    scalar = OneOf((Boolean(), Int(), Number(), Text(max_chars=200)),
                   what="a number, a string or true/false")
    values = OneOf((ListOf(scalar, max_items=JOBS_MAX), scalar), what="a list of values")
    pair = ListOf(scalar, max_items=2, min_items=2, what="an [axis, value] pair")
    at = OneOf((MapOf(scalar, max_items=64), ListOf(pair, max_items=64)),
               what="an object of axis: value")
    return Record({
        "name": Text(max_chars=200), "title": Text(max_chars=1000),
        "description": Text(max_chars=20_000), "preset": Text(max_chars=200),
        "base": Nullable(AnyObject()), "axes": MapOf(values, max_items=64),
        "target": Number(), "figures": ListOf(dataclass_schema(FigureSpec, label="key"),
                                              max_items=100),
        "verdict": dataclass_schema(VerdictSpec, {"at": at}, label="key"),
    }, label="experiment key")
