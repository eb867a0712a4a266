"""The tour's answers name the choice and its value ("choice 4 (1)", not "1", which reads as
choice 1 = 0.05), and a question covers the plots that would give its answer away until it is
answered (step 2's sweep row drew the top weight at every d_k while it asked)."""

from __future__ import annotations

import json

import pytest

from engine.config import SimulationConfig
from ui.pages.tour.panel import TourPanel
from ui.pages.tour.steps import PLOT_IDS, TourError, default_tour_path, load_steps, parse_tour

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
    # H / log n and the Jacobian size of the same rows answer a top-weight question too
    assert {"entropy", "jacobian"} <= set(q.hide)


@pytest.mark.parametrize("index", QUESTION_STEPS)
def test_a_question_hides_every_plot_and_the_table(index) -> None:
    """Any plot on screen while a step asks may answer it: step 1 asks for the spread at
    d_k = 512 while the histogram printed "std 7.99 (theory 8)" at d_k = 64, and a step asking
    for the top weight showed H / log n of the same rows. So every question hides everything."""
    assert set(STEPS[index].question.hide) == {*PLOT_IDS, "results"}
    assert len(PLOT_IDS) == 6


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
    tour.answer(STEPS[index].question.answer)
    assert page.concealed() == []
    assert not any(c.sheet.isVisible() for c in page._covers.values())
    # leaving while a question waits uncovers too
    tour.go_to(_step("Scores spread"))
    assert set(page.concealed()) == {*PLOT_IDS, "results"}  # the histogram's std at d_k 64 too
    tour.leave()
    assert page.concealed() == []


def test_a_question_drops_the_outline_of_the_previous_steps_plot(window) -> None:
    """The outline marks the plot to watch; while the next step asks, that plot is the previous
    step's and outlining it points at the wrong thing (it stayed until the answer)."""
    window.show_tour()
    tour = window.tour
    index = _step("Wide scores saturate")
    tour.go_to(index - 1)
    if tour.asking:
        tour.answer(0)
    before = STEPS[index - 1].plot
    assert window.page.panels[before].highlighted
    tour.go_to(index)
    assert tour.asking
    assert not any(p.highlighted for p in window.page.panels.values())
    tour.answer(STEPS[index].question.answer)
    assert window.page.panels[STEPS[index].plot].highlighted


def test_showing_the_tour_again_resumes_at_its_step_with_that_steps_parameters(window) -> None:
    """Help > Start the guided tour after leaving it: the step it was left on, and its
    parameters again (changed meanwhile, the text contradicted the plots)."""
    window.show_tour()
    tour = window.tour
    index = _step("Small d_k")
    tour.go_to(index)
    if tour.asking:
        tour.answer(0)
    tour.leave()
    window.apply_config({"d_k": 256, "scalings": ["dk"]})
    assert window.params.config_from_widgets().d_k == 256
    window.show_tour()
    assert tour.index == index
    cfg = window.params.config_from_widgets()
    assert cfg.d_k == STEPS[index].config["d_k"] == 4
    assert list(cfg.scalings) == STEPS[index].config["scalings"]
