"""The guided tour: its data must validate and say true things; the panel emits the right signals."""

from __future__ import annotations

import json
import math

import pytest
from PySide6.QtCore import Qt

from engine.config import SimulationConfig
from engine.inspect import inspect_scores
from engine.rules import RULE_REGISTRY
from ui.pages.tour.panel import TourPanel
from ui.pages.tour.steps import PLOT_IDS, TourError, default_tour_path, load_steps, parse_tour

STEPS = load_steps()
DEFAULTS = SimulationConfig().to_dict()


def step_with(title_part: str):
    matches = [s for s in STEPS if title_part.lower() in s.title.lower()]
    assert len(matches) == 1, f"no single step titled like {title_part!r}"
    return matches[0]


# -- the data --------------------------------------------------------------------------------
def test_tour_file_is_found_and_has_the_required_steps() -> None:
    assert default_tour_path().is_file()
    assert len(STEPS) >= 8
    assert len({s.title for s in STEPS}) == len(STEPS)


@pytest.mark.parametrize("index", range(len(STEPS)))
def test_every_step_config_validates(index) -> None:
    step = STEPS[index]
    cfg = SimulationConfig.from_dict({**DEFAULTS, **step.config})
    for key, value in step.config.items():  # nothing silently coerced away
        got = getattr(cfg, key)
        assert (list(got) if isinstance(got, tuple) else got) == value


def test_every_plot_id_is_known() -> None:
    assert {s.plot for s in STEPS} <= set(PLOT_IDS)
    assert len(PLOT_IDS) == 6


def test_every_step_sets_the_science_parameters_fully() -> None:
    """Each step starts from the same base, so no setting leaks from the previous step."""
    keys = {frozenset(s.config) for s in STEPS}
    assert len(keys) == 1
    assert {"d_k", "n_keys", "scalings", "correlation", "q_std", "k_std"} <= next(iter(keys))
    assert not {"trials", "seed", "backend", "device"} & next(iter(keys))


def test_the_science_the_texts_claim() -> None:
    spread = step_with("spread")
    assert spread.config["scalings"] == ["none"]
    assert f"{math.sqrt(spread.config['d_k']):.1f}" in spread.text  # std of q.k = sqrt(d_k)

    saturate = step_with("saturate")
    assert "vanish" in saturate.text.lower()
    assert saturate.inspector is not None
    r = inspect_scores(saturate.inspector.scores, saturate.inspector.scale)
    assert r.weights.max() > 0.99 and r.jacobian_max_abs < 0.25 / 100
    assert f"{r.jacobian_max_abs:.1e}".replace("e-04", "·10⁻⁴") in saturate.text

    flatten = step_with("dividing by d_k")
    assert "dk" in flatten.config["scalings"]
    assert f"{1 / math.sqrt(flatten.config['d_k']):.3f}" in flatten.text  # std of q.k/d_k

    muP = step_with("correlated")
    rho, d_k = muP.config["correlation"], muP.config["d_k"]
    assert rho > 0 and f"{rho * d_k:g}" in muP.text and f"{rho * math.sqrt(d_k):.0f}" in muP.text

    twice = step_with("scaling twice")
    d_k = twice.config["d_k"]
    assert RULE_REGISTRY["dk"].divisor(d_k, 1.0) == pytest.approx(
        RULE_REGISTRY["sqrt"].divisor(d_k, 1.0) ** 2)  # scaling twice IS the dk rule
    assert "dk" in twice.config["scalings"]

    after = step_with("after the softmax")
    assert after.inspector is not None
    raw = inspect_scores(after.inspector.scores, after.inspector.scale)
    fixed = inspect_scores(after.inspector.scores, 8)
    assert f"{raw.weights.max():.4f}" in after.text
    assert f"{fixed.weights.max():.2f}" in after.text and f"{fixed.jacobian_max_abs:.2f}" in after.text

    small = step_with("small d_k")
    assert small.config["d_k"] <= 8 and small.plot == "sweep"
    assert f"{math.sqrt(small.config['d_k']):g}" in small.text

    qk = step_with("qk-norm and cosine")
    assert {"qknorm", "cosine"} <= set(qk.config["scalings"])
    var = (qk.config["q_std"] * qk.config["k_std"]) ** 2  # Var(q.k / sqrt(d_k)) = sq^2 sk^2
    assert f"= {var:g}" in qk.text


    # cosine logits have std about 1/(T sqrt(d_k)); T = 1/sqrt(d_k) gives unit spread
    assert f"{1 / qk.config['d_k'] ** 0.5:.3f}" in qk.text

    align = step_with("does not fix alignment")
    rho, d_k = align.config["correlation"], align.config["d_k"]
    assert {"sqrt", "qknorm"} <= set(align.config["scalings"]) and rho > 0
    assert f"{rho * math.sqrt(d_k):.0f}" in align.text and f"{math.sqrt(d_k):.1f}" in align.text

    means = step_with("means")
    assert means.config["k_mean"] != 0 and means.config["q_mean"] == 0  # the key mean cancels
    assert "row std" in means.text

    chain = step_with("link by link")
    assert "(1/c) Σ_j (J g)_j k_j" in chain.text and chain.plot == "jacobian"
    assert {"none", "sqrt", "dk"} <= set(chain.config["scalings"])


def test_the_order_and_the_interview_questions() -> None:
    """Cause, effect, fix: spread, saturation, then the fix by sqrt(d_k), the 1/d_k that is too
    much and the bug that computes it (scaling twice) right after it; the gradient in depth, with
    its 1/d_k figures, only after both; the interview answer closes the tour; the three length
    steps follow as an optional appendix; the questions an interviewer asks are all asked."""
    titles = [s.title for s in STEPS]
    order = [titles.index(step_with(w).title) for w in
             ("spread like", "saturate the softmax", "restores unit", "dividing by d_k",
              "scaling twice", "link by link")]
    assert order == list(range(order[0], order[0] + 6)), order
    flat = titles.index(step_with("dividing by d_k").title)
    assert titles[flat + 1] == step_with("scaling twice").title
    interview = titles.index(step_with("say it in the interview").title)
    length = [i for i, s in enumerate(STEPS) if s.sweep_axis == "n_keys"]
    assert len(length) == 3 and min(length) > interview
    # whatever follows the interview answer is the optional appendix, and says so
    assert interview < len(STEPS) - 1
    assert all(s.title.startswith("Beyond the question") for s in STEPS[interview + 1:])
    asks = " ".join(s.question.ask for s in STEPS if s.question is not None).lower()
    for topic in ("square root and not d_k", "vanishing or exploding", "d_k or d_model",
                  "keys have a mean"):
        assert topic in asks, topic


def test_the_interview_step_links_every_claim_to_a_plot_or_step() -> None:
    from ui.pages.tour.steps import LINK, find_step

    text = step_with("say it in the interview").text
    for level in ("**Weak:**", "**Strong:**", "**Staff:**", "**Mistakes to avoid:**"):
        assert level in text
    links = LINK.findall(text)
    assert {t for k, t in links if k == "plot"} == set(PLOT_IDS) - {"weights"}
    for kind, target in links:
        if kind == "step":
            assert len(find_step(STEPS, target)) == 1, target


def test_bad_tour_data_is_refused_with_a_message(tmp_path) -> None:
    good = json.loads(default_tour_path().read_text(encoding="utf-8"))
    bad = dict(good, steps=[dict(good["steps"][0], plot="histogram")])
    with pytest.raises(TourError, match=r"step 1.*plot"):
        parse_tour(bad)
    with pytest.raises(TourError, match="unknown key"):
        parse_tour({"steps": [dict(good["steps"][0], colour="red")]})
    with pytest.raises(TourError, match="inspector"):
        parse_tour({"steps": [dict(good["steps"][0], inspector={"scores": [1], "scale": 1})]})
    first = good["steps"][0]
    with pytest.raises(TourError, match="link to plot 'histogram'"):
        parse_tour({"steps": [dict(first, text="see [it](plot:histogram)")]})
    with pytest.raises(TourError, match="link to step 'nowhere': 0 titles"):
        parse_tour({"steps": [dict(first, text="see [it](step:nowhere)")]})


# -- the panel -------------------------------------------------------------------------------
@pytest.fixture
def panel(qtbot):
    """A tour that does not ask its questions (the navigation tests); see ``asking_panel``."""
    w = TourPanel(ask=False)
    qtbot.addWidget(w)
    w.resize(420, 380)
    w.show()
    return w


class Recorder:
    def __init__(self, panel: TourPanel) -> None:
        self.events: list[tuple] = []
        panel.apply_config.connect(lambda d: self.events.append(("config", d)))
        panel.highlight.connect(lambda p: self.events.append(("highlight", p)))
        panel.show_inspector.connect(lambda s, c: self.events.append(("inspector", s, c)))
        panel.finished.connect(lambda: self.events.append(("finished",)))

    def take(self) -> list[tuple]:
        out, self.events = self.events, []
        return out


def expected_events(index: int) -> list[tuple]:
    step = STEPS[index]
    events = [("config", step.config), ("highlight", step.plot)]
    if step.inspector is not None:
        events.append(("inspector", list(step.inspector.scores), step.inspector.scale))
    return events


def test_start_next_back_emit_the_step_payloads(panel) -> None:
    rec = Recorder(panel)
    panel.start()
    assert rec.take() == expected_events(0)
    panel.next_button.click()
    assert panel.index == 1
    assert rec.take() == expected_events(1)
    assert STEPS[1].inspector is not None  # the saturation step opens the inspector
    panel.back_button.click()
    assert rec.take() == expected_events(0)


def test_button_states_on_first_and_last_step(panel) -> None:
    rec = Recorder(panel)
    panel.start()
    assert not panel.back_button.isEnabled() and panel.next_button.isEnabled()
    panel.back()
    assert panel.index == 0
    rec.take()
    panel.go_to(len(STEPS) - 1)
    assert panel.back_button.isEnabled() and not panel.next_button.isEnabled()
    assert rec.take() == expected_events(len(STEPS) - 1)
    panel.next()  # nothing past the end
    assert panel.index == len(STEPS) - 1 and rec.take() == []
    assert f"Step {len(STEPS)} of {len(STEPS)}" in panel._counter.text()


def test_leave_emits_finished_and_keeps_the_step(panel) -> None:
    rec = Recorder(panel)
    panel.start(2)
    rec.take()
    panel.leave_button.click()
    assert rec.take() == [("finished",)]
    assert panel.index == 2


def test_arrow_keys_navigate(panel, qtbot) -> None:
    panel.start()
    panel.setFocus()
    qtbot.keyClick(panel, Qt.Key.Key_Right)
    qtbot.keyClick(panel, Qt.Key.Key_Right)
    assert panel.index == 2
    qtbot.keyClick(panel, Qt.Key.Key_Left)
    assert panel.index == 1


def test_a_broken_file_shows_an_error_instead_of_raising(qtbot, tmp_path) -> None:
    path = tmp_path / "tour.json"
    path.write_text("{not json", encoding="utf-8")
    w = TourPanel(path=path)
    qtbot.addWidget(w)
    assert w.steps == [] and w.index == -1
    assert "could not be loaded" in w._title.text()
    assert not w.next_button.isEnabled() and not w.back_button.isEnabled()
    w.start()  # no steps: nothing happens


def test_render_offscreen(panel, tmp_path) -> None:
    panel.start(1)
    path = tmp_path / "tour.png"
    assert panel.grab().save(str(path))
    assert path.stat().st_size > 1000


def test_plot_ids_match_the_main_window_panels() -> None:
    from ui.plots import PLOT_IDS as PANEL_IDS

    assert set(PLOT_IDS) == set(PANEL_IDS)


def test_the_inspector_link_opens_the_step_example(panel) -> None:
    opened: list[tuple] = []
    panel.open_inspector.connect(lambda s, c: opened.append((s, c)))
    with_example = next(i for i, s in enumerate(STEPS) if s.inspector is not None)
    without = next(i for i, s in enumerate(STEPS) if s.inspector is None)
    panel.go_to(without)
    assert "href" not in panel._plot_hint.text() and not panel.open_example()
    panel.go_to(with_example)
    assert 'href="inspector"' in panel._plot_hint.text()
    panel._plot_hint.linkActivated.emit("inspector")  # what a click on the link does
    example = STEPS[with_example].inspector
    assert opened == [(list(example.scores), example.scale)]


def test_links_in_a_step_outline_a_plot_or_go_to_a_step(panel) -> None:
    rec = Recorder(panel)
    interview = STEPS.index(step_with("say it in the interview"))
    panel.start(interview)
    rec.take()
    assert panel.follow_link("plot:entropy") and rec.take() == [("highlight", "entropy")]
    assert panel.index == interview  # a plot link stays on the step
    panel._text.linkActivated.emit("step:means")  # what a click on the link does
    assert panel.index == STEPS.index(step_with("means"))
    assert rec.take() == expected_events(panel.index)
    assert not panel.follow_link("plot:nothing") and not panel.follow_link("step:zzz")
    assert rec.take() == []


def test_escape_leaves_the_tour(panel, qtbot) -> None:
    rec = Recorder(panel)
    panel.start()
    rec.take()
    panel.setFocus()
    qtbot.keyClick(panel, Qt.Key.Key_Escape)
    assert rec.take() == [("finished",)]


def test_the_length_steps_claims() -> None:
    """The three length steps: their numbers follow from the formulas and the inspector."""
    from engine.theory import needle_weight

    fades = step_with("attention fades")
    assert fades.sweep_axis == "n_keys" and fades.plot == "sweep"
    for n, fmt in ((8, ".3f"), (512, ".4f"), (65_536, ".1e")):
        assert format(needle_weight(n, 1.0, 3.0), fmt) in fades.text
    keeps = step_with("log-n factor")
    assert "logn" in keeps.config["scalings"] and keeps.inspector is not None
    assert len(keeps.inspector.scores) == 1000 and keeps.inspector.scores_text == "3, -2*999"
    plain = inspect_scores(keeps.inspector.scores, keeps.inspector.scale)
    assert f"{plain.weights.max():.4f}" in keeps.text
    assert f"{inspect_scores([3] + [-2] * 9, 1).weights.max():.4f}" in keeps.text
    ss = step_with("what SSMax does")
    assert "ssmax" in ss.config["scalings"] and ss.config["ssmax_s"] == 0.43
    assert ss.inspector is not None
    as_scale = inspect_scores(ss.inspector.scores, ss.inspector.scale)
    as_rule = inspect_scores(ss.inspector.scores, ssmax_s=0.43)
    assert f"{as_rule.weights.max():.4f}" in ss.text
    assert as_scale.weights.max() == pytest.approx(as_rule.weights.max(), abs=1e-5)
    # every older step keeps its sweep along d_k
    assert sum(s.sweep_axis == "n_keys" for s in STEPS) == 3


# -- questions asked before a step shows -----------------------------------------------------
QUESTION_STEPS = [i for i, s in enumerate(STEPS) if s.question is not None]


def test_at_least_four_steps_ask_first() -> None:
    assert len(QUESTION_STEPS) >= 4


@pytest.mark.parametrize("index", QUESTION_STEPS)
def test_each_answer_is_the_choice_closest_to_what_the_engine_measures(index) -> None:
    """The right answer is computed, not asserted: run the step's own simulation and the
    answer must be the choice nearest the measured value, across its 95 % interval."""
    from engine.simulate import run_simulation

    step = STEPS[index]
    q = step.question
    snap = run_simulation(SimulationConfig.from_dict({**DEFAULTS, **step.config}))
    mean, se = q.measured(snap)
    assert math.isfinite(mean) and se >= 0
    for value in (mean - 1.96 * se, mean, mean + 1.96 * se):
        assert q.closest(value) == q.answer, (step.title, mean, se, q.correct)


def test_bad_questions_are_refused_with_a_message() -> None:
    good = json.loads(default_tour_path().read_text(encoding="utf-8"))
    step = next(s for s in good["steps"] if "question" in s)
    q = step["question"]
    for bad, match in ((dict(q, answer=9), "answer"), (dict(q, choices=[1]), "choices"),
                       (dict(q, measure={"rule": "logn", "statistic": "top_weight"}), "scalings"),
                       (dict(q, measure={"rule": q["measure"]["rule"], "statistic": "mood"}), "statistic"),
                       (dict(q, colour=1), "unknown key"), (dict(q, choices=[1, 1, 2]), "same value")):
        with pytest.raises(TourError, match=match):
            parse_tour({"base": good["base"], "steps": [dict(step, question=bad)]})


@pytest.fixture
def asking_panel(qtbot):
    w = TourPanel()
    qtbot.addWidget(w)
    w.resize(420, 480)
    w.show()
    return w


def test_a_question_step_shows_its_plot_only_after_the_answer(asking_panel) -> None:
    panel = asking_panel
    rec = Recorder(panel)
    index = QUESTION_STEPS[0]
    panel.start(index)
    assert panel.asking and rec.take() == []  # nothing shown yet
    assert panel.question.isVisible() and not panel._text.isVisible()
    assert [b.text().split(": ", 1)[1] for b in panel.question.buttons] == \
        [c.label for c in STEPS[index].question.choices]
    wrong = (STEPS[index].question.answer + 1) % len(STEPS[index].question.choices)
    panel.question.buttons[wrong].click()
    assert not panel.asking and rec.take() == expected_events(index)
    assert "Not quite" in panel.question.result.text()
    assert STEPS[index].question.correct.label in panel.question.result.text()
    assert panel._text.isVisible()
    assert not panel.answer(0)  # answered once
    panel.go_to(index)  # coming back does not ask again
    assert not panel.asking and rec.take() == expected_events(index)


def test_right_reveals_then_moves_on_and_digits_answer(asking_panel, qtbot) -> None:
    panel = asking_panel
    rec = Recorder(panel)
    first, second = QUESTION_STEPS[:2]
    panel.start(first)
    panel.setFocus()
    qtbot.keyClick(panel, Qt.Key.Key_Right)  # reveal (skipped: just the answer)
    assert panel.index == first and not panel.asking
    assert rec.take() == expected_events(first)
    assert "The answer" in panel.question.result.text()
    panel.go_to(second)
    assert panel.asking and rec.take() == []
    right = STEPS[second].question.answer
    qtbot.keyClick(panel, getattr(Qt.Key, f"Key_{right + 1}"))
    assert not panel.asking and "Right" in panel.question.result.text()
    assert rec.take() == expected_events(second)


def test_the_measured_value_is_shown_for_the_steps_own_run(asking_panel) -> None:
    from engine.simulate import run_simulation

    panel = asking_panel
    index = QUESTION_STEPS[0]
    panel.start(index)
    panel.answer(STEPS[index].question.answer)
    other = run_simulation(SimulationConfig(trials=50))  # another step's parameters: ignored
    panel.show_result(other)
    assert "Measured" not in panel.question.result.text()
    mine = run_simulation(SimulationConfig.from_dict({**DEFAULTS, **STEPS[index].config,
                                                      "trials": 200}))
    panel.show_result(mine)
    mean, _se = STEPS[index].question.measured(mine)
    assert f"{mean:.3g}" in panel.question.result.text()


def test_unchecking_ask_shows_question_steps_at_once(asking_panel) -> None:
    panel = asking_panel
    rec = Recorder(panel)
    panel.ask_check.setChecked(False)
    panel.start(QUESTION_STEPS[0])
    assert not panel.asking and rec.take() == expected_events(QUESTION_STEPS[0])


def test_the_scale_control_steps_claims() -> None:
    """Soft-capping and sinks: the inspector numbers in their texts follow from the engine (the
    simulation figures are claims in resources/claims.json)."""
    cap = step_with("soft-capping has")
    assert cap.config["softcap"] == 5.0 and "softcap" in cap.config["scalings"]
    assert cap.inspector is not None and cap.inspector.options == {"softcap": 5.0}
    capped = inspect_scores(cap.inspector.scores, cap.inspector.scale, softcap=5.0)
    top = capped.weights[0]
    slope = 1 - math.tanh(16 / 5) ** 2
    assert f"{5 * math.tanh(16 / 5):.2f}" in cap.text and f"{slope:.4f}" in cap.text
    assert f"{top * (1 - top):.3f}" in cap.text
    assert capped.jacobian[0, 0] == pytest.approx(top * (1 - top) * slope, rel=1e-12)
    assert f"{capped.jacobian[0, 0]:.1e}" in cap.text  # the target's entry, through the cap
    sink = step_with("a sink lets")
    assert sink.config["sink"] == 2.0 and sink.inspector.options == {"sink": 2.0}
    no_match = inspect_scores(sink.inspector.scores, sink.inspector.scale, sink=2.0)
    matched = inspect_scores([6, *sink.inspector.scores[1:]], sink.inspector.scale, sink=2.0)
    assert f"{no_match.sink_weight:.3f}" in sink.text and f"{matched.sink_weight:.3f}" in sink.text
    keys, s = 8 * math.exp(0.5), math.exp(2.0)  # E[sum e^z] of 8 logits of spread 1; the sink
    explain = sink.question.explain
    assert f"{keys:.1f}" in explain and f"{s:.1f}" in explain and f"{s / (s + keys):.2f}" in explain


def test_an_example_with_scale_controls_sends_them_before_its_scores(panel) -> None:
    events = []
    panel.inspector_options.connect(lambda o: events.append(("options", o)))
    panel.show_inspector.connect(lambda s, c: events.append(("inspector", s, c)))
    panel.start()
    index = next(i for i, s in enumerate(STEPS) if s.inspector and "sink" in s.inspector.options)
    plain = next(i for i, s in enumerate(STEPS) if s.inspector and not s.inspector.options)
    while panel.index < index:
        events.clear()
        panel.next_button.click()
    assert events[0] == ("options", {"sink": 2.0}) and events[1][0] == "inspector"
    while panel.index > plain:  # an example without options clears them
        events.clear()
        panel.back_button.click()
    assert events[0] == ("options", {})


def test_the_interview_answer_opens_with_three_sentences_to_say_aloud() -> None:
    """Seven claims in one paragraph cannot be said aloud: a short spoken answer comes first,
    with the canonical numbers (d_k = 64: spread sqrt(64) = 8), then the depth."""
    say = step_with("say it in the interview")
    first = say.text.split("\n\n")[0]
    assert first.startswith("**Say it")
    spoken = first.split(":**", 1)[1]
    assert spoken.count(". ") + spoken.endswith(".") == 3, spoken
    assert "d_k = 64" in spoken and f"standard deviation {math.sqrt(64):g}" in spoken
    assert say.text.index("**Weak:**") > say.text.index(spoken)


def test_the_gradient_sentences_say_which_gradient() -> None:
    """The softmax's gain is 0.059 against 0.097, not "almost nothing"; and "the gradient
    vanishes" next to "the W_Q gradient is larger" must say which one is which."""
    for step in (step_with("link by link"), step_with("say it in the interview")):
        assert "almost nothing passes back" not in step.text
        assert "not yet committed" in step.text or "saturated rows" in step.text
    chain = step_with("link by link")
    assert "0.059" in chain.text and "0.097" in chain.text and "well over half" in chain.text
    assert "cannot explode" in chain.text and "multiplies it back" in chain.text
    say = step_with("say it in the interview")
    assert "the gradient vanishes, it does not explode" not in say.text
    assert "multiplies it back" in say.text and "“we suspect”" in say.text
    cap = step_with("soft-capping")
    assert "it does not keep its gradient" not in cap.text
    assert "own slope" in cap.text


def test_links_follow_a_theme_switched_after_the_text_was_set(qtbot) -> None:
    """Qt bakes the palette's link colour into Markdown when the text is set: switching to the
    dark theme left dark blue links (#0061A0) on dark grey."""
    from PySide6.QtGui import QTextDocument
    from PySide6.QtWidgets import QApplication

    from ui.theme import DARK, LIGHT, apply_app_theme, current_theme

    def link_colours(label) -> set[str]:
        out = set()
        for doc in label.findChildren(QTextDocument):
            block = doc.begin()
            while block.isValid():
                it = block.begin()
                while not it.atEnd():
                    fmt = it.fragment().charFormat()
                    if fmt.isAnchor():
                        out.add(fmt.foreground().color().name().upper())
                    it += 1
                block = block.next()
        return out

    app = QApplication.instance()
    before = current_theme()
    apply_app_theme(app, LIGHT)
    try:
        w = TourPanel(ask=False)
        qtbot.addWidget(w)
        w.show()
        w.go_to(next(i for i, s in enumerate(STEPS) if "](plot:" in s.text))
        qtbot.waitUntil(lambda: link_colours(w._text) == {LIGHT.link.upper()}, timeout=3000)
        apply_app_theme(app, DARK)
        qtbot.waitUntil(lambda: link_colours(w._text) == {DARK.link.upper()}, timeout=3000)
    finally:
        apply_app_theme(app, before)
