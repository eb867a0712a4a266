"""Model folders: refused early and clearly; nothing heavy imported before a model is loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.probe.config import ProbeConfig
from engine.probe.loader import SUPPORTED, inspect_model_dir, resolve_model_dir

ROOT = Path(__file__).resolve().parents[3]


def _folder(tmp_path: Path, **cfg) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return tmp_path


def test_missing_folder_is_refused_naming_the_model_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        resolve_model_dir(str(tmp_path / "nope"))
    assert err.value.field == "model" and "does not exist" in err.value.message


def test_folder_without_config_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no config\.json"):
        inspect_model_dir(tmp_path)


def test_unsupported_architecture_is_named(tmp_path: Path) -> None:
    folder = _folder(tmp_path, model_type="t5", architectures=["T5ForConditionalGeneration"])
    with pytest.raises(ConfigError) as err:
        inspect_model_dir(folder)
    assert "t5" in err.value.message and "T5ForConditionalGeneration" in err.value.message
    assert "gpt2" in err.value.message  # says what is supported


def test_supported_config_is_read_without_transformers(tmp_path: Path) -> None:
    folder = _folder(tmp_path, model_type="gpt2", n_layer=3, n_head=4, n_embd=64, n_positions=128)
    info = inspect_model_dir(folder)
    assert (info.n_layers, info.n_heads, info.d_k, info.max_positions) == (3, 4, 16, 128)
    assert SUPPORTED[info.model_type].causal


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
