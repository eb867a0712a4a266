"""Cost of probing a real model: load time, re-analysis of a 64-token text, statistics vs forward.

Measured in one run on the bundled all-MiniLM-L6-v2 (6 layers x 12 heads, d_k 32):

- model load: the first ``load_model`` in this process (imports transformers, reads the weights);
- re-analysis: ``analyze`` of a 64-token text with the model already loaded (tokenize, one
  forward pass with hooks, every per-head statistic with ``--bootstrap`` resamples), median of
  ``--repeats`` runs after one warm-up;
- the ratio of the statistics time to the forward-pass time, from the same runs.

Skips (exit 0, with a message) when transformers or the bundled model is not installed.

    .venv/bin/python bench/bench_probe.py [--tokens 64] [--bootstrap 200] [--repeats 5] [--threads 1]
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
    ap.add_argument("--bootstrap", type=int, default=200, help="resamples, as the CLI default")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch and BLAS threads (default 1: on a busy machine a multi-threaded "
                    "BLAS call waits for a descheduled thread, and the ratio measures that)")
    args = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))  # read when numpy / torch first load

    from engine.probe.analyze import analyze, run_to_result
    from engine.probe.config import ProbeConfig
    from engine.probe.loader import (
        INSTALL_HINT,
        bundled_model_dir,
        load_model,
        models_extra_available,
    )
    if not models_extra_available() or bundled_model_dir() is None:
        print(f"skipped: the bundled all-MiniLM-L6-v2 is not installed ({INSTALL_HINT})")
        return 0

    import torch

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    import transformers  # noqa: F401  (timed apart: the GUI pays it once, in the worker thread)

    import_s = time.perf_counter() - t0
    loaded = load_model(None)
    load_wall = time.perf_counter() - t0

    from engine.probe.texts import load_text_presets

    text = " ".join(body for _, body in load_text_presets())  # long enough to cut to --tokens
    cfg = ProbeConfig(text=text, bootstrap=args.bootstrap, max_tokens=args.tokens)
    run_to_result(analyze(cfg, loaded))  # warm-up (first-call allocations, BLAS start-up)
    walls, forwards, stats = [], [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        res = run_to_result(analyze(cfg, loaded))
        walls.append(time.perf_counter() - t0)
        forwards.append(res.forward_s)
        stats.append(res.stats_s)
    wall, fwd, st = (statistics.median(x) for x in (walls, forwards, stats))
    print(f"model: {res.model_name} ({res.n_layers} layers x {res.n_heads} heads, d_k {res.d_k}); "
          f"{res.n_tokens} tokens, bootstrap {args.bootstrap}, {args.threads} thread(s), "
          f"median of {args.repeats} runs")
    print(f"  model load (first in this process, transformers import included): {load_wall:6.2f} s"
          f"  (import {import_s:.2f} s, tokenizer + weights {load_wall - import_s:.2f} s)")
    print(f"  re-analysis, model loaded (tokenize + forward + statistics):      {wall:6.3f} s")
    print(f"    forward pass with hooks:                                        {fwd:6.3f} s")
    print(f"    per-head statistics:                                            {st:6.3f} s")
    print(f"  statistics / forward pass: {st / fwd:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
