"""Cost of the scale audit of a real model, as a ratio to the model's own forward pass.

Measured in one run on the bundled all-MiniLM-L6-v2 (6 layers x 12 heads, d_k 32), model loaded:

- the model's own forward pass on a ``--tokens`` text (eager attention, no hooks, no attentions
  returned), median of ``--repeats``;
- the audit of the same text: tokenize, the capture forward pass (hooks, attentions returned) and
  the fit of every head and layer (``audit``), median of ``--repeats``; its fit part apart;
- the what-if sweep (13 multipliers 1/8 .. 8, every layer: 1 + 13 forward passes and the
  statistics), median of ``--repeats``.

Skips (exit 0, with a message) when transformers or the bundled model is not installed.

    .venv/bin/python bench/bench_audit.py [--tokens 64] [--repeats 5] [--threads 1]
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
