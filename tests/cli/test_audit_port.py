"""audit-model --onnx / --gguf with --reference: the port beside its source folder, files written;
options that do not apply and bad files exit 2 with one line."""

from __future__ import annotations

import csv

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("gguf")

TEXT = "the query scores the key and the softmax scales the heads"


def test_onnx_and_gguf_ports_beside_their_source_folder(tmp_path, save_tiny, capsys) -> None:
    import main
    from engine.probe.loader import load_model, tokenize
    from engine.probe.port.gguf_write import write_gguf
    from engine.probe.port.roundtrip import export_onnx

    folder = save_tiny(tmp_path / "src", "llama", layers=2, heads=4, num_key_value_heads=2)
    loaded = load_model(str(folder))
    ids = tokenize(loaded, TEXT).ids
    onnx_path = export_onnx(loaded, ids, tmp_path / "m.onnx")
    gguf_path = write_gguf(loaded.model, tmp_path / "m.gguf")
    capsys.readouterr()
    assert main.main(["audit-model", "--onnx", str(onnx_path), "--reference", str(folder),
                      "--text", TEXT, "--out", str(tmp_path / "o1"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "as the source in every layer" in out or "the port scales attention as the source" in out
    rows = list(csv.DictReader(open(tmp_path / "o1" / "port.csv", encoding="utf-8")))
    assert [r["state"] for r in rows] == ["as the source"] * 2
    assert main.main(["audit-model", "--gguf", str(gguf_path), "--reference", str(folder),
                      "--text", TEXT, "--out", str(tmp_path / "o2"), "--quiet"]) == 0
    assert (tmp_path / "o2" / "port_gguf.csv").is_file()


@pytest.mark.parametrize("extra, field", [(["--inject", "0=twice"], "--inject"),
                                          (["--model", "x"], "--model")])
def test_options_that_do_not_apply_exit_2(tmp_path, capsys, extra, field) -> None:
    import main

    f = tmp_path / "m.onnx"
    f.write_bytes(b"x")
    with pytest.raises(SystemExit) as err:
        main.main(["audit-model", "--onnx", str(f), "--out", str(tmp_path / "o"), *extra])
    assert err.value.code == 2
    line = capsys.readouterr().err.strip()
    assert field in line and "\n" not in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("budget", "refused"), [("1", True), ("3", False)])
def test_the_source_loads_under_memory_budget(tmp_path, capsys, budget, refused) -> None:
    """--memory-budget applies to the port's source folder: a config describing 1.8 GB of tensors
    is refused naming a 1 GB budget before anything loads; under 3 GB the budget lets it pass (and
    the folder is refused for its weights file, which holds one small tensor)."""
    import main
    from engine.probe.port.gguf_write import write_gguf
    from engine.probe.port.roundtrip import zoo_model
    from tests.fuzz.model_folders import hostile_config_folder

    gguf_path = write_gguf(zoo_model("Llama").model, tmp_path / "l.gguf")
    folder = hostile_config_folder(tmp_path / "m", "type_vocab_14m")
    with pytest.raises(SystemExit) as err:
        main.main(["audit-model", "--gguf", str(gguf_path), "--reference", str(folder),
                   "--memory-budget", budget, "--out", str(tmp_path / "o"), "--quiet"])
    assert err.value.code == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and ("memory budget of 1 GB" in line) is refused, line
    assert not (tmp_path / "o").exists()
