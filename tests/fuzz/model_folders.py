"""Hostile model folders: a config.json whose model would take gigabytes beside a weights file
of a few kB, and tokenizer files a library would read whole (huge, a FIFO, a device). Built on
demand, sparse (a 800 MB tokenizer.json costs no disk space), never downloaded."""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: a small BERT: what the hostile configs change one field of
BERT = {"model_type": "bert", "architectures": ["BertModel"], "hidden_size": 32,
        "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
        "vocab_size": 100, "max_position_embeddings": 64, "type_vocab_size": 2}
#: the one tensor the hostile folders' weights hold
EMBEDDINGS = {"embeddings.word_embeddings.weight": [100, 32]}


def bert_parameters(cfg: dict[str, Any]) -> int:
    """The parameters of transformers' BertModel with this config, by the architecture's formula
    (embeddings and their LayerNorm; per layer q, k, v, o with biases, two LayerNorms, the MLP
    with biases; the pooler): an independent count for the meta-device estimator."""
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    embeddings = (cfg["vocab_size"] + cfg["max_position_embeddings"] + cfg["type_vocab_size"]
                  ) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    return embeddings + cfg["num_hidden_layers"] * layer + h * h + h


def bert_buffer_bytes(cfg: dict[str, Any]) -> int:
    """BertModel's buffers: position_ids and token_type_ids, int64, one per position."""
    return 2 * 8 * cfg["max_position_embeddings"]


def model_folder(folder: Path, cfg: dict[str, Any], tensors: dict[str, list[int]] | None = None
                 ) -> Path:
    """config.json and a model.safetensors holding ``tensors`` (float32 zeros, sparse)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    header, offset = {}, 0
    for name, shape in (tensors or EMBEDDINGS).items():
        n = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    with open(folder / "model.safetensors", "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        fh.truncate(8 + len(raw) + offset)
    return folder


def sparse(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        fh.truncate(size)


#: id -> (config changes, weights' tensors): models whose memory the config decides
HOSTILE_CONFIGS: dict[str, tuple[dict[str, Any], dict[str, list[int]] | None]] = {
    "positions_10m": ({"max_position_embeddings": 10_000_000}, None),
    "type_vocab_14m": ({"type_vocab_size": 14_000_000}, None),
    "type_vocab_50m": ({"type_vocab_size": 50_000_000}, None),
    "wide_24_layers_one_tensor": ({"hidden_size": 1024, "num_hidden_layers": 24,
                                   "num_attention_heads": 16, "intermediate_size": 4096,
                                   "vocab_size": 30522},
                                  {"embeddings.word_embeddings.weight": [30522, 1024]}),
}


def hostile_config_folder(folder: Path, case: str) -> Path:
    changes, tensors = HOSTILE_CONFIGS[case]
    return model_folder(folder, {**BERT, **changes}, tensors)


#: id -> what to put in a sound model folder: files a library reads whole, made hostile
HOSTILE_LIBRARY_FILES: dict[str, Callable[[Path], None]] = {
    "tokenizer_json_800mb": lambda f: sparse(f / "tokenizer.json", 800_000_000),
    "tokenizer_config_800mb": lambda f: sparse(f / "tokenizer_config.json", 800_000_000),
    "vocab_txt_fifo": lambda f: os.mkfifo(f / "vocab.txt"),
    "special_tokens_dev_zero": lambda f: (f / "special_tokens_map.json").symlink_to("/dev/zero"),
    "sentencepiece_1gb": lambda f: sparse(f / "spiece.model", 1_000_000_000),
}


def hostile_library_folder(folder: Path, case: str) -> Path:
    model_folder(folder, BERT)
    HOSTILE_LIBRARY_FILES[case](folder)
    return folder
