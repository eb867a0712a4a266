"""Cost of the scale audit of a real model, as a ratio to the model's own forward pass.

Measured in one run on the bundled all-MiniLM-L6-v2 (6 layers x 12 heads, d_k 32), model loaded:

- the model's own forward pass on a ``--tokens`` text (eager attention, no hooks, no attentions
  returned), median of ``--repeats``;
- the audit of the same text: tokenize, the capture forward pass (hooks, attentions returned) and
  the fit of every head and layer (``audit``), median of ``--repeats``; its fit part apart;
- the what-if sweep (13 multipliers 1/8 .. 8, every layer: 1 + 13 forward passes and the
  statistics), median of ``--repeats``;
- the peak resident memory of an audit at ``--memory-tokens`` (512) against the model's own
  forward pass at that length, and the bytes the capture keeps (bounded: at most 128 query rows
  per head are kept for the fit).

Skips (exit 0, with a message) when transformers or the bundled model is not installed.

    .venv/bin/python bench/bench_audit.py [--tokens 64] [--repeats 5] [--threads 1]
        [--memory-tokens 512]

Issue 28's cost goal (a 0.24 B Llama-shaped model at 512 tokens, audit against a plain load +
forward pass, time and peak memory) is measured by bench/bench_audit_llama.py.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=64, help="text length in tokens (default 64)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--memory-tokens", type=int, default=512,
                    help="also measure peak memory of an audit at this many tokens (0: skip)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch and BLAS threads (default 1: steadier on a busy machine)")
    args = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))

    from engine.probe.audit import AuditConfig, audit, run_audit
    from engine.probe.loader import (
        INSTALL_HINT,
        bundled_model_dir,
        load_model,
        models_extra_available,
        tokenize,
    )
    from engine.probe.texts import load_text_presets
    from engine.probe.whatif import run_whatif, whatif

    if not models_extra_available() or bundled_model_dir() is None:
        print(f"skipped: the bundled all-MiniLM-L6-v2 is not installed ({INSTALL_HINT})")
        return 0
    import torch

    torch.set_num_threads(args.threads)
    loaded = load_model(None)
    text = " ".join(t for _name, t in load_text_presets())
    cfg = AuditConfig(text=text, max_tokens=args.tokens)
    tok = tokenize(loaded, text, args.tokens)
    ids = torch.as_tensor([list(tok.ids)])

    def forward() -> float:
        t0 = time.perf_counter()
        with torch.inference_mode():
            loaded.model(input_ids=ids, attention_mask=torch.ones_like(ids))
        return time.perf_counter() - t0

    forward()
    run_audit(audit(cfg, loaded))  # warm-up
    fwd, walls, fits, sweeps = [], [], [], []
    for _ in range(args.repeats):
        fwd.append(forward())
        t0 = time.perf_counter()
        res = run_audit(audit(cfg, loaded))
        walls.append(time.perf_counter() - t0)
        fits.append(res.fit_s)
        t0 = time.perf_counter()
        run_whatif(whatif(loaded, tok.ids))
        sweeps.append(time.perf_counter() - t0)
    f, w, fit, sw = (statistics.median(x) for x in (fwd, walls, fits, sweeps))
    print(f"model: {res.model_name} ({res.n_layers} layers x {res.n_heads} heads, d_k {res.d_k}); "
          f"{res.n_tokens} tokens, {args.threads} thread(s), median of {args.repeats} runs")
    print(f"  model's own forward pass:                   {f * 1e3:8.1f} ms")
    print(f"  audit (tokenize + capture forward + fit):   {w * 1e3:8.1f} ms  = {w / f:6.1f}x forward")
    print(f"    of which the fit (72 heads + 6 layers):   {fit * 1e3:8.1f} ms  = {fit / f:6.1f}x forward")
    print(f"  what-if sweep (13 multipliers, all layers): {sw:8.2f} s   = {sw / f:6.1f}x forward")
    if args.memory_tokens:
        _memory(loaded, args.memory_tokens)
    return 0


def _rss_peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _memory(loaded, n_tokens: int) -> None:
    """Peak resident memory of the audit of an n-token text against the model's own forward
    pass on it, and what the capture keeps per site (its rows are capped: memory is bounded)."""
    import torch

    from engine.probe.audit import audit_tokens, run_audit
    from engine.probe.capture import capture_sites
    from engine.probe.loader import tokenize
    from engine.probe.sites import MAX_FIT_ROWS
    from engine.probe.texts import load_text_presets

    text = " ".join(t for _name, t in load_text_presets())
    while len(text) < 40 * n_tokens:
        text += " " + text
    tok = tokenize(loaded, text, n_tokens)
    ids = torch.as_tensor([list(tok.ids)])
    base = _rss_peak_mb()
    with torch.inference_mode():
        loaded.model(input_ids=ids, attention_mask=torch.ones_like(ids))
    after_forward = _rss_peak_mb()
    t0 = time.perf_counter()
    res = run_audit(audit_tokens(loaded, tok.ids, tok.tokens, {}))
    wall = time.perf_counter() - t0
    after_audit = _rss_peak_mb()
    records, _s, _o = capture_sites(loaded, tok.ids)
    kept = sum(r.q.nbytes + r.k.nbytes + r.probs.nbytes + r.visible.nbytes
               + (0 if r.bias is None else r.bias.nbytes) for r in records) / 1e6
    full = res.n_layers * res.n_heads * len(tok.ids) ** 2 * 4 / 1e6
    print(f"memory at {len(tok.ids)} tokens (peak resident, MB): model loaded {base:.0f}, after "
          f"its forward pass {after_forward:.0f} (+{after_forward - base:.0f}), after the audit "
          f"{after_audit:.0f} (+{after_audit - after_forward:.0f} over the forward); audit "
          f"{wall:.2f} s")
    print(f"  the capture keeps {kept:.1f} MB for {res.n_layers} layers (at most "
          f"{MAX_FIT_ROWS} query rows per head; every row's weights would be {full:.0f} MB)")


if __name__ == "__main__":
    raise SystemExit(main())
