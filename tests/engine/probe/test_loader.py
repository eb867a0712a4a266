"""Model folders: refused early and clearly; nothing heavy imported before a model is loaded."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.errors import ConfigError, FileFormatError
from engine.probe.config import ProbeConfig
from engine.probe.loader import inspect_model_dir, resolve_model_dir

ROOT = Path(__file__).resolve().parents[3]


def _folder(tmp_path: Path, **cfg) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return tmp_path


def _safetensors(folder: Path, tensors: dict[str, list[int]], name: str = "model.safetensors"
                 ) -> Path:
    """A safetensors file of zeros with the given (name: shape) float32 tensors."""
    header, offset = {}, 0
    for tname, shape in tensors.items():
        n = 4 * int(np.prod(shape))
        header[tname] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    (folder / name).write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    return folder / name


GPT2_TENSORS = {"wte.weight": [64, 64], **{f"h.{i}.attn.c_attn.weight": [64, 192]
                                           for i in range(3)}}


def test_missing_folder_is_refused_naming_the_model_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        resolve_model_dir(str(tmp_path / "nope"))
    assert err.value.field == "model" and "does not exist" in err.value.message


def test_folder_without_config_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no config\.json"):
        inspect_model_dir(tmp_path)


def test_a_folder_without_weights_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, model_type="t5", architectures=["T5ForConditionalGeneration"],
                     num_layers=2, num_heads=4, d_model=32, d_kv=8)
    with pytest.raises(ConfigError, match="no weights file"):
        inspect_model_dir(folder)


def test_config_is_read_and_checked_against_the_weights_without_transformers(tmp_path: Path) -> None:
    folder = _folder(tmp_path, model_type="gpt2", n_layer=3, n_head=4, n_embd=64, n_positions=128)
    _safetensors(folder, GPT2_TENSORS)
    info = inspect_model_dir(folder)
    assert (info.n_layers, info.n_heads, info.d_k, info.max_positions) == (3, 4, 16, 128)
    assert info.n_params == 64 * 64 + 3 * 64 * 192


def _refusal(folder: Path) -> str:
    """The one line of the refusal: the file, the field path, the problem (for --model)."""
    with pytest.raises(FileFormatError) as err:
        inspect_model_dir(folder)
    msg = str(err.value)
    assert err.value.option == "model" and "\n" not in msg
    return msg


GOOD = {"model_type": "gpt2", "n_layer": 3, "n_head": 4, "n_embd": 64}


@pytest.mark.parametrize("text, field, what", [
    ("[1, 2, 3]", "top level", "not a list"),
    (json.dumps({**GOOD, "n_head": "abc"}), "n_head", "whole number"),
    (json.dumps({**GOOD, "n_head": [12]}), "n_head", "whole number"),
    (json.dumps({**GOOD, "n_head": True}), "n_head", "whole number"),
    (json.dumps({**GOOD, "n_head": 0}), "n_head", "out of range"),
    ('{"model_type": "gpt2", "n_layer": Infinity, "n_head": 4, "n_embd": 64}', "config.json",
     "Infinity"),
    (json.dumps({**GOOD, "n_layer": 3.5}), "n_layer", "whole number"),
    # transformers reads the raw config: 4.0 would reach range() and torch as a float
    (json.dumps({**GOOD, "n_head": 4.0}), "n_head", "whole number"),
    (json.dumps({"model_type": "llava", "text_config": {"num_hidden_layers": 3,
                 "num_attention_heads": "x", "hidden_size": 64}}),
     "text_config.num_attention_heads", "whole number"),
    (json.dumps({**GOOD, "n_layer": 10**30}), "n_layer", "out of range"),
    (json.dumps({**GOOD, "n_head": 5}), "n_head", "do not divide"),
    (json.dumps({**GOOD, "model_type": 7}), "model_type", "non-empty string"),
    (json.dumps({**GOOD, "auto_map": {"AutoModel": "x.Model"}}), "auto_map",
     "trust_remote_code"),
    ('{"a": ' * 100_000 + "1" + "}" * 100_000, "config.json", "nested"),
])
def test_a_bad_config_is_refused_in_one_line_naming_file_and_field(tmp_path: Path, text: str,
                                                                   field: str, what: str) -> None:
    (tmp_path / "config.json").write_text(text, encoding="utf-8")
    _safetensors(tmp_path, GPT2_TENSORS)
    msg = _refusal(tmp_path)
    assert "config.json" in msg and field in msg and what in msg, msg


def test_a_config_with_more_layers_than_its_weights_is_refused_before_anything_is_built(
        tmp_path: Path) -> None:
    """A copy of a model with num_hidden_layers 100,000 used to hang at 5 GB: the layers the
    weights hold are counted in the safetensors header (no tensor is read)."""
    _folder(tmp_path, **{**GOOD, "n_layer": 1000})
    _safetensors(tmp_path, GPT2_TENSORS)
    msg = _refusal(tmp_path)
    assert "n_layer" in msg and "1000 layers" in msg and "hold 3" in msg, msg
    _folder(tmp_path, **{**GOOD, "n_layer": 100_000})
    assert "out of range" in _refusal(tmp_path)


def test_a_config_wider_than_its_embeddings_is_refused(tmp_path: Path) -> None:
    _folder(tmp_path, **{**GOOD, "n_embd": 128})
    _safetensors(tmp_path, GPT2_TENSORS)
    assert "n_embd" in _refusal(tmp_path)


def test_memory_is_estimated_before_building(tmp_path: Path, monkeypatch) -> None:
    import engine.probe.model_folder as mf

    _folder(tmp_path, **GOOD)
    _safetensors(tmp_path, GPT2_TENSORS)
    monkeypatch.setattr(mf, "available_bytes", lambda: 100_000_000)
    assert "GB are available" in _refusal(tmp_path)


@pytest.mark.parametrize("damage", ["short", "length", "offsets", "dtype", "json"])
def test_a_damaged_safetensors_header_is_refused(tmp_path: Path, damage: str) -> None:
    _folder(tmp_path, **GOOD)
    path = _safetensors(tmp_path, GPT2_TENSORS)
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    if damage == "short":
        path.write_bytes(raw[:5])
    elif damage == "length":
        path.write_bytes(struct.pack("<Q", 10**12) + raw[8:])
    elif damage in ("offsets", "dtype"):
        entry = header["wte.weight"]
        if damage == "offsets":
            entry["data_offsets"] = [0, 10**9]
        else:
            entry["dtype"] = "X99"
        new = json.dumps(header).encode()
        path.write_bytes(struct.pack("<Q", len(new)) + new + raw[8 + n:])
    else:
        path.write_bytes(struct.pack("<Q", 5) + b"{oops" + raw[8 + n:])
    msg = _refusal(tmp_path)
    assert "model.safetensors" in msg, msg


def test_empty_text_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        ProbeConfig(text=" \n\t")
    assert err.value.field == "text"


def test_importing_the_probe_and_its_cli_loads_neither_transformers_nor_torch() -> None:
    code = ("import sys, main, engine.probe.analyze, engine.probe.export, ui.cli.probe_model\n"
            "main.build_parser()\n"
            "print(','.join(m for m in ('transformers', 'torch') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


class _CountingTokenizer:
    """Word-level stand-in that records how many characters it was asked to read."""

    def __init__(self) -> None:
        self.read: list[int] = []

    def __call__(self, text, add_special_tokens=True, truncation=False, max_length=None):
        self.read.append(len(text))
        ids = list(range(len(text.split())))
        return {"input_ids": ids[:max_length] if truncation else ids}

    def convert_ids_to_tokens(self, ids):
        return [str(i) for i in ids]


def test_a_long_text_is_never_tokenized_whole() -> None:
    """A 50 MB text used to be tokenized whole (8.9 M tokens, 7 GB) before the cut to 512: only
    its start is read now, a bounded number of characters per token kept."""
    from engine.probe.loader import TOKENIZE_CHARS_PER_TOKEN, LoadedModel, tokenize

    tok = _CountingTokenizer()
    loaded = LoadedModel(info=None, model=None, tokenizer=tok, load_s=0.0, max_tokens=512)
    text = "word " * 2_000_000  # 10 MB
    out = tokenize(loaded, text, max_tokens=16)
    assert len(out.ids) == 16 and out.truncated_from == -1
    assert max(tok.read) <= 16 * TOKENIZE_CHARS_PER_TOKEN
    short = tokenize(loaded, "a b c d", max_tokens=16)  # a short text: counted whole
    assert short.truncated_from is None and len(short.ids) == 4
    assert tokenize(loaded, "w " * 40, max_tokens=16).truncated_from == 40


@pytest.mark.parametrize("cfg, shape", [
    ({"model_type": "bart", "d_model": 64, "encoder_layers": 3, "decoder_layers": 3,
      "encoder_attention_heads": 4, "decoder_attention_heads": 4}, (3, 4, 64)),
    ({"model_type": "t5gemma", "encoder": {"num_hidden_layers": 3, "num_attention_heads": 4,
                                           "hidden_size": 64, "head_dim": 16}}, (3, 4, 64)),
    ({"model_type": "mamba", "num_hidden_layers": 3, "hidden_size": 64}, (3, None, 64)),
])
def test_sizes_spelled_per_side_or_nested_or_absent_are_read_not_required(
        tmp_path: Path, cfg: dict, shape: tuple) -> None:
    """Config sizes are a cross-check (the built model's calls give the shapes): main refused
    BART and T5Gemma ("num_hidden_layers: required, but missing") and Mamba (no heads)."""
    _safetensors(_folder(tmp_path, **cfg), GPT2_TENSORS)
    info = inspect_model_dir(tmp_path)
    assert (info.n_layers, info.n_heads, info.d_model) == shape
