"""The Real-model page: install hint without the extra, refusals, analyze -> grids -> head detail
-> export, on a tiny random model folder (no download, seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPointF
from PySide6.QtWidgets import QApplication

from engine.io import read_csv
from ui.pages.real_model.panels import GRID_GROUPS

WORDS = "the a of to and why is are attention head scale score query key softmax width".split()


@pytest.fixture
def page(show_widget):
    from ui.pages.real_model.page import RealModelPage

    return show_widget(RealModelPage(), (1400, 900))


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    """A tiny random BERT saved as save_pretrained writes it, with a word-level tokenizer."""
    transformers = pytest.importorskip("transformers")
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    folder = tmp_path_factory.mktemp("tiny_bert")
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS, ".", "?"])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    torch.manual_seed(0)
    net = transformers.BertModel(transformers.BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, initializer_range=0.3))
    net.save_pretrained(folder)
    transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]",
                                         pad_token="[PAD]").save_pretrained(folder)
    return folder


def test_the_per_head_panels_come_after_the_page_shows(qtbot, show_widget) -> None:
    """The page is built without its Per head plots (seven plots and four colour bars blocked
    its first opening); once shown they come one per event-loop turn, and code that reads one
    first gets it built at once, in its place."""
    from ui.pages.real_model.page import RealModelPage

    page = RealModelPage()
    assert page.built_per_head_panels() == []
    attention = page.attention_panel  # asked for before the others: built alone
    assert page.built_per_head_panels() == [attention]
    show_widget(page, (1280, 720))
    qtbot.waitUntil(lambda: len(page.built_per_head_panels()) == 3, timeout=10_000)
    grid, scores = page.grid_panel, page.scores_panel
    assert page.panels == (grid, scores, attention)
    bottom = page._per_head_bottom
    assert [bottom.widget(i) for i in range(bottom.count())] == [scores, attention]
    assert page._per_head_right.widget(0) is grid
    assert all(p.isVisibleTo(page) for p in page.panels)


def test_without_the_models_extra_the_page_says_how_to_install(qtbot, monkeypatch) -> None:
    import ui.pages.real_model.page as mod

    monkeypatch.setattr(mod, "models_extra_available", lambda: False)
    p = mod.RealModelPage()
    qtbot.addWidget(p)
    try:
        assert "pip install" in p.hint_label.text() and "models" in p.hint_label.text()
        assert not p.analyze_button.isEnabled()
        assert p.analyze() is False
    finally:
        p.shutdown()
        p.close()


@pytest.mark.parametrize("config, words", [
    ("[1, 2]", "config.json: top level"),
    (json.dumps({"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": "abc",
                 "hidden_size": 32}), "config.json: num_attention_heads"),
    (json.dumps({"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 4,
                 "hidden_size": 32, "auto_map": {}}), "trust_remote_code"),
])
def test_a_bad_model_folder_is_refused_on_the_error_line(page, tmp_path: Path, config: str,
                                                         words: str) -> None:
    (tmp_path / "config.json").write_text(config)
    before = page.model_dir
    assert page.set_model_dir(str(tmp_path)) is False
    assert words in page.last_message and "\n" not in page.last_message, page.last_message
    assert page.model_dir == before


def test_an_architecture_outside_the_interface_is_refused_by_name(page, qtbot, tiny_folder: Path,
                                                                  tmp_path: Path) -> None:
    """A saved XLNet passes the folder checks; loading it names it and says why."""
    import shutil

    import torch
    import transformers

    folder = tmp_path / "xlnet"
    torch.manual_seed(0)
    transformers.XLNetModel(transformers.XLNetConfig(
        vocab_size=64, d_model=32, n_layer=2, n_head=4, d_inner=64)).save_pretrained(folder)
    for f in tiny_folder.glob("tok*"):
        shutil.copy(f, folder / f.name)
    assert page.set_model_dir(str(folder))
    page.text_edit.setPlainText("the attention score")
    assert page.analyze()
    qtbot.waitUntil(lambda: not page.worker.is_running() and not page.stop_button.isEnabled(),
                    timeout=60_000)
    assert "xlnet" in page.last_message and "interface" in page.last_message, page.last_message


def test_any_architecture_t5_audit_shows_blocks_and_features_and_whatif_says_its_model(
        page, qtbot, tiny_folder: Path, tmp_path: Path) -> None:
    """A T5 folder (encoder-decoder, no scale, relative bias): the audit view lists each
    layer's block and features; a bug planted in layer 1 is the one mismatch; the what-if then
    runs on that model and its title says so."""
    import shutil

    import torch
    import transformers

    folder = tmp_path / "t5"
    torch.manual_seed(0)
    transformers.T5Model(transformers.T5Config(
        vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        decoder_start_token_id=0, initializer_factor=2.0)).save_pretrained(folder)
    for f in tiny_folder.glob("tok*"):
        shutil.copy(f, folder / f.name)
    assert page.set_model_dir(str(folder))
    page.text_edit.setPlainText("Why is the attention score scaled? The softmax of the query and "
                                "key is the head width.")
    assert page.run_audit()
    _wait_idle(page, qtbot, lambda: page.audit_result is not None)
    text = page.audit_panel.verdict_label.text()
    assert "cross" in text and "relative position bias" in text and "as declared" in text
    assert page.audit_panel.layer_spin.maximum() == 5  # 6 attention sites
    first = page.audit_result
    assert page.break_layer(1, "twice")
    _wait_idle(page, qtbot, lambda: page.audit_result is not first)
    assert page.audit_result.mismatched_layers() == [1]
    assert "differ from what the model declares" in page.audit_panel.verdict_label.text()
    assert page.run_whatif(None)
    _wait_idle(page, qtbot, lambda: page.whatif_result is not None)
    assert page.whatif_result.injected == {1: "twice"}
    assert "injected" in page.whatif_panel.attn_plot.titleLabel.text
    assert page.whatif_panel.std_lines[0].isVisible()


def _exports_whole(page, plot_ids: tuple[str, ...]) -> None:
    """Every export style (PNG/SVG, slide, paper) of the page's panels ``plot_ids``, each with
    a result: nothing cut or crowded, every title whole (tests.ui.plot_layout)."""
    from tests.ui.plot_layout import export_problems
    from ui.plots.base import PlotPanel

    panels = {p.plot_id: p for p in page.findChildren(PlotPanel)
              if getattr(p, "_state", None) is not None}
    assert set(plot_ids) <= set(panels), sorted(panels)
    problems = [p for pid in plot_ids for p in export_problems(pid, panels[pid])]
    assert not problems, "\n".join(problems)


def _analyze(page, qtbot, text: str) -> None:
    page.text_edit.setPlainText(text)
    assert page.analyze()
    ticks = []
    page.timer.timeout.connect(lambda: ticks.append(1))
    qtbot.waitUntil(lambda: page.result is not None and not page.worker.is_running()
                    and not page.stop_button.isEnabled(), timeout=60_000)
    assert ticks, "the GUI timer kept running during the analysis"


@pytest.mark.slow
def test_analyze_click_a_head_and_export(page, qtbot, tiny_folder: Path, tmp_path: Path) -> None:
    assert page.set_model_dir(str(tiny_folder))
    _analyze(page, qtbot, "Why is the attention score scaled? The softmax of the query and key.")
    res = page.result
    assert (res.n_layers, res.n_heads, res.d_k) == (2, 4, 8)
    assert res.tokens[0] == "[CLS]" and "attention" in page.tokens_view.toPlainText()
    assert np.all(page.table["attn_max_abs_diff"] < 1e-5)
    assert page.grid_panel.draw_count >= 1

    # click the cell (layer 1, head 2) of the ratio grid
    grid = page.grid_panel
    plot = grid.plots[2]
    scene_pos = plot.getViewBox().mapViewToScene(QPointF(2.0, 1.0))

    class Click:
        def scenePos(self):
            return scene_pos

    grid._on_click(Click())
    assert (page.layer, page.head) == (1, 2)
    # drawn now, or on the next redraw tick if the panel was not laid out yet (built lazily)
    qtbot.waitUntil(lambda: "layer 1, head 2" in page.scores_panel.raw_plot.titleLabel.text,
                    timeout=5_000)
    grid._on_move(scene_pos)
    ratio = page.table["std_ratio"][1, 2]
    assert f"std_ratio {ratio:.4g}" in grid.hover_label.text()
    # another grid view: the old read-out is not left on screen
    from ui.pages.real_model.panels import HOVER_HINT

    grid.set_group(next(g for g in GRID_GROUPS if g != grid.group))
    grid.refresh(page.view, force=True)
    assert grid.hover_label.text() == HOVER_HINT

    # the detail follows the rule; weights are a proper softmax with the chosen scale
    page.rule_box.setCurrentIndex(1)  # none
    detail = page.view.detail
    assert detail.rule == "none" and detail.scale == 1.0
    np.testing.assert_allclose(detail.weights.sum(axis=1), 1.0, rtol=1e-12)

    # every export style of the three per-head panels: titles whole ("‖J‖<sub>F</sub>"), nothing cut
    _exports_whole(page, ("head_grids", "head_scores", "head_attention"))

    out = page.export_all(tmp_path)
    assert out is not None, page.last_message
    names = {p.name for p in out.iterdir()}
    for gid in GRID_GROUPS:
        assert {f"grid_{gid}.png", f"grid_{gid}.svg"} <= names
    assert {"heads.csv", "scores.npz", "config.json"} <= names
    assert {"head_scores_L1_H2.png", "head_attention_L1_H2.svg"} <= names
    assert len(read_csv(out / "heads.csv")) == 8
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["text"].startswith("Why is") and "transformers" in cfg["versions"]


def test_the_memory_budget_field_refuses_a_model_before_it_loads(page, qtbot,
                                                                    tmp_path: Path) -> None:
    """A config describing 1.8 GB of tensors: the page's budget (here 1 GB) names itself on the
    status line; nothing was allocated (the weights file holds one small tensor)."""
    from tests.fuzz.model_folders import hostile_config_folder

    folder = hostile_config_folder(tmp_path / "m", "type_vocab_14m")
    page.budget_box.setValue(1.0)
    assert page.set_model_dir(str(folder))
    assert page.analyze()
    qtbot.waitUntil(lambda: not page.worker.is_running() and not page.stop_button.isEnabled(),
                    timeout=60_000)
    assert "more than the memory budget of 1 GB" in page.last_message, page.last_message
    assert "token_type_embeddings" in page.last_message


def test_the_model_loads_once(page, qtbot, tiny_folder: Path, monkeypatch) -> None:
    import ui.pages.real_model.page as mod

    calls = []
    real = mod.load_model
    monkeypatch.setattr(mod, "load_model", lambda folder, budget: calls.append(folder) or real(
        folder, budget))
    assert page.set_model_dir(str(tiny_folder))
    _analyze(page, qtbot, "the key and the query")
    first = page.result
    _analyze(page, qtbot, "the head width and the scale")
    assert page.result is not first and len(calls) == 1


def test_token_list_follows_the_text_once_the_model_is_loaded(page, qtbot, tiny_folder: Path) -> None:
    assert page.set_model_dir(str(tiny_folder))
    _analyze(page, qtbot, "the key")
    page.text_edit.setPlainText("why is the softmax scaled")
    qtbot.waitUntil(lambda: "4:softmax" in page.tokens_view.toPlainText(), timeout=5_000)
    assert page.tokens_count.text().startswith("7 tokens")


def test_building_the_page_imports_neither_transformers_nor_torch() -> None:
    import subprocess
    import sys

    code = ("import os, sys\nos.environ['QT_QPA_PLATFORM'] = 'offscreen'\n"
            "from PySide6.QtWidgets import QApplication\napp = QApplication([])\n"
            "from ui.pages.real_model.page import RealModelPage\np = RealModelPage()\n"
            "print(','.join(m for m in ('transformers', 'torch') if m in sys.modules))\n"
            "p.shutdown(); p.deleteLater(); app.processEvents()\n")
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1:] in ([], [""]), out.stdout


def _ranges(plot):
    return [tuple(round(v, 6) for v in r) for r in plot.getViewBox().viewRange()]


def test_empty_state_then_result_then_empty_again(page, qtbot, tiny_folder: Path) -> None:
    """Before any analysis: no selection mark, a 'press Analyze' hint, grids framed to the model's
    layer x head shape; after it the hint goes and the mark shows; a new model empties the page."""
    assert page.set_model_dir(str(tiny_folder))  # 2 layers x 4 heads
    grid = page.grid_panel
    assert not any(m.isVisible() for m in grid.marks)
    assert grid.placeholder.visible and "Analyze" in grid.placeholder.text
    assert page.scores_panel.placeholder.visible and page.attention_panel.placeholder.visible
    for plot in grid.plots:
        assert _ranges(plot) == [(-0.5, 3.5), (-0.5, 1.5)]
        assert plot.titleLabel.text  # the grid says what it will show
    assert not page.export_button.isEnabled()
    grid.set_group("entropy")  # another group, still empty: its own titles, still no mark
    assert "H / log n" in grid.plots[0].titleLabel.text and not grid.marks[0].isVisible()
    grid.set_group("spread")

    _analyze(page, qtbot, "the key and the query")
    assert not grid.placeholder.visible and all(m.isVisible() for m in grid.marks)
    assert not page.scores_panel.placeholder.visible
    assert not page.attention_panel.placeholder.visible
    grid._on_move(grid.plots[0].getViewBox().mapViewToScene(QPointF(1.0, 0.0)))
    assert "raw_std" in grid.hover_label.text() and "±" in grid.hover_label.text()

    page.set_model_dir(str(tiny_folder.parent / "nope"))  # refused: the result stays
    assert page.result is not None
    page.set_model_dir(None)  # another model: its result is gone
    assert page.result is None and grid.placeholder.visible
    assert not any(m.isVisible() for m in grid.marks)
    assert not page.export_button.isEnabled()


def test_jacobian_legend_never_covers_a_curve(page, qtbot, tiny_folder: Path) -> None:
    """The per-row Jacobian legend sits outside the plot area; the y range holds the largest
    possible ||J||_F (1/2)."""
    assert page.set_model_dir(str(tiny_folder))
    _analyze(page, qtbot, "Why is the attention score scaled? The softmax of the query and key.")
    panel = page.attention_panel
    panel.refresh(page.view, force=True)
    qtbot.wait(20)
    vb = panel.jac_plot.getViewBox()
    legend = panel.jac_legend.sceneBoundingRect()
    assert legend.height() > 0 and not legend.intersects(vb.sceneBoundingRect())
    assert vb.viewRange()[1][1] >= 0.5
    for curve in panel.jac_curves.values():
        _x, y = curve.getData()
        assert y is not None and len(y) and float(np.max(y)) <= 0.5
    assert len(panel.data_rows()) > len(page.result.tokens) ** 2  # CSV rows built on demand


@pytest.mark.slow
def test_a_failed_export_leaves_no_half_folder(page, qtbot, tiny_folder: Path, tmp_path: Path,
                                               monkeypatch) -> None:
    import engine.probe.export as export

    assert page.set_model_dir(str(tiny_folder))
    _analyze(page, qtbot, "the key and the query")

    def full(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "write_npz", full)  # after every plot was written
    assert page.export_all(tmp_path) is None
    assert "No space left" in page.last_message
    assert list(tmp_path.iterdir()) == []
    assert page.grid_panel.group == "spread"  # the shown grid group is restored


def test_the_summary_shows_the_engine_summary(page, qtbot, tiny_folder: Path) -> None:
    from engine.probe.summary import summarize

    assert page.set_model_dir(str(tiny_folder))
    _analyze(page, qtbot, "Why is the attention score scaled?")
    s = summarize(page.result)
    text = page.summary_label.text()
    assert f"median {s.ratio_median:.2f}" in text
    assert f"no scale {s.entropy_norm['none']:.2f}" in text and f"1/d_k {s.entropy_norm['dk']:.2f}" in text
def _wait_idle(page, qtbot, done) -> None:
    qtbot.waitUntil(lambda: done() and not page.worker.is_running()
                    and not page.stop_button.isEnabled(), timeout=60_000)


def test_scale_audit_break_it_whatif_and_export(page, qtbot, tiny_folder: Path,
                                                 tmp_path: Path) -> None:
    """The audit grid fills, 'break it' flags the broken layer, the what-if slider changes the
    per-head grids, the hover read-out goes when the pointer leaves, Export all writes it all."""
    from ui.pages.real_model.audit_panels import AUDIT_HOVER_HINT

    assert page.set_model_dir(str(tiny_folder))
    page.text_edit.setPlainText("Why is the attention score scaled? The softmax of the query and "
                                "key is the head width.")
    assert page.run_audit()
    _wait_idle(page, qtbot, lambda: page.audit_result is not None)
    a = page.audit_result
    panel = page.audit_panel
    assert a.layer_verdicts == ["1/sqrt(d_k)"] * 2
    img = panel.image.image
    assert img is not None and img.shape == (2, 4) and np.allclose(img, 0.0, atol=1e-5)  # log2(1)
    assert "every layer applies" in panel.verdict_label.text()
    assert page.tabs.currentWidget() is panel
    scene = panel.plot.getViewBox().mapViewToScene(QPointF(3.0, 1.0))
    panel._on_move(scene)
    assert panel.hover_label.text().startswith("layer 1, head 3: s = ")
    # a real Leave event on the plot's viewport (the filter must be installed there)
    QApplication.sendEvent(panel.glw.viewport(), QEvent(QEvent.Type.Leave))
    assert panel.hover_label.text() == AUDIT_HOVER_HINT

    # break it: layer 1 unscaled -> flagged in words and on the grid
    panel.layer_spin.setValue(1)
    panel.kind_box.setCurrentIndex(panel.kind_box.findData("none"))
    first = page.audit_result
    panel.inject_button.click()
    _wait_idle(page, qtbot, lambda: page.audit_result is not first)
    b = page.audit_result
    assert b.layer_verdicts == ["1/sqrt(d_k)", "unscaled"] and b.inject == {1: "none"}
    assert np.allclose(panel.image.image[1], np.log2(np.sqrt(8)), atol=1e-4)
    assert "layer 1: unscaled; fitted scale 2.828 × 1/√d_k, all 4 heads alike" in \
        panel.verdict_label.text()
    second = page.audit_result
    panel.clear_button.click()
    _wait_idle(page, qtbot, lambda: page.audit_result is not second)
    assert page.audit_result.flagged_layers() == []

    # what-if: curves over m, the slider moves the per-head grids
    wp = page.whatif_panel
    assert page.run_whatif(None)
    _wait_idle(page, qtbot, lambda: page.whatif_result is not None)
    w = page.whatif_result
    assert page.tabs.currentWidget() is wp
    xs, ys = wp.ent_curve.getData()
    assert len(xs) == len(w.multipliers) == 13 and np.all(np.diff(ys) < 0)
    assert wp.m_label.text() == "m = 1"
    at_one = wp.grid_images[0].image.copy()
    wp.slider.setValue(wp.slider.maximum())
    assert wp.m_label.text() == "m = 8"
    assert wp.grid_images[0].image.mean() < at_one.mean()

    _exports_whole(page, ("scale_audit", "whatif"))

    out = page.export_all(tmp_path)
    assert out is not None, page.last_message
    names = {p.name for p in out.iterdir()}
    assert {"scale_audit.png", "scale_audit.svg", "whatif.png", "whatif.svg", "audit.csv",
            "layers.csv", "whatif.csv"} <= names
    assert len(read_csv(out / "audit.csv")) == 8
    assert len(read_csv(out / "whatif.csv")) == 13


def test_whatif_view_of_a_causal_model_plots_perplexity(show_widget) -> None:
    """GPT-2: the output plot shows the perplexity (no pooled curve), marks m = 1 and the
    standard scale, and the grids follow the chosen m."""
    transformers = pytest.importorskip("transformers")
    import torch

    from engine.probe.loader import info_from_config, wrap_model
    from engine.probe.whatif import run_whatif, whatif
    from ui.pages.real_model.audit_panels import WhatIfPanel, WhatIfView

    torch.manual_seed(0)
    net = transformers.GPT2Model(transformers.GPT2Config(
        vocab_size=40, n_embd=16, n_layer=2, n_head=2, n_positions=32, bos_token_id=0,
        eos_token_id=0, initializer_range=0.3, attn_implementation="eager"))
    loaded = wrap_model(net, info_from_config(net.config, "tiny-gpt2"))
    w = run_whatif(whatif(loaded, list(range(1, 20)), multipliers=(0.25, 1.0, 4.0)))
    panel = show_widget(WhatIfPanel())
    assert panel.refresh(WhatIfView(w, 2, 0.5), force=True)
    _xs, ys = panel.cos_curve.getData()
    np.testing.assert_allclose(ys, w.perplexity)
    assert not panel.pool_curve.isVisible()
    assert "perplexity" in panel.out_plot.getAxis("left").labelText
    assert panel.model_lines[0].isVisible() and panel.std_lines[0].isVisible()
    assert panel.m_label.text() == "m = 4"
    QApplication.processEvents()
    for plot, legend in ((panel.attn_plot, panel.attn_legend), (panel.out_plot, panel.out_legend)):
        # the legends sit above the plots: inside they covered the curves of a small window
        box = legend.sceneBoundingRect()
        assert box.height() > 0 and not box.intersects(plot.getViewBox().sceneBoundingRect())
    assert [label.text for _sample, label in panel.out_legend.items] == ["perplexity"]
    for plot in (panel.attn_plot, panel.out_plot):  # m on a log axis: 1/4 ... 4, none crowded
        major = plot.getAxis("bottom")._tickLevels[0]
        assert [t for _v, t in major] == ["1/4", "1/2", "1", "2", "4"]
        np.testing.assert_allclose([v for v, _t in major], np.log10([0.25, 0.5, 1, 2, 4]))
    np.testing.assert_allclose(panel.grid_images[0].image, w.entropy_norm[2])
    rows = panel.data_rows()
    assert sum(r["series"] == "summary" for r in rows) == 3


def test_a_result_that_arrives_while_its_view_is_hidden_is_drawn_when_shown(
        page, qtbot, tiny_folder: Path) -> None:
    """Analyze, then the Scale audit view during the load: back on Per head, the plots are
    drawn (they stayed empty while the panel said "N tokens analyzed")."""
    assert page.set_model_dir(str(tiny_folder))
    page.text_edit.setPlainText("Why is the attention score scaled? The head width.")
    assert page.analyze()
    page.tabs.setCurrentWidget(page.audit_panel)  # the Per head view is hidden during the run
    qtbot.waitUntil(lambda: page.result is not None and not page.worker.is_running(),
                    timeout=60_000)
    qtbot.wait(100)  # a few ticks: hidden panels are not drawn
    assert "tokens analyzed" in page.last_message
    assert all(p.draw_count == 0 for p in page.panels)
    page.tabs.setCurrentIndex(0)
    qtbot.waitUntil(lambda: all(p.draw_count > 0 for p in page.panels), timeout=5_000)
    assert not page.grid_panel.placeholder.item.isVisible()
    # the same for an audit that finishes while the Per head view is in front
    assert page.run_audit()
    page.tabs.setCurrentIndex(0)
    qtbot.waitUntil(lambda: page.audit_result is not None and not page.worker.is_running(),
                    timeout=60_000)
    page.tabs.setCurrentWidget(page.audit_panel)
    qtbot.waitUntil(lambda: page.audit_panel.draw_count > 0, timeout=5_000)


def test_a_real_model_figure_reopens_with_its_text_head_and_bugs(window, qtbot, tiny_folder: Path,
                                                                 tmp_path: Path) -> None:
    """File -> Open of a Real model figure: the model, text and rule that drew it, its head and
    grid group (or its planted bugs), and the job runs again; the status bar says so."""
    from ui.export.plot_files import export_panel
    from ui.plots.figure_metadata import read_figure_metadata

    page = window.open_page("RealModelPage")
    assert page.set_model_dir(str(tiny_folder))
    text = "Why is the attention score scaled? The head width."
    page.text_edit.setPlainText(text)
    page.rule_box.setCurrentIndex(page.rule_box.findData("none"))
    assert page.analyze()
    _wait_idle(page, qtbot, lambda: page.result is not None)
    page.select_head(1, 2)
    page.grid_panel.set_group("entropy")
    head = export_panel(page.scores_panel, tmp_path / "head.png", "png")
    meta = read_figure_metadata(head)
    assert meta["page"] == "real_model" and meta["real_model"]["text"] == text
    assert meta["view"]["layer"] == 1 and meta["view"]["head"] == 2
    assert page.break_layer(1, "none")
    _wait_idle(page, qtbot, lambda: page.audit_result is not None and page.audit_result.inject)
    audit_svg = export_panel(page.audit_panel, tmp_path / "audit.svg", "svg")
    # everything changes
    page.text_edit.setPlainText("the a of to")
    page.rule_box.setCurrentIndex(page.rule_box.findData("model"))
    page.select_head(0, 0)
    page.grid_panel.set_group("spread")
    assert page.repair()
    _wait_idle(page, qtbot, lambda: page.audit_result is not None and not page.audit_result.inject)
    window.tabs.setCurrentIndex(0)
    first = page.result
    assert window.open_session(head) is None
    assert window.tabs.currentWidget() is page
    _wait_idle(page, qtbot, lambda: page.result is not first)
    assert page.text_edit.toPlainText() == text and page.rule == "none"
    assert (page.layer, page.head) == (1, 2) and page.grid_panel.group == "entropy"
    assert "Opened head.png: the per-head analysis" in window.last_message
    assert "layer 1 head 2" in window.last_message
    before = page.audit_result
    window.open_session(audit_svg)
    _wait_idle(page, qtbot, lambda: page.audit_result is not before)
    assert page.audit_result.inject == {1: "none"}
    assert "bugs planted (layer 1: none)" in window.last_message


def test_training_lab_weights_are_audited_run_by_run(page, qtbot, tmp_path: Path) -> None:
    """The folder `train --out` wrote opens too: Analyze audits every run on the lab's own
    probe examples, the run box switches between them, the what-if is refused in one line and
    Export all writes every run."""
    import main

    run = tmp_path / "run"
    assert main.main(["train", "--scaling", "sqrt", "sqrt_twice", "--steps", "2", "--layers", "1",
                      "--d-model", "16", "--heads", "2", "--log-every", "2", "--batch", "4",
                      "--probe-size", "2", "--out", str(run), "--quiet"]) == 0
    assert page.set_model_dir(str(run)), page.last_message
    assert "Training lab weights" in page.model_label.text()
    assert page.audit_panel.run_box.isVisibleTo(page.audit_panel)
    assert not page.audit_panel.inject_button.isVisibleTo(page.audit_panel)
    assert page.analyze()
    _wait_idle(page, qtbot, lambda: page.audit_result is not None)
    assert [r.run for r in page.run_results] == ["sqrt", "sqrt_twice"]
    box = page.audit_panel.run_box
    assert [box.itemText(i) for i in range(box.count())] == ["sqrt", "sqrt_twice"]
    box.setCurrentIndex(1)
    assert page.audit_result.run == "sqrt_twice"
    assert page.audit_result.layer_verdicts == ["scaled twice"]
    assert "scaled twice" in page.audit_panel.verdict_label.text()
    assert page.run_whatif(None) is False and "Training lab" in page.last_message
    out = page.export_all(tmp_path / "exports")
    assert out is not None, page.last_message
    assert [r["run"] for r in read_csv(out / "layers.csv")] == ["sqrt", "sqrt_twice"]


def test_a_broken_presets_file_is_named_on_the_error_line(show_widget, tmp_path: Path,
                                                          monkeypatch, capfd) -> None:
    """No silent fallback: the status line and stderr name the file and the field, the preset
    menu is disabled and says why, the text is left to the user."""
    import engine.probe.texts as texts
    from ui.pages.real_model.page import RealModelPage

    bad = tmp_path / "probe_texts.json"
    bad.write_text(json.dumps({"presets": [{"name": "A", "text": "x"}, {"name": 7, "text": "y"}]}))
    monkeypatch.setattr(texts, "PRESETS_FILE", bad)
    p = show_widget(RealModelPage(), (1400, 900))
    said = f"{bad}: presets[1].name: must be a string"
    assert said in p.last_message and "\n" not in p.last_message, p.last_message
    assert said in p.status_label.text()
    assert not p.preset_box.isEnabled() and said in p.preset_box.toolTip()
    assert p.preset_box.count() == 1 and "unavailable" in p.preset_box.itemText(0)
    assert p.text_edit.toPlainText() == "" and p.presets == []
    err = capfd.readouterr().err
    assert said in err and "Traceback" not in err
    assert p.analyze() is False and p.last_message == "type a text first"


def test_each_job_says_on_the_status_line_what_it_found(page, qtbot, tiny_folder: Path) -> None:
    """The status line after each kind of job: the analysis (tokens and time), the audit (flagged
    layers, or none), the what-if (its reruns); each its own words, not another job's."""
    assert page.set_model_dir(str(tiny_folder))
    _analyze(page, qtbot, "the key and the query")
    assert page.last_message.startswith("7 tokens analyzed in "), page.last_message
    assert page.break_layer(1, "none")
    _wait_idle(page, qtbot, lambda: page.audit_result is not None)
    assert page.last_message.startswith("audit of 7 tokens in "), page.last_message
    assert "flagged layers [1]" in page.last_message
    assert page.run_whatif(None)
    _wait_idle(page, qtbot, lambda: page.whatif_result is not None)
    assert page.last_message.startswith("what-if: 13 reruns of the "), page.last_message
