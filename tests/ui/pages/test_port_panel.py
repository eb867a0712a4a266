"""The Real model page's Port audit tab: a GGUF file audited in the worker shows its table, a bad
file says so in the status line, and the per-layer plot draws both series."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("gguf")
pytest.importorskip("transformers")


def test_the_port_tab_audits_a_file_and_refuses_a_bad_one(qtbot, tmp_path) -> None:
    from engine.probe.port.gguf_write import write_gguf
    from engine.probe.port.roundtrip import zoo_model
    from ui.pages.real_model.port_panel import PortPanel

    path = write_gguf(zoo_model("Llama").model, tmp_path / "l.gguf")
    panel = PortPanel()
    qtbot.addWidget(panel)
    panel.source = lambda: (None, None)
    panel.path_edit.setText(str(path))
    assert panel.run()
    qtbot.waitUntil(lambda: panel.result is not None, timeout=20_000)
    keys = [panel.table.item(i, 0).text() for i in range(panel.table.rowCount())]
    assert "attention scale" in keys and "attn_logit_softcapping" in keys
    assert "no source" in panel.status.text()
    bad = tmp_path / "bad.gguf"
    bad.write_text("no")
    panel.path_edit.setText(str(bad))
    panel.run()
    qtbot.waitUntil(lambda: panel.status.text().startswith("⚠"), timeout=20_000)
    assert "is not a GGUF file" in panel.status.text()
    panel.worker.stop(wait=2.0)


def test_the_plot_draws_source_and_port_per_layer(qtbot) -> None:
    from engine.probe.port.result import PortAudit, PortLayer
    from ui.pages.real_model.port_panel import PortPanel

    rows = [PortLayer(i, "n", "decoder", "unfused", p, 0.0, "v", math.nan, "", (), s, "v",
                      p / s, "MISMATCH" if p != s else "as the source")
            for i, (s, p) in enumerate(((1.0, 1.0), (0.5, 1.0)))]
    res = PortAudit("onnx", "x.onnx", "src", rows, (), None, 4, (), "", ("layer 1",), {})
    panel = PortPanel()
    qtbot.addWidget(panel)
    panel.show_result(res)
    assert list(panel.source_curve.getData()[1]) == [1.0, 0.5]
    assert list(panel.port_curve.getData()[1]) == [1.0, 1.0]
    assert panel.plot.legend is not None and len(panel.plot.legend.items) == 2
    assert panel.plot.getAxis("bottom").labelText == "layer"
    assert len(panel.data_rows()) == 2 and panel.png_bytes()[:4] == b"\x89PNG"


def test_an_exported_port_figure_reopens_and_audits_again(window, qtbot, tmp_path) -> None:
    """File -> Open of a Port audit figure: the page's Port audit tab comes to the front with the
    figure's port file and source, the audit runs again and the status bar says so; a figure
    whose file is gone is refused, naming it, and nothing changes."""
    from engine.probe.port.gguf_write import write_gguf
    from engine.probe.port.roundtrip import zoo_model
    from ui.export.plot_files import export_panel
    from ui.figure_restore import PORT_PLOT
    from ui.plots.figure_metadata import read_figure_metadata

    path = write_gguf(zoo_model("Llama").model, tmp_path / "l.gguf")
    page = window.open_page("RealModelPage")
    panel = page.port_panel
    assert panel.plot_id == PORT_PLOT
    panel.source = lambda: (None, None)
    panel.path_edit.setText(str(path))
    assert panel.run()
    qtbot.waitUntil(lambda: panel.result is not None and not panel.worker.is_running(),
                    timeout=30_000)
    png = export_panel(panel, tmp_path / "port.png", "png")
    meta = read_figure_metadata(png)
    assert meta["page"] == "real_model" and meta["plot"] == PORT_PLOT
    assert meta["port"] == {"path": str(path), "source": None, "text": None}
    # everything changes
    first = panel.result
    panel.path_edit.setText(str(tmp_path / "other.onnx"))
    page.tabs.setCurrentIndex(0)
    window.tabs.setCurrentIndex(0)
    assert window.open_session(png) is None
    assert window.tabs.currentWidget() is page and page.tabs.currentWidget() is panel
    assert panel.path_edit.text() == str(path)
    qtbot.waitUntil(lambda: panel.result is not first and not panel.worker.is_running(),
                    timeout=30_000)
    assert panel.result.path == str(path)
    assert "Opened port.png: the port audit of l.gguf beside no source" in window.last_message
    # the port file gone: refused, the path box keeps what it had
    path.unlink()
    panel.path_edit.setText("kept.onnx")
    with pytest.raises(ValueError, match=r"the port file .*l\.gguf is not here"):
        window.open_session(png)
    assert panel.path_edit.text() == "kept.onnx"


@pytest.mark.parametrize(("budget", "refused"), [(1.0, True), (3.0, False)])
def test_the_port_audit_loads_its_source_under_the_pages_memory_budget(window, qtbot, tmp_path,
                                                                       budget, refused) -> None:
    """The source folder's config describes 1.8 GB of tensors: under the page's 1 GB budget the
    Port audit refuses it naming the budget; under 3 GB the budget lets it through (and the
    folder is refused for another reason: its weights file holds one small tensor)."""
    from engine.probe.port.gguf_write import write_gguf
    from engine.probe.port.roundtrip import zoo_model
    from tests.fuzz.model_folders import hostile_config_folder

    path = write_gguf(zoo_model("Llama").model, tmp_path / "l.gguf")
    folder = hostile_config_folder(tmp_path / "m", "type_vocab_14m")
    page = window.open_page("RealModelPage")
    page.budget_box.setValue(budget)
    panel = page.port_panel
    panel.source = lambda: (str(folder), None)
    panel.path_edit.setText(str(path))
    assert panel.run()
    qtbot.waitUntil(lambda: panel.status.text().startswith("⚠"), timeout=60_000)
    said = panel.status.text()
    assert ("more than the memory budget of 1 GB" in said) is refused, said
    assert panel.result is None


def test_export_all_carries_the_port_audit(window, qtbot, tmp_path) -> None:
    """Export all of the Real model page after a port audit only: the port figure (PNG, SVG,
    CSV) and the audit's own tables; the figure's CSV has a row per layer of the result."""
    import csv

    pytest.importorskip("onnxruntime")
    from engine.probe.loader import load_model, tokenize
    from engine.probe.port.roundtrip import export_onnx
    from tests.cli.conftest import save_tiny_model as save_tiny

    text = "the query scores the key and the softmax scales the heads"
    folder = save_tiny(tmp_path / "src", "llama", layers=2, heads=4, num_key_value_heads=2)
    loaded = load_model(str(folder))
    path = export_onnx(loaded, tokenize(loaded, text).ids, tmp_path / "m.onnx")
    page = window.open_page("RealModelPage")
    assert page.export_all(tmp_path) is None  # nothing run yet
    panel = page.port_panel
    panel.source = lambda: (str(folder), text)
    panel.path_edit.setText(str(path))
    assert panel.run()
    qtbot.waitUntil(lambda: panel.result is not None and not panel.worker.is_running(),
                    timeout=60_000)
    out = page.export_all(tmp_path)
    assert out is not None, page.last_message
    names = {p.name for p in out.iterdir()}
    assert {"port_audit.png", "port_audit.svg", "port_audit.csv", "port.csv",
            "port.json"} <= names, names
    with open(out / "port_audit.csv", newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    assert [r["state"] for r in rows] == ["as the source"] * 2
