"""A zoo of tiny random models, one per attention convention, built from transformers' configs.

Nothing is downloaded: each entry is a config (2-3 layers, width 32-48, 4 heads) and a seed; the
attention projections get weights of std ~0.15-0.6 so that the softmax is sharp enough for
every head's scale to be identifiable on a 24-token input. The tests audit every entry and check
the documented scale of every layer and the reported features; ``docs/architectures.md``'s
table is generated from the same audits (``python -m engine.probe.zoo --write FILE``), so it
says what was measured here, not what the papers claim.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.probe.scale_fit import AS_DECLARED

#: the token ids every zoo audit reads (vocabulary 64)
ZOO_TOKENS = 24
ZOO_VOCAB = 64


@dataclass(frozen=True)
class ZooEntry:
    """One architecture of the zoo and what its audit must show."""

    name: str  #: as the table names it
    config: str  #: the transformers config class
    kwargs: dict[str, Any]
    #: features every site of a block must report ({block: (feature prefixes)})
    features: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: the scale the architecture documents, as s * sqrt(d_k), per layer (one value: every
    #: layer); written from the papers and configs, not from this package's code
    documented: tuple[float, ...] = (1.0,)
    qk_std: float = 0.15  #: std of the attention projections' weights
    note: str = ""  #: what the entry demonstrates

    def documented_at(self, layer: int) -> float:
        return self.documented[layer] if len(self.documented) > 1 else self.documented[0]


def _small(**kw: Any) -> dict[str, Any]:
    base = {"vocab_size": ZOO_VOCAB}
    base.update(kw)
    return base


_DEC = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 64, "max_position_embeddings": 64}

ZOO: tuple[ZooEntry, ...] = (
    ZooEntry("BERT", "BertConfig", _small(**_DEC),
             {"encoder": ("bidirectional",)}, note="the 2017 rule, encoder"),
    ZooEntry("GPT-2, scale_attn_weights off", "GPT2Config",
             _small(n_embd=32, n_layer=2, n_head=4, n_positions=64, scale_attn_weights=False,
                    bos_token_id=0, eos_token_id=0),
             {"decoder": ("causal",)}, documented=(math.sqrt(8),), qk_std=0.05,
             note="GPT-2 flag: no scale"),
    ZooEntry("GPT-2, scale_attn_by_inverse_layer_idx", "GPT2Config",
             _small(n_embd=32, n_layer=3, n_head=2, n_positions=64,
                    scale_attn_by_inverse_layer_idx=True, bos_token_id=0, eos_token_id=0),
             {"decoder": ("causal",)}, documented=(1.0, 1 / 2, 1 / 3), qk_std=0.3,
             note="GPT-2 flag: 1/(layer+1) on top"),
    ZooEntry("Llama", "LlamaConfig", _small(**_DEC, num_key_value_heads=4),
             {"decoder": ("causal", "RoPE")}, note="RoPE rotates q and k"),
    ZooEntry("Llama, YaRN x4", "LlamaConfig",
             _small(**_DEC, num_key_value_heads=4,
                    rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0,
                                     "original_max_position_embeddings": 16}),
             {"decoder": ("causal", "RoPE, q and k x")},
             documented=((0.1 * math.log(4) + 1) ** 2,), note="YaRN: logits x (0.1 ln 4 + 1)^2"),
    ZooEntry("Qwen2", "Qwen2Config", _small(**_DEC, num_key_value_heads=2),
             {"decoder": ("causal", "GQA 4q/2kv", "RoPE")}, note="grouped-query attention"),
    ZooEntry("Mistral", "MistralConfig", _small(**_DEC, num_key_value_heads=1, sliding_window=8),
             {"decoder": ("sliding window 8", "MQA", "RoPE")},
             note="sliding window, one key head"),
    ZooEntry("OPT", "OPTConfig",
             _small(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, ffn_dim=64,
                    word_embed_proj_dim=32, max_position_embeddings=64),
             {"decoder": ("causal", "q pre-scaled x0.3536")},
             note="q x 1/sqrt(d_k) after q_proj, then scaling 1"),
    ZooEntry("T5", "T5Config",
             _small(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                    decoder_start_token_id=0),
             {"encoder": ("bidirectional", "relative position bias"),
              "decoder": ("causal", "relative position bias"),
              "cross": ("cross-attention",)},
             documented=(math.sqrt(8),),
             note="no scale (folded into the init); bias through the call"),
    ZooEntry("GPT-Neo", "GPTNeoConfig",
             _small(hidden_size=32, num_layers=2, num_heads=4, max_position_embeddings=64,
                    attention_types=[[["global", "local"], 1]], window_size=8,
                    bos_token_id=0, eos_token_id=0),
             {"decoder": ("",)}, documented=(math.sqrt(8),), qk_std=0.05,
             note="no scale; outside the interface (adapter); local layers"),
    ZooEntry("Gemma 2", "Gemma2Config",
             _small(hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=8, intermediate_size=64,
                    query_pre_attn_scalar=12, sliding_window=8, max_position_embeddings=64),
             {"decoder": ("GQA 4q/2kv", "RoPE", "soft-cap 50")},
             documented=(math.sqrt(8 / 12),), qk_std=0.6,
             note="query_pre_attn_scalar = d_model/heads != head_dim (as 27B); cap 50"),
    ZooEntry("Qwen3", "Qwen3Config", _small(**_DEC, num_key_value_heads=2, head_dim=8),
             {"decoder": ("causal", "GQA 4q/2kv", "QK-norm")}, note="QK-norm"),
    ZooEntry("gpt-oss", "GptOssConfig",
             _small(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=8, intermediate_size=32,
                    num_local_experts=2, num_experts_per_tok=1, sliding_window=8,
                    max_position_embeddings=64),
             {"decoder": ("GQA 4q/2kv", "sinks")},
             documented=((0.1 * math.log(32) + 1) ** 2,),
             note="attention sinks; YaRN (factor 32) by default"),
    ZooEntry("Bloom", "BloomConfig", _small(hidden_size=32, n_layer=2, n_head=4),
             {"decoder": ("causal", "ALiBi")},
             note="ALiBi; outside the interface (adapter)"),
    ZooEntry("Granite", "GraniteConfig",
             _small(**_DEC, num_key_value_heads=4, attention_multiplier=0.25),
             {"decoder": ("causal", "RoPE")}, documented=(0.25 * math.sqrt(8),),
             note="attention_multiplier replaces the scale"),
)


def zoo_ids(n: int = ZOO_TOKENS, seed: int = 3) -> list[int]:
    return [int(i) for i in np.random.default_rng(seed).integers(1, ZOO_VOCAB, size=n)]


def build(entry: ZooEntry, seed: int = 0) -> Any:
    """The entry's tiny random model, wrapped for the probe (seconds)."""
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    from engine.probe.loader import info_from_config, wrap_model

    hf_logging.set_verbosity_error()  # tiny configs draw warnings about real-size conventions
    cfg = getattr(transformers, entry.config)(**entry.kwargs)
    torch.manual_seed(seed)
    net = transformers.AutoModel.from_config(cfg, attn_implementation="eager")
    loaded = wrap_model(net, info_from_config(net.config, entry.name))
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for mod in loaded.tap.modules():
            for sub in mod.modules():
                w = getattr(sub, "weight", None)
                if sub is not mod and isinstance(w, torch.Tensor) and w.ndim == 2 and \
                        "Norm" not in type(sub).__name__ and "Embedding" not in type(sub).__name__:
                    w.copy_(torch.randn(w.shape, generator=gen) * entry.qk_std)
    return loaded


def audit_entry(entry: ZooEntry, bugs: dict[int, str] | None = None) -> Any:
    """Build and audit one entry on the zoo's tokens."""
    from engine.probe.audit import audit_ids

    return audit_ids(build(entry), zoo_ids(), bugs or {})


# -- the table ---------------------------------------------------------------------------------

def _blocks(result: Any) -> list[str]:
    seen: list[str] = []
    for s in result.sites:
        if s.block not in seen:
            seen.append(s.block)
    return seen


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _norm_feature(f: str) -> str:
    """A feature as the table shows it (the YaRN factor and pre-scale kept, counts dropped)."""
    return re.sub(r" \(longer than the text\)", " (not reached)", f)


def table_rows(entry: ZooEntry, result: Any) -> list[dict[str, str]]:
    """One row per block of the entry's audit: features, declared and measured s * sqrt(d_k),
    soft-cap, verdict."""
    sq = math.sqrt(result.d_k)
    rows = []
    measured = result.layer_scale_x_sqrt_dk()
    for block in _blocks(result):
        idx = [i for i, s in enumerate(result.sites) if s.block == block]
        feats: list[str] = []
        for i in idx:
            for f in result.sites[i].features:
                f = _norm_feature(f)
                if f not in feats:
                    feats.append(f)
        decl = list(dict.fromkeys(_fmt(result.declared_scale[i] * sq)
                                  if result.sites[i].declared_known else "unknown" for i in idx))
        meas = [_fmt(measured[i]) for i in idx]
        caps = []
        for i in idx:
            c = result.sites[i].softcap
            if c is not None:
                finite = c[np.isfinite(c)]
                caps.append(f"{np.median(finite):.3g}" if finite.size else "not reached")
        verdicts = list(dict.fromkeys(result.layer_verdicts[i] for i in idx))
        rows.append({
            "architecture": entry.name if block == _blocks(result)[0] else "",
            "block": block,
            "features": "; ".join(feats),
            "declared": ", ".join(decl) + f" ({result.sites[idx[0]].declared_source})",
            "measured": ", ".join(meas),
            "soft-cap": ", ".join(sorted(set(caps))) if caps else "",
            "verdict": _verdict_cell(_state(result, idx), verdicts),
        })
    return rows


def _verdict_cell(state: str, verdicts: list[str]) -> str:
    """The state and the verdicts that say more than it ("as declared (source)": the declared
    column has the source)."""
    words = [v for v in verdicts if not v.startswith(AS_DECLARED)]
    return f"{state}: {'; '.join(words)}" if words else state


def _state(result: Any, idx: list[int]) -> str:
    if not all(result.sites[i].matches_declared for i in idx):
        return "MISMATCH"
    return "as declared" if all(result.sites[i].declared_known for i in idx) else \
        "declared unknown"


COLUMNS = ("architecture", "block", "features", "declared", "measured", "soft-cap", "verdict")


def markdown(rows: Sequence[dict[str, str]]) -> str:
    head = "| " + " | ".join(COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
    body = ["| " + " | ".join(r[c].replace("|", "/") for c in COLUMNS) + " |" for r in rows]
    return "\n".join([head, rule, *body])


#: the bugs injected into each of these entries for the second table, one per audit
INJECT_DEMO: tuple[tuple[str, int, str], ...] = (
    ("Llama", 1, "twice"), ("Llama", 0, "dmodel"), ("T5", 3, "after_softmax"),
    ("T5", 4, "twice"), ("Gemma 2", 1, "head_dim"), ("Gemma 2", 0, "softcap_off"),
    ("OPT", 1, "none"), ("GPT-Neo", 1, "after_softmax"), ("Bloom", 0, "twice"),
    ("gpt-oss", 1, "none"),
)


def inject_rows(audits: Callable[[str, dict[int, str]], Any]) -> list[dict[str, str]]:
    """One row per planted bug: where it went and what the audit found (flagged layers)."""
    rows = []
    for name, layer, kind in INJECT_DEMO:
        r = audits(name, {layer: kind})
        found = r.mismatched_layers()
        rows.append({"architecture": name, "injected": f"layer {layer}: {kind}",
                     "found in": ", ".join(f"layer {i}" for i in found) or "nowhere",
                     "audit says": f"{r.layer_verdicts[layer]}; {r.sites[layer].mismatch}"})
    return rows


def markdown_inject(rows: Sequence[dict[str, str]]) -> str:
    cols = ("architecture", "injected", "found in", "audit says")
    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|",
                      *["| " + " | ".join(r[c].replace("|", "/") for c in cols) + " |"
                        for r in rows]])


BEGIN, END = "<!-- zoo-table:begin -->", "<!-- zoo-table:end -->"
BEGIN_INJ, END_INJ = "<!-- zoo-inject:begin -->", "<!-- zoo-inject:end -->"


def generated_tables(audits: Callable[[str, dict[int, str]], Any]) -> tuple[str, str]:
    """(the conventions table, the injection table), from ``audits(name, bugs)``."""
    rows = [row for e in ZOO for row in table_rows(e, audits(e.name, {}))]
    return markdown(rows), markdown_inject(inject_rows(audits))


def splice(doc: str, tables: tuple[str, str]) -> str:
    """``doc`` with the text between the markers replaced by the tables."""
    for (begin, end), table in zip(((BEGIN, END), (BEGIN_INJ, END_INJ)), tables):
        pat = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        if not pat.search(doc):
            raise ValueError(f"{begin} ... {end} not found")
        doc = pat.sub(lambda _m, t=table, b=begin, e=end: f"{b}\n{t}\n{e}", doc)
    return doc


def cached_audits() -> Callable[[str, dict[int, str]], Any]:
    """audits(name, bugs) that builds and audits each (entry, bugs) once."""
    by_name = {e.name: e for e in ZOO}
    cache: dict[tuple[str, tuple[tuple[int, str], ...]], Any] = {}

    def audits(name: str, bugs: dict[int, str]) -> Any:
        key = (name, tuple(sorted(bugs.items())))
        if key not in cache:
            cache[key] = audit_entry(by_name[name], bugs)
        return cache[key]

    return audits


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate the zoo tables of docs/architectures.md")
    ap.add_argument("--write", metavar="FILE", help="splice the tables into FILE (between its "
                    "markers); default: print them")
    args = ap.parse_args(argv)
    tables = generated_tables(cached_audits())
    if args.write:
        path = Path(args.write)
        path.write_text(splice(path.read_text(encoding="utf-8"), tables), encoding="utf-8")
    else:
        sys.stdout.write(tables[0] + "\n\n" + tables[1] + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
