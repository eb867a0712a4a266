"""Cost of the scale audit on a 0.24 B-parameter Llama-shaped model at 512 tokens (issue 28).

The goal: audit <= 4x the time and <= 1.6x the peak memory of a plain load + forward pass of the
same model. Each side runs in a fresh process (so that peak resident memory is its own), on the
same model folder (random weights, fixed seed, written once to a temporary folder with the
bundled all-MiniLM-L6-v2's tokenizer):

- plain: ``AutoModel.from_pretrained`` (eager attention) and one forward pass on 512 tokens;
- audit: :func:`engine.probe.loader.load_model` (its checks, the attention survey) and the audit
  of the same 512 tokens (capture forward pass, the fit of every head and layer).

The model: hidden 1024, 16 layers x 16 heads (d_k 64), MLP 2816, vocabulary 30522 (the
tokenizer's): 0.24 B parameters. Prints both sides and the two ratios, measured in one run.
Skips (exit 0, with a message) without transformers or the bundled model.

    .venv/bin/python bench/bench_audit_llama.py [--tokens 512] [--threads 1] [--layers 16]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _rss_peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _ids(folder: str, n: int) -> list[int]:
    from transformers import AutoTokenizer

    from engine.probe.texts import load_text_presets

    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    text = " ".join(t for _name, t in load_text_presets())
    while len(tok(text)["input_ids"]) < n:
        text += " " + text
    return tok(text)["input_ids"][:n]


def _part(kind: str, folder: str, n: int) -> dict[str, float]:
    import torch

    ids = _ids(folder, n)
    t0 = time.perf_counter()
    if kind == "plain":
        from transformers import AutoModel

        net = AutoModel.from_pretrained(folder, local_files_only=True,
                                        attn_implementation="eager").float().eval()
        t = torch.as_tensor([ids])
        with torch.inference_mode():
            net(input_ids=t, attention_mask=torch.ones_like(t))
    else:
        from engine.probe.audit import audit_tokens, run_audit
        from engine.probe.loader import load_model

        loaded = load_model(folder)
        t1 = time.perf_counter()
        res = run_audit(audit_tokens(loaded, ids, (), {}))
        print(f"  audit: load {t1 - t0:.1f} s, capture forward {res.forward_s:.1f} s, "
              f"fit {res.fit_s:.1f} s", file=sys.stderr)
    return {"wall": time.perf_counter() - t0, "rss": _rss_peak_mb()}


def _write_model(folder: Path, layers: int, bundled: Path) -> int:
    import shutil

    import torch
    from transformers import LlamaConfig, LlamaModel

    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json"):
        shutil.copy(bundled / name, folder / name)
    cfg = LlamaConfig(hidden_size=1024, num_hidden_layers=layers, num_attention_heads=16,
                      num_key_value_heads=16, intermediate_size=2816, vocab_size=30522,
                      max_position_embeddings=2048)
    torch.manual_seed(0)
    net = LlamaModel(cfg)
    net.save_pretrained(folder)
    return sum(p.numel() for p in net.parameters())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--part", choices=("plain", "audit"), help=argparse.SUPPRESS)
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    args = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))
    if args.part:
        import torch

        torch.set_num_threads(args.threads)
        print(json.dumps(_part(args.part, args.folder, args.tokens)))
        return 0
    from engine.probe.loader import INSTALL_HINT, bundled_model_dir, models_extra_available

    if not models_extra_available() or bundled_model_dir() is None:
        print(f"skipped: the bundled all-MiniLM-L6-v2 is not installed ({INSTALL_HINT})")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        n_params = _write_model(Path(tmp), args.layers, bundled_model_dir())
        out = {}
        for kind in ("plain", "audit"):
            proc = subprocess.run(
                [sys.executable, __file__, "--part", kind, "--folder", tmp,
                 "--tokens", str(args.tokens), "--threads", str(args.threads)],
                capture_output=True, text=True, check=True)
            sys.stderr.write(proc.stderr[-2000:] if kind == "audit" else "")
            out[kind] = json.loads(proc.stdout.strip().splitlines()[-1])
    p, a = out["plain"], out["audit"]
    print(f"Llama-shaped model, {n_params / 1e9:.3f} B parameters, {args.layers} layers x 16 "
          f"heads (d_k 64), {args.tokens} tokens, {args.threads} thread(s)")
    print(f"  plain load + forward: {p['wall']:7.1f} s, peak resident {p['rss']:7.0f} MB")
    print(f"  load + audit:         {a['wall']:7.1f} s, peak resident {a['rss']:7.0f} MB")
    print(f"  ratio: time {a['wall'] / p['wall']:.2f}x (goal <= 4), "
          f"memory {a['rss'] / p['rss']:.2f}x (goal <= 1.6)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
