"""Tour steps are data (resources/tour.json); this module loads and checks them, with no Qt.

A step's effective parameters are the file's ``base`` plus the step's ``config``, so every step
fully determines the science parameters and nothing leaks from the previous step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import quote

#: the plot ids a step may point at (the main window maps them to its plots)
PLOT_IDS = ("scores", "weights", "top_weight", "entropy", "jacobian", "sweep")

_STEP_KEYS = frozenset({"title", "text", "config", "plot", "inspector", "sweep_axis", "question"})
_QUESTION_KEYS = frozenset({"ask", "choices", "answer", "measure", "explain", "hide"})
#: what a question may cover until it is answered: its plots, and the results table
HIDE_IDS = (*PLOT_IDS, "results")
#: what a question's answer is measured as: a rule's statistic of the final simulation snapshot
#: (engine.simulate.RuleResult) or, with rule "raw", the spread of the raw scores q·k
STATISTICS = ("top_weight", "saturated_frac", "entropy_norm", "jacobian_fro", "jacobian_max_abs",
              "logit_std", "target_weight", "sink_weight", "key_mass")
RAW_STATISTICS = ("raw_std",)
#: what a step's sweep runs along (the Simulation page's switch)
SWEEP_AXES = ("d_k", "n_keys")
#: links in a step's Markdown text: [text](plot:ID) outlines a plot, [text](step:WORD) goes to the
#: one step whose title contains WORD (by word, so inserting steps breaks no link)
LINK = re.compile(r"\]\((plot|step):([^)\s]+)\)")


def find_step(steps: Sequence[TourStep], word: str) -> list[int]:
    """Indices of the steps whose title contains ``word`` (case-insensitive)."""
    return [i for i, st in enumerate(steps) if word.lower() in st.title.lower()]


def default_tour_path() -> Path:
    from engine.bundled import resource

    return resource("tour.json")


class TourError(ValueError):
    """The tour file is malformed; the message names the step and the key."""


#: what an inspector example may set besides the scores and the scale (engine.inspect keywords)
INSPECTOR_OPTIONS = ("softcap", "sink")


@dataclass(frozen=True)
class InspectorExample:
    scores: tuple[float, ...]
    scale: float
    #: the scores as written in the tour file ("3, -2*999" stays short in the hint)
    text: str = ""
    #: the scale controls of the example: a soft-cap c, a sink logit (INSPECTOR_OPTIONS)
    options: dict[str, float] = field(default_factory=dict)

    @property
    def scores_text(self) -> str:
        return self.text or ", ".join(f"{s:g}" for s in self.scores)


@dataclass(frozen=True)
class Choice:
    label: str  #: what the button reads
    value: float  #: the number it stands for (compared with the measured value)


@dataclass(frozen=True)
class Question:
    """Asked before the step shows its plot: "at d_k = 512 the top weight will be about ...".

    The answer is not just asserted: ``measure`` names the statistic the step's own simulation
    measures, and the tests check that the answer is the choice closest to it."""

    ask: str
    choices: tuple[Choice, ...]
    answer: int  #: index into ``choices``
    rule: str  #: the rule whose statistic is measured ("raw": the raw scores)
    statistic: str
    explain: str = ""  #: said with the answer (why it comes out so)
    #: plots (and "results", the table) covered while the question waits: by default all of them,
    #: since any of them may give the answer away (the histogram's std at another d_k, the entropy
    #: beside a hidden top weight, the previous step's plots still on screen)
    hide: tuple[str, ...] = HIDE_IDS

    @property
    def correct(self) -> Choice:
        return self.choices[self.answer]

    def choice_text(self, index: int) -> str:
        """"choice 4 (1)": the number on its button and its value, never the value alone (which
        reads like a choice number); "choice 4: 0.95 (one-hot)" when the label has brackets."""
        label = self.choices[index].label
        return f"choice {index + 1}: {label}" if "(" in label else f"choice {index + 1} ({label})"

    def measured(self, snapshot: Any) -> tuple[float, float] | None:
        """(mean, standard error) of the measured statistic in a simulation snapshot; None if
        the snapshot does not have it (another rule set, or no snapshot yet)."""
        if snapshot is None:
            return None
        if self.rule == "raw":
            est = getattr(snapshot, self.statistic, None)
        else:
            result = getattr(snapshot, "rules", {}).get(self.rule)
            est = getattr(result, self.statistic, None) if result is not None else None
        if est is None:
            return None
        return float(est.mean), float(est.se)

    def closest(self, value: float) -> int:
        """The index of the choice nearest to ``value``."""
        return min(range(len(self.choices)), key=lambda i: abs(self.choices[i].value - value))


@dataclass(frozen=True)
class TourStep:
    title: str
    text: str
    #: effective parameters (base + step config): partial ``SimulationConfig`` fields
    config: dict[str, Any] = field(default_factory=dict)
    plot: str = "scores"
    inspector: InspectorExample | None = None
    sweep_axis: str = "d_k"  #: the sweep runs along d_k or along n_keys (the length)
    question: Question | None = None  #: asked before the step shows its plot


#: the largest tour file read
TOUR_FILE_MAX = 2_000_000


def load_steps(path: str | Path | None = None) -> list[TourStep]:
    """Read and check a tour file; raise :class:`TourError` naming what is wrong."""
    from engine.errors import FileFormatError
    from engine.readers.json_file import read_json

    path = Path(path) if path is not None else default_tour_path()
    try:
        data = read_json(path, max_bytes=TOUR_FILE_MAX, kind="tour file")
    except FileFormatError as exc:
        raise TourError(f"cannot read tour file {exc}") from None
    try:
        return parse_tour(data)
    except TourError as exc:
        raise TourError(f"{path}: {exc}") from None


def parse_tour(data: Any) -> list[TourStep]:
    if isinstance(data, list):  # a bare list of steps, no base
        data = {"steps": data}
    if not isinstance(data, Mapping):
        raise TourError("tour file must be a JSON object with 'steps'")
    base = data.get("base", {})
    if not isinstance(base, Mapping):
        raise TourError("'base' must be an object of parameters")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, Sequence) or isinstance(raw_steps, str) or not raw_steps:
        raise TourError("'steps' must be a non-empty list")
    steps = [_parse_step(i, raw, base) for i, raw in enumerate(raw_steps, start=1)]
    _check_links(steps)
    return steps


def _check_links(steps: list[TourStep]) -> None:
    """Every link of every text names a known plot, or a word found in exactly one title."""
    for number, step in enumerate(steps, start=1):
        for kind, target in LINK.findall(step.text):
            if kind == "plot" and target not in PLOT_IDS:
                raise TourError(f"step {number}: link to plot {target!r}: not one of "
                                f"{', '.join(PLOT_IDS)}")
            if kind == "step" and len(find_step(steps, target)) != 1:
                raise TourError(f"step {number}: link to step {target!r}: "
                                f"{len(find_step(steps, target))} titles contain it, not 1")


def _refuse_unknown_keys(where: str, raw: Mapping[str, Any], known: Any) -> None:
    """A typo in tour.json is named, never silently ignored."""
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise TourError(f"{where}: unknown key {quote(unknown[0])} (known: {', '.join(sorted(known))})")


def _parse_step(number: int, raw: Any, base: Mapping[str, Any]) -> TourStep:
    where = f"step {number}"
    if not isinstance(raw, Mapping):
        raise TourError(f"{where}: must be an object")
    _refuse_unknown_keys(where, raw, _STEP_KEYS)
    for key in ("title", "text"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise TourError(f"{where}: {quote(key)} must be a non-empty string")
    config = raw.get("config", {})
    if not isinstance(config, Mapping):
        raise TourError(f"{where}: 'config' must be an object")
    _check_config(where, {**base, **config})
    plot = raw.get("plot")
    if plot not in PLOT_IDS:
        raise TourError(f"{where}: 'plot' must be one of {', '.join(PLOT_IDS)}; got {quote(plot)}")
    axis = raw.get("sweep_axis", "d_k")
    if axis not in SWEEP_AXES:
        raise TourError(f"{where}: 'sweep_axis' must be one of {', '.join(SWEEP_AXES)}; got {quote(axis)}")
    return TourStep(
        title=raw["title"].strip(),
        text=raw["text"].strip(),
        config={**base, **config},
        plot=plot,
        inspector=_parse_example(where, raw.get("inspector")),
        sweep_axis=axis,
        question=_parse_question(where, raw.get("question"), {**base, **config}),
    )


def _check_config(where: str, config: dict[str, Any]) -> None:
    """A step's parameters are valid simulation parameters (their types and ranges)."""
    from engine.config import SimulationConfig
    from engine.errors import ConfigError

    try:
        SimulationConfig.from_dict(config)
    except ConfigError as exc:
        raise TourError(f"{where}: config.{exc.field}: {exc.message}") from None


def _parse_question(where: str, raw: Any, config: Mapping[str, Any]) -> Question | None:
    if raw is None:
        return None
    where = f"{where}: question"
    if not isinstance(raw, Mapping):
        raise TourError(f"{where} must be an object with 'ask', 'choices', 'answer', 'measure'")
    _refuse_unknown_keys(where, raw, _QUESTION_KEYS)
    ask = raw.get("ask")
    if not isinstance(ask, str) or not ask.strip():
        raise TourError(f"{where}: 'ask' must be a non-empty string")
    raw_choices = raw.get("choices")
    if not isinstance(raw_choices, Sequence) or isinstance(raw_choices, str) \
            or not 2 <= len(raw_choices) <= 5:
        raise TourError(f"{where}: 'choices' must be a list of 2 to 5 choices")
    choices = []
    for c in raw_choices:
        if _is_finite_number(c):
            c = {"label": f"{c:g}", "value": c}
        if not isinstance(c, Mapping) or not isinstance(c.get("label"), str) \
                or not _is_finite_number(c.get("value")):
            raise TourError(f"{where}: each choice must be a number or {{'label': text, 'value': number}}")
        choices.append(Choice(c["label"].strip(), float(c["value"])))
    if len({c.value for c in choices}) != len(choices):
        raise TourError(f"{where}: two choices have the same value")
    answer = raw.get("answer")
    if not isinstance(answer, int) or isinstance(answer, bool) or not 0 <= answer < len(choices):
        raise TourError(f"{where}: 'answer' must be the index of a choice (0..{len(choices) - 1})")
    measure = raw.get("measure")
    if not isinstance(measure, Mapping) or set(measure) != {"rule", "statistic"}:
        raise TourError(f"{where}: 'measure' must be {{'rule': ..., 'statistic': ...}}")
    rule, stat = measure["rule"], measure["statistic"]
    if rule == "raw":
        if stat not in RAW_STATISTICS:
            raise TourError(f"{where}: with rule 'raw' the statistic must be one of {', '.join(RAW_STATISTICS)}")
    else:
        if rule not in config.get("scalings", ()):
            raise TourError(f"{where}: measured rule {quote(rule)} is not among the step's scalings")
        if stat not in STATISTICS:
            raise TourError(f"{where}: 'statistic' must be one of {', '.join(STATISTICS)}; got {quote(stat)}")
    explain = raw.get("explain", "")
    if not isinstance(explain, str):
        raise TourError(f"{where}: 'explain' must be a string")
    hide = raw.get("hide", list(HIDE_IDS))
    if not isinstance(hide, Sequence) or isinstance(hide, str) or any(h not in HIDE_IDS for h in hide):
        raise TourError(f"{where}: 'hide' must be a list of {', '.join(HIDE_IDS)}")
    return Question(ask.strip(), tuple(choices), answer, rule, stat, explain.strip(), tuple(hide))


def _parse_example(where: str, raw: Any) -> InspectorExample | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) - {"scores", "scale", *INSPECTOR_OPTIONS}:
        raise TourError(f"{where}: 'inspector' must be {{'scores': [...], 'scale': number}} "
                        f"(optionally {', '.join(INSPECTOR_OPTIONS)})")
    options = {k: raw[k] for k in INSPECTOR_OPTIONS if k in raw}
    if not all(_is_finite_number(v) for v in options.values()) or options.get("softcap", 1) <= 0:
        raise TourError(f"{where}: inspector 'softcap' must be a positive number and 'sink' a "
                        "finite number")
    scores = raw.get("scores")
    scale = raw.get("scale", 1.0)
    text = ""
    if isinstance(scores, str):  # "3, -2*999": the inspector's own notation for repeats
        from engine.errors import ConfigError
        from engine.inspect import parse_score_list

        text = scores.strip()
        try:
            scores = parse_score_list(text)
        except ConfigError as exc:
            raise TourError(f"{where}: inspector 'scores': {exc.message}") from None
    if (not isinstance(scores, Sequence) or isinstance(scores, str) or len(scores) < 2
            or not all(_is_finite_number(s) for s in scores)):
        raise TourError(f"{where}: inspector 'scores' must be a list of at least 2 finite numbers")
    if not _is_finite_number(scale) or scale <= 0:
        raise TourError(f"{where}: inspector 'scale' must be a positive number")
    return InspectorExample(tuple(float(s) for s in scores), float(scale), text,
                            {k: float(v) for k, v in options.items()})


def _is_finite_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
