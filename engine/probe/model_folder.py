"""A model folder is untrusted data: check config.json and the weights' headers before building.

Nothing here imports transformers or torch. :func:`inspect_model_dir` reads config.json within
size and depth limits, checks the type and range of every size field it uses, refuses a folder
that needs code of its own (``auto_map``: trust_remote_code) or pickled weights only loadable
without ``weights_only``, reads the safetensors headers (8-byte length + JSON, no tensor data) to
count the parameters and the layers the weights really hold, checks config against weights,
checks that every file a library reads whole (tokenizer.json, vocabularies, ...) is a regular
file within its size, and estimates the memory the audit needs before anything is built (the
exact count of the config's tensors, with transformers, is :mod:`engine.probe.memory`'s). Both JSON documents are read by the
lab's bounded reader (:mod:`engine.readers`); every refusal of a file is one
:class:`FileFormatError` line, "FILE: field: what is wrong", its option ``model``.
"""

from __future__ import annotations

import math
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from engine.errors import ConfigError, FileFormatError, quote
from engine.readers.json_file import check_file, join_path, parse_json, read_json
from engine.readers.schema import Int, ListOf, Nullable, Record, Text, describe, errors_in_file

CONFIG_MAX_BYTES = 4_000_000
HEADER_MAX_BYTES = 100_000_000
#: a weights file's size is not limited (only its header is read), but it must be a regular file
WEIGHTS_MAX_BYTES = 2**60
#: sanity bounds of a config's sizes (far above any published model)
LIMITS = {"layers": 1_000, "heads": 4_096, "width": 131_072, "head_dim": 4_096,
          "positions": 10_000_000, "vocab": 10_000_000}
#: (what, the config keys that may hold it, in order): a cross-check only (the weights' layer
#: count, the memory estimate); the shapes the audit uses are measured on the built model
SIZE_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("layers", ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers")),
    ("heads", ("num_attention_heads", "n_head", "num_heads", "n_heads",
               "encoder_attention_heads")),
    ("width", ("hidden_size", "n_embd", "d_model", "dim")),
)
#: further layer counts (encoder-decoder models)
EXTRA_LAYER_KEYS = ("num_decoder_layers", "encoder_layers", "decoder_layers")
#: sub-configs that may hold the sizes when the top level has none (a multimodal model's text
#: part; T5Gemma's encoder and decoder)
SIZE_SECTIONS = ("text_config", "encoder", "decoder", "text_encoder")
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
                "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|layer|h|block|blocks)\.(\d+)(?:\.|$)")
#: the fields of config.json read besides the sizes (a list of names; other keys are the model's)
_CONFIG = Record({"model_type": Text(max_chars=200, what="a non-empty string"),
                  "architectures": Nullable(ListOf(Text(max_chars=200), what="a list of names")),
                  "_name_or_path": Nullable(Text(max_chars=4096))},
                 required=frozenset({"model_type"}), extra="keep")
#: a tensor's entry in a safetensors header (other keys are kept unread)
_TENSOR = Record({"dtype": Text(max_chars=20, choices=tuple(_DTYPE_BYTES)),
                  "shape": ListOf(Int(0, 2**40 - 1), max_items=64, what="a list of sizes"),
                  "data_offsets": ListOf(Int(0), min_items=2, max_items=2,
                                         what="a list [begin, end]")},
                 required=frozenset({"dtype", "shape", "data_offsets"}), extra="keep")


@dataclass(frozen=True)
class ModelInfo:
    """What config.json (and the weights' headers) say, read without transformers."""

    path: Path
    name: str
    model_type: str
    architectures: tuple[str, ...]
    #: layers, heads and width: what the config says (None: it names none) until the model is
    #: built, then what its attention calls carry (engine.probe.loader.wrap_model)
    n_layers: int | None
    n_heads: int | None
    d_model: int | None
    max_positions: int
    head_dim: int | None = None
    n_params: int | None = None  #: counted in the safetensors headers (None: no headers)

    @property
    def d_k(self) -> int | None:
        if self.head_dim:
            return self.head_dim
        return self.d_model // self.n_heads if self.d_model and self.n_heads else None


def inspect_model_dir(folder: Path, name: str | None = None, tokens: int = 512) -> ModelInfo:
    """Read and check a model folder (see the module docstring); ``tokens`` sizes the memory
    estimate (the longest text the audit will run)."""
    cfg_path = folder / "config.json"
    if not os.path.lexists(cfg_path):  # (a folder, a FIFO, a broken link: read_json says so)
        raise ConfigError("model", f"{str(folder)!r} is not a Hugging Face model folder (no "
                          "config.json)")
    label = str(cfg_path)
    cfg = read_json(cfg_path, max_bytes=CONFIG_MAX_BYTES, kind="model's config.json",
                    option="model")
    if not isinstance(cfg, dict):
        _refuse(label, "top level", f"must be a JSON object, not {describe(cfg)}")
    with errors_in_file(label, option="model"):
        _CONFIG.check(cfg)
    model_type = cfg["model_type"].strip()
    if not model_type:
        _refuse(label, "model_type", f"must be a non-empty string, got {quote(cfg['model_type'])}")
    if "auto_map" in cfg:
        _refuse(label, "auto_map", "this model needs Python code of its own (trust_remote_code); "
                "the lab runs no code from a model folder")
    archs = cfg.get("architectures") or []
    sizes, at = cfg, ""  # at: where the sizes are (a multimodal model's text_config, ...)
    if not any(k in cfg for _w, keys in SIZE_KEYS for k in keys):
        sizes, at = next(((cfg[s], s) for s in SIZE_SECTIONS if isinstance(cfg.get(s), dict)),
                         (cfg, ""))
    src = (label, at, sizes)
    n_layers = _size(src, *SIZE_KEYS[0], optional=True)
    n_heads = _size(src, *SIZE_KEYS[1], optional=True)
    d_model = _size(src, *SIZE_KEYS[2], optional=True)
    layer_counts = [n_layers or 0] + [_size(src, "layers", (k,)) for k in EXTRA_LAYER_KEYS
                                      if k in sizes]
    head_dim = None  # (a hint only: an architecture may ignore a stale head_dim key)
    for key in ("head_dim", "d_kv"):
        if sizes.get(key) is not None:
            head_dim = _size(src, "head_dim", (key,))
            break
    if head_dim is None and n_heads and d_model and d_model % n_heads:
        _refuse(label, _key(src, SIZE_KEYS[1][1]), f"{n_heads} heads do not divide the width "
                f"{d_model}")
    max_pos = _size(src, "positions", ("max_position_embeddings", "n_positions", "max_seq_len",
                                       "n_ctx"), default=512)
    vocab = _size(src, "vocab", ("vocab_size",), default=0)
    if name is None:
        nm = cfg.get("_name_or_path")
        name = (nm.strip() if isinstance(nm, str) else "") or folder.resolve().name
    n_params, weight_layers, widths = _weights(folder)
    if weight_layers is not None and max(layer_counts) > weight_layers:
        _refuse(label, _key(src, SIZE_KEYS[0][1]), f"{max(layer_counts)} layers, but the "
                f"weights hold {weight_layers}")
    own_width = any(k in sizes for k in ("word_embed_proj_dim", "embedding_size",
                                          "input_embedding_size", "embed_dim"))
    if widths and not own_width and d_model is not None and d_model not in widths:
        _refuse(label, _key(src, SIZE_KEYS[2][1]), f"{d_model}, but the weights' embeddings "
                f"are {sorted(widths)[0]} wide")
    check_library_files(folder)
    info = ModelInfo(folder, name, model_type, tuple(archs), n_layers, n_heads, d_model,
                     max_pos, head_dim, n_params)
    check_memory(info, max(layer_counts), vocab, tokens, label)
    return info


#: the files of a model folder that transformers or a tokenizer library reads whole, and the
#: most bytes the lab lets them have (the largest published: Gemma's tokenizer.json, ~34 MB;
#: a vocabulary or merges file, a few MB; the JSON settings, kB): checked before either reads
#: them, since an 800 MB tokenizer.json costs them 4 GB before any error
LIBRARY_FILES = {"tokenizer.json": 100_000_000, "tokenizer_config.json": 16_000_000,
                 "special_tokens_map.json": 4_000_000, "added_tokens.json": 16_000_000,
                 "vocab.json": 32_000_000, "vocab.txt": 32_000_000, "merges.txt": 32_000_000,
                 "generation_config.json": 4_000_000, "chat_template.json": 4_000_000,
                 "chat_template.jinja": 4_000_000, "preprocessor_config.json": 4_000_000,
                 "processor_config.json": 4_000_000, "model.safetensors.index.json": 64_000_000,
                 "pytorch_model.bin.index.json": 64_000_000, "bpe.codes": 32_000_000}
#: further files read whole, by their ending (SentencePiece and tiktoken vocabularies)
LIBRARY_SUFFIXES = {".model": 64_000_000, ".spm": 64_000_000, ".tiktoken": 32_000_000}


def check_library_files(folder: Path) -> None:
    """Every file of ``folder`` a library reads whole is a regular file within its size
    (LIBRARY_FILES, LIBRARY_SUFFIXES): a FIFO named tokenizer.json would block the tokenizer
    forever, a huge one exhaust memory. Refused with one FileFormatError line, option model."""
    for name, limit in LIBRARY_FILES.items():
        path = folder / name
        if os.path.lexists(path):
            check_file(path, max_bytes=limit, kind=name, option="model")
    try:
        entries = sorted(folder.iterdir())[:10_000]
    except OSError as exc:
        raise ConfigError("model", f"cannot list {str(folder)!r}: {exc.strerror or exc}"
                          ) from None
    for path in entries:
        limit = LIBRARY_SUFFIXES.get(path.suffix.lower())
        if limit is not None:
            check_file(path, max_bytes=limit, kind=f"{path.suffix} vocabulary", option="model")


def _refuse(file: str, where: str, problem: str) -> NoReturn:
    raise FileFormatError(file, where, problem, "model")


#: (config.json's path, the field path of the sizes in it, the object that holds them)
_Sizes = tuple[str, str, dict[str, Any]]


def _key(src: _Sizes, keys: tuple[str, ...]) -> str:
    """The field path of the first of ``keys`` present (of the first, if none is)."""
    _label, at, cfg = src
    return join_path(at, next((k for k in keys if k in cfg), keys[0]))


def _size(src: _Sizes, what: str, keys: tuple[str, ...], default: int | None = None,
          optional: bool = False) -> int | None:
    """The first of ``keys`` present: a whole number from 1 to LIMITS[what] (missing: the
    default, or None when ``optional``)."""
    label, at, cfg = src
    hi = LIMITS[what]
    for key in keys:
        if key in cfg:
            with errors_in_file(label, at, option="model"):  # 3.0 too: transformers needs an int
                v = Int(what=f"a whole number from 1 to {hi:,}", exact=True).check(cfg[key],
                                                                                   (key,))
            if not 1 <= v <= hi:
                if default is not None and v <= 0:
                    return default  # "no limit" spelled 0 or -1 (positions, vocab)
                _refuse(label, join_path(at, key), f"{quote(v)} is out of range 1 to {hi:,}")
            return v
    if default is None and not optional:
        also = f"; also read as {', '.join(keys[1:])}" if len(keys) > 1 else ""
        _refuse(label, join_path(at, keys[0]), f"required, but missing (the number of {what}"
                f"{also})")
    return default


def _weights(folder: Path) -> tuple[int | None, int | None, set[int]]:
    """(parameters, layers, embedding widths) the safetensors headers describe; (None, None,
    set()) when the folder has no safetensors file. A folder with no weights at all, or only
    pickled ones of an unknown format, is refused."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        if any(folder.glob("*.bin")) or any(folder.glob("*.pt")) or any(folder.glob("*.pth")):
            return None, None, set()  # torch weights: loaded with weights_only=True
        raise ConfigError("model", f"{str(folder)!r}: no weights file (model.safetensors)")
    total = 0
    layers = -1
    widths: set[int] = set()
    for f in files:
        for tname, shape in _header_tensors(f):
            total += math.prod(shape)
            m = _LAYER_INDEX.search(tname)
            if m:
                layers = max(layers, int(m.group(1)))
            low = tname.lower()
            if len(shape) == 2 and any(w in low for w in ("word_embeddings", "wte.", "embed_tokens",
                                                          "shared.", "embed_in")):
                widths.add(int(shape[1]))
    return total, (layers + 1 if layers >= 0 else None), widths


def _header_tensors(path: Path) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every tensor in a safetensors file's header, after checking that the
    header is sound and the data it points to is inside the file."""
    label = str(path)
    size = check_file(path, max_bytes=WEIGHTS_MAX_BYTES, kind="weights file", option="model")
    try:
        with path.open("rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                _refuse(label, "", "too short for a safetensors file")
            (n,) = struct.unpack("<Q", head)
            if n > min(HEADER_MAX_BYTES, size - 8):
                _refuse(label, "", f"header length {n:,} does not fit the file ({size:,} bytes)")
            raw = fh.read(n)
    except OSError as exc:
        _refuse(label, "", f"cannot read: {exc.strerror or exc}")
    try:
        header = parse_json(raw, label, max_bytes=HEADER_MAX_BYTES, kind="safetensors header",
                            option="model", max_depth=4)
    except FileFormatError as exc:  # its field path is inside the header
        _refuse(label, join_path("header", exc.where), exc.problem)
    if not isinstance(header, dict):
        _refuse(label, "header", f"must be a JSON object, not {describe(header)}")
    out = []
    data_size = size - 8 - n
    for tname, entry in header.items():
        if tname == "__metadata__":
            continue
        with errors_in_file(label, "header", option="model"):
            entry = _TENSOR.check(entry, (tname,))
        shape, offs = entry["shape"], entry["data_offsets"]
        nbytes = math.prod(shape) * _DTYPE_BYTES[entry["dtype"]]
        if not offs[0] <= offs[1] <= data_size or offs[1] - offs[0] != nbytes:
            _refuse(label, join_path("header", tname), f"data offsets {quote(offs)} do not match "
                    "its shape or the file (truncated?)")
        out.append((tname, tuple(shape)))
    return out


def estimate_bytes(info: ModelInfo, layers: int, vocab: int, tokens: int) -> int:
    """Memory the audit needs: float32 weights (counted, or estimated from the config: per
    layer 4 d^2 attention + 8 d^2 MLP, plus the embeddings) and, per layer, a few float32
    (heads, tokens, tokens) attention arrays."""
    d = info.d_model or 0
    params = info.n_params if info.n_params is not None else layers * 12 * d * d + vocab * d
    attention = layers * 4 * (info.n_heads or 1) * tokens * tokens * 4
    return int(params * 4 * 1.2 + attention + 200e6)


def available_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (Linux), else physical pages free; None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(info: ModelInfo, layers: int, vocab: int, tokens: int, label: str) -> None:
    need = estimate_bytes(info, layers, vocab, tokens)
    have = available_bytes()
    if have is not None and need > 0.9 * have:
        _refuse(label, "", f"the model needs about {need / 1e9:.1f} GB to load and audit "
                f"{tokens} tokens; {have / 1e9:.1f} GB are available")
