"""muP in the GUI: the Training page's parametrization choice reaches the config (a bad base
width is marked), and the Experiments page draws width_transfer's figures and verdict as its
jobs come in."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")

from engine.training.presets import preset


def test_the_training_form_sets_the_parametrization(show_widget):
    from ui.pages.training.page import TrainingPage

    page = show_widget(TrainingPage(), (1500, 1000))
    controls = page.controls
    assert controls.config_from_widgets().param == "sp"
    cfg = preset("demo").config.replace(param="mup", base_width=64, d_model=256)
    controls.set_config(cfg)
    got = controls.config_from_widgets()
    assert (got.param, got.base_width, got.width_axis) == ("mup", 64, "d_model")
    controls.widgets["heads"].setValue(3)  # d_model 256 / 3 heads: refused before base width
    controls.widgets["d_model"].setValue(384)
    controls.widgets["base_width"].setValue(65)  # not a multiple of 3 heads
    with pytest.raises(Exception) as err:
        controls.config_from_widgets()
    assert err.value.field == "base_width"
    assert "2px solid" in controls.widgets["base_width"].styleSheet()
    assert "base_width" in controls.error_label.text()


def _synthetic_results(spec, upto: int) -> list[dict]:
    """Finished jobs whose loss is a parabola in log lr around a centre that moves with the
    width under sp and stays under mup (the first ``upto`` jobs)."""
    out = []
    for job in spec.jobs()[:upto]:
        v = job.values
        shift = -math.log2(v["d_model"] / 16) * 0.3 if v["param"] == "sp" else 0.0
        x = math.log10(v["lr"])
        rules = {rule: {"final_loss": 0.1 + (x + 1.8 - shift) ** 2 + 0.01 * v["seed"],
                        "diverged_step": None, "steps_to_target": 50, "collapsed": False}
                 for rule in spec.rules}
        out.append({"index": job.index, "key": job.key, "values": v, "rules": rules,
                    "rows": [], "error": None, "config": job.config.to_dict()})
    return out


def test_the_experiments_page_draws_the_transfer_figures_live(window, qtbot):
    from engine.experiments.runner import ExperimentProgress

    page = window.open_page("ExperimentsPage")
    page.form.select_builtin("width_transfer")
    spec = page.spec
    assert spec is not None and spec.name == "width_transfer"
    titles = [p.title for p in page.figure_panels]
    assert titles == ["Final loss vs learning rate: param sp, sqrt",
                      "Final loss vs learning rate: param sp, dk",
                      "Final loss vs learning rate: param mup, sqrt",
                      "Final loss vs learning rate: param mup, dk",
                      "Best learning rate vs width"]
    total = len(spec.jobs())

    def show(done: int) -> None:  # what the runner's progress gives the page
        results = tuple(_synthetic_results(spec, done))
        page.run_spec = spec
        page.progress = ExperimentProgress(
            spec=spec, out_dir=None, total=total, done=done, failed=0, running=0, resumed=0,
            latest=results[-1], results=results, elapsed_s=1.0, eta_s=None,
            finished=done == total, cancelled=False, executor="process", workers=2)
        page.redraw()

    show(total // 4)  # only sp jobs so far: its panels fill, mup's stay empty
    figures = page._figure_state  # what each panel draws (when on screen)
    assert any(s.x for s in figures[0].series)
    assert not any(s.x for s in figures[3].series)
    show(total)
    figures = page._figure_state
    assert any(s.x for s in figures[3].series)
    best = figures[4]
    sp, mup = best.series[0], best.series[3]
    assert (sp.name, mup.name) == ("param=sp, sqrt", "param=mup, dk")
    assert len(sp.x) == len(mup.x) == 4
    assert sp.y[-1] < sp.y[0] / 2  # sp's best lr moves down with the width ...
    assert mup.y[-1] == pytest.approx(mup.y[0], rel=0.05)  # ... mup's stays
    text = page.verdict_label.text()
    assert "sp sqrt 0.0" in text and "mup dk 0.0" in text and "grid steps" in text
    panel = page.figure_panels[4]  # drawn and exportable as CSV
    panel.refresh(best, force=True)
    rows = panel.data_rows()
    assert rows and all(r["lo"] <= r["y"] <= r["hi"] for r in rows)
