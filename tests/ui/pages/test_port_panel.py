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
