"""port.csv, port_gguf.csv and port.json from a hand-made port audit: every column read back
as written, NaN and inf as empty cells (CSV) or null (JSON), files written all or none."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from engine.io import read_csv
from engine.probe.port.export import GGUF_COLUMNS, PORT_COLUMNS, write_port_outputs
from engine.probe.port.result import PortAudit, PortLayer


def _layer(i, **kw):
    base = dict(layer=i, name=f"softmax{i}", block="decoder", kind="unfused", port_x=1.5,
                port_tol_rel=0.01, port_verdict="other", declared_x=math.nan,
                declared_source="no constant on the scores", features=("causal", "RoPE"),
                source_x=1.0, source_verdict="1/sqrt(d_k)", ratio=1.5, state="MISMATCH",
                finding="layer 0: x1.5")
    return PortLayer(**{**base, **kw})


def _audit(layers=(), metadata=(), meta=None):
    return PortAudit(kind="onnx", path="/m.onnx", source_name="tiny", layers=list(layers),
                     sites=(), source=None, n_tokens=3, tokens=("a", "b", "c"),
                     id_source="token ids given", findings=("f1", "f2"),
                     timings={"fit": 0.5, "runs": 2}, meta=meta or {}, note="the note",
                     metadata=tuple(metadata))


def test_port_csv_rows_and_json(tmp_path) -> None:
    layers = [_layer(0), _layer(1, port_tol_rel=math.inf, source_x=math.nan, ratio=math.inf,
                               declared_x=2.0, features=(), state="", finding="")]
    meta = {"output_rel_diff_tapped_vs_shipped": math.nan,
            "sites": [{"name": "a", "x": math.inf, "y": [1.0, -math.inf, "s", (2.0,)]}]}
    files = write_port_outputs(tmp_path / "out", _audit(layers, meta=meta))
    assert [f.name for f in files] == ["port.csv", "port.json"]
    assert all(f.parent == tmp_path / "out" and f.is_file() for f in files)
    rows = read_csv(files[0])
    assert list(rows[0]) == list(PORT_COLUMNS)
    assert rows[0] == {"layer": "0", "block": "decoder", "name": "softmax0", "kind": "unfused",
                       "port_scale_x_sqrt_dk": "1.5", "port_tolerance_rel": "0.01",
                       "port_verdict": "other", "source_scale_x_sqrt_dk": "1.0",
                       "source_verdict": "1/sqrt(d_k)", "ratio": "1.5", "state": "MISMATCH",
                       "finding": "layer 0: x1.5", "declared_x_sqrt_dk": "",
                       "declared_source": "no constant on the scores", "features": "causal; RoPE"}
    assert rows[1]["port_tolerance_rel"] == "" and rows[1]["source_scale_x_sqrt_dk"] == ""
    assert rows[1]["ratio"] == "" and rows[1]["declared_x_sqrt_dk"] == "2.0"
    assert rows[1]["features"] == ""
    data = json.loads(files[1].read_text(encoding="utf-8"))
    assert data == {"command": "audit-model", "port": {"kind": "onnx", "path": "/m.onnx"},
                    "source": "tiny", "n_tokens": 3, "tokens": ["a", "b", "c"],
                    "token_ids_from": "token ids given", "findings": ["f1", "f2"],
                    "note": "the note", "timings_s": {"fit": 0.5, "runs": 2},
                    "output_rel_diff_tapped_vs_shipped": None,
                    "sites": [{"name": "a", "x": None, "y": [1.0, None, "s", [2.0]]}]}


def test_gguf_keys_csv(tmp_path) -> None:
    rows = [SimpleNamespace(key="llama.attention.scale", file="0.125", source="0.125",
                            effect="scale", factor=1.0, finding=""),
            SimpleNamespace(key="k2", file="", source="x", effect="e", factor=math.nan,
                            finding="differs")]
    files = write_port_outputs(tmp_path, _audit(metadata=rows))
    assert [f.name for f in files] == ["port_gguf.csv", "port.json"]
    got = read_csv(tmp_path / "port_gguf.csv")
    assert list(got[0]) == list(GGUF_COLUMNS)
    assert got[0] == {"key": "llama.attention.scale", "file": "0.125", "source": "0.125",
                      "effect": "scale", "factor": "1.0", "finding": ""}
    assert got[1]["factor"] == "" and got[1]["finding"] == "differs"
    assert not (tmp_path / "port.csv").exists()


def test_both_csv_files_when_both_exist(tmp_path) -> None:
    meta_row = SimpleNamespace(key="k", file="1", source="1", effect="e", factor=None,
                               finding="")
    files = write_port_outputs(str(tmp_path / "o"), _audit([_layer(0)], [meta_row]))
    assert [f.name for f in files] == ["port.csv", "port_gguf.csv", "port.json"]
    assert read_csv(files[1])[0]["factor"] == ""


def test_a_failed_write_leaves_the_folder_as_it_was(tmp_path, monkeypatch) -> None:
    import engine.probe.port.export as export

    out = tmp_path / "out"
    out.mkdir()
    (out / "port.csv").write_text("old", encoding="utf-8")

    def fail(path, data):
        raise OSError("disk full")

    monkeypatch.setattr(export, "write_json", fail)
    with pytest.raises(OSError):
        write_port_outputs(out, _audit([_layer(0)]))
    assert [p.name for p in out.iterdir()] == ["port.csv"]
    assert (out / "port.csv").read_text(encoding="utf-8") == "old"


def test_the_files_are_staged_in_a_hidden_audit_model_folder(tmp_path, folder_at_write) -> None:
    """While writing, ``out`` holds one hidden folder named for the command, nothing else."""
    import engine.probe.port.export as export

    seen = folder_at_write(export, "write_json", tmp_path)
    write_port_outputs(tmp_path, _audit([_layer(0)]))
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0][0].startswith(".audit-model-"), seen
    assert sorted(p.name for p in tmp_path.iterdir()) == ["port.csv", "port.json"]
