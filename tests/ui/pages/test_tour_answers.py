"""The tour's answers name the choice and its value ("choice 4 (1)", not "1", which reads as
choice 1 = 0.05), and a question covers the plots that would give its answer away until it is
answered (step 2's sweep row drew the top weight at every d_k while it asked)."""

from __future__ import annotations

import json

import pytest

from engine.config import SimulationConfig
from ui.pages.tour.panel import TourPanel
from ui.pages.tour.steps import TourError, default_tour_path, load_steps, parse_tour

STEPS = load_steps()
QUESTION_STEPS = [i for i, s in enumerate(STEPS) if s.question is not None]
#: the plot that draws each statistic the questions measure (for the current d_k)
PLOT_OF = {"top_weight": "top_weight", "saturated_frac": "top_weight", "entropy_norm": "entropy",
           "jacobian_fro": "jacobian", "jacobian_max_abs": "jacobian", "logit_std": "scores",
           "raw_std": "scores", "target_weight": "sweep"}


@pytest.fixture
def tour(qtbot):
    w = TourPanel()
    qtbot.addWidget(w)
    w.resize(420, 480)
    w.show()
    return w


def _step(title_part: str) -> int:
    return next(i for i, s in enumerate(STEPS) if title_part in s.title)


#: the issue's case: the right choice is number 4, whose value (1) is also a choice's number
FLAT = {"title": "Dividing by d_k flattens attention", "text": "t", "plot": "entropy",
        "config": {"d_k": 512, "scalings": ["sqrt", "dk"]},
        "question": {"ask": "H / log n will be about …", "choices": [0.05, 0.5, 0.83, 1.0],
                     "answer": 3, "measure": {"rule": "dk", "statistic": "entropy_norm"}}}


def test_the_answer_names_the_choice_number_and_its_value(tour) -> None:
    tour.set_steps(parse_tour({"steps": [FLAT]}))
    tour.start(0)
    tour.next()  # reveal without choosing
    text = tour.question.result.text()
    assert "The answer: <b>choice 4 (1)</b>." in text
    assert "The answer: <b>1</b>" not in text
    assert tour.question.buttons[3].text() == "✔ 4: 1"


def test_a_wrong_choice_names_both_choices(tour) -> None:
    tour.set_steps(parse_tour({"steps": [FLAT]}))
    tour.start(0)
    tour.answer(0)
    text = tour.question.result.text()
    assert "it is <b>choice 4 (1)</b> (you chose choice 1 (0.05))" in text


@pytest.mark.parametrize("index", QUESTION_STEPS)
def test_every_question_reveals_its_choice_number(tour, index) -> None:
    q = STEPS[index].question
    tour.start(index)
    tour.answer(q.answer)
    label = q.correct.label
    named = f"choice {q.answer + 1}: {label}" if "(" in label else f"choice {q.answer + 1} ({label})"
    assert f"Right: <b>{named}</b>" in tour.question.result.text()


def _shown_while_asking(index: int) -> tuple[dict, str]:
    """The parameters and sweep axis on screen while step ``index`` asks: the step before it
    (the app's defaults before the first)."""
    if index == 0:
        return SimulationConfig().to_dict(), "d_k"
    before = STEPS[index - 1]
    return before.config, before.sweep_axis


@pytest.mark.parametrize("index", QUESTION_STEPS)
def test_each_question_hides_the_plots_that_show_its_answer(index) -> None:
    """While a step asks, the plots show the step before it. Where that run already holds the
    measured rule under the question's conditions, the sweep along d_k draws the answer (at the
    question's d_k) and, at the same d_k, so do the statistic's own plot and the results table:
    the question must hide them."""
    step, q = STEPS[index], STEPS[index].question
    shown, axis = _shown_while_asking(index)
    science = set(step.config) - {"scalings", "d_k"}
    same_conditions = all(shown.get(k) == step.config[k] for k in science)
    has_rule = q.rule == "raw" or q.rule in shown.get("scalings", ())
    required = set()
    if same_conditions and has_rule:
        if axis == "d_k":
            required.add("sweep")
        if shown.get("d_k") == step.config["d_k"]:
            required |= {PLOT_OF[q.statistic], "results"}
    assert required <= set(q.hide), (step.title, required, q.hide)


def test_step_two_hides_the_sweep_row_and_the_top_weight() -> None:
    q = STEPS[_step("Wide scores saturate")].question
    assert {"sweep", "top_weight", "results"} <= set(q.hide)


def test_hide_names_only_known_plots() -> None:
    good = json.loads(default_tour_path().read_text(encoding="utf-8"))
    step = next(s for s in good["steps"] if "question" in s)
    for bad in (["curtains"], "sweep"):
        with pytest.raises(TourError, match="hide"):
            parse_tour({"base": good["base"], "steps": [dict(step, question=dict(
                step["question"], hide=bad))]})


def test_the_panel_asks_to_cover_while_asking_and_uncover_on_the_answer(tour) -> None:
    seen = []
    tour.conceal.connect(seen.append)
    index = _step("Wide scores saturate")
    tour.start(index)
    assert seen[-1] == list(STEPS[index].question.hide)
    tour.answer(0)
    assert seen[-1] == []
    tour.start(_step("Wide scores saturate"))  # answered once: no question, nothing covered
    assert seen[-1] == []


def test_the_window_covers_the_plots_until_the_answer(window, qtbot) -> None:
    window.show_tour()
    tour = window.tour
    index = _step("Wide scores saturate")
    tour.go_to(index)
    page = window.page
    hidden = set(STEPS[index].question.hide)
    assert set(page.concealed()) == hidden
    for pid in hidden - {"results"}:
        cover = page._covers[pid]
        glw = page.panels[pid].glw
        assert cover.sheet.isVisible() and cover.sheet.geometry() == glw.geometry()
        assert "answer" in cover.sheet.text()
    assert page._covers["results"].sheet.geometry() == page.results.geometry()
    assert "scores" not in page.concealed()  # what does not give it away stays
    tour.answer(STEPS[index].question.answer)
    assert page.concealed() == []
    assert not any(c.sheet.isVisible() for c in page._covers.values())
    # leaving while a question waits uncovers too
    tour.go_to(_step("Scores spread"))
    assert page.concealed() == ["sweep"]
    tour.leave()
    assert page.concealed() == []
