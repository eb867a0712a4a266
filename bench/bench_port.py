"""Cost of the ONNX port audit against one ONNX Runtime forward pass of the same graph, and the
round-trip table (architecture, source scale, ONNX scale, GGUF findings) of the tiny zoo models.

For each model: the graph as exported (torch.onnx.export, eager attention), its plain forward pass
in ONNX Runtime (CPU provider, median of ``--repeats``), and the whole ONNX audit without a source
(graph analysis, sessions with the taps, the runs, the fits; median of ``--repeats``); the ratio
audit / forward and where the audit's time goes. The tiny zoo Llama shows the fixed cost (sessions,
graph copies); a ~40M-parameter Llama (width 512, 8 layers, 8 query / 4 key heads of 64, vocabulary
32,000) at 256 and 512 tokens shows the cost that grows with the model. The load average is
printed before and after: run it niced, when the machine is quiet.

    nice -n 5 .venv/bin/python bench/bench_port.py [--repeats 3] [--tokens 256 512] [--round-trip]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


#: (label, changes to the zoo's Llama entry)
MODELS = (
    ("Llama tiny (2 layers x 4q/2kv heads of 8, width 32)", {"num_key_value_heads": 2}),
    ("Llama ~40M (8 layers x 8q/4kv heads of 64, width 512)",
     {"hidden_size": 512, "num_hidden_layers": 8, "num_attention_heads": 8,
      "num_key_value_heads": 4, "intermediate_size": 1408, "vocab_size": 32000,
      "max_position_embeddings": 1024}),
)


def cost(repeats: int, tokens: list[int], folder: Path) -> None:
    import numpy as np

    from engine.probe.port import onnx_run
    from engine.probe.port.onnx_audit import PortConfig, audit_onnx
    from engine.probe.port.roundtrip import export_onnx, zoo_model
    from engine.snapshots import last_result

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| model | parameters | tokens | forward (ms) | audit (ms) | audit / forward | "
          "tapped runs (ms, runs) | fits (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for label, changes in MODELS:
        loaded = zoo_model("Llama", changes)
        n_params = sum(p.numel() for p in loaded.model.parameters())
        vocab = int(loaded.model.config.vocab_size)
        sizes = tokens if n_params > 1e6 else [64]
        for n in sizes:
            ids = [int(i) for i in np.random.default_rng(0).integers(1, vocab, size=n)]
            path = export_onnx(loaded, ids, folder / "m.onnx")
            model = onnx_run.open_onnx(path)
            sess = onnx_run.session(model)
            feed = onnx_run.feeds(model, ids)
            sess.run(None, feed)  # warm
            fwd = _median_time(lambda s=sess, f=feed: s.run(None, f), max(repeats, 5))
            results = []

            def audit(p=path, i=ids, out=results) -> None:
                out.append(last_result(audit_onnx(PortConfig(str(p)), ids=i), "audit"))

            total = _median_time(audit, repeats)
            t = results[-1].timings
            print(f"| {label} | {n_params:,} | {n} | {fwd * 1e3:.1f} | {total * 1e3:.0f} | "
                  f"{total / fwd:.1f}x | {t['forward_tapped'] * 1e3:.0f}, {t['runs']} | "
                  f"{t['fit'] * 1e3:.0f} |")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def round_trip(folder: Path) -> None:
    from engine.probe.port.gguf_audit import audit_gguf
    from engine.probe.port.gguf_write import ARCH, write_gguf
    from engine.probe.port.onnx_audit import PortConfig, audit_onnx
    from engine.probe.port.roundtrip import ROUND_TRIP, export_onnx, zoo_model
    from engine.probe.zoo import zoo_ids
    from engine.snapshots import last_result

    entries = [*ROUND_TRIP, ("Gemma 2 (qpas = head_dim)", "Gemma 2", {"query_pre_attn_scalar": 8})]
    print("| architecture | source s*sqrt(d_k) per layer | ONNX s*sqrt(d_k) per layer | ONNX "
          "verdict | GGUF findings |")
    print("|---|---|---|---|---|")
    for i, (label, name, changes) in enumerate(entries):
        loaded = zoo_model(name, changes)
        res = last_result(audit_onnx(PortConfig(str(export_onnx(
            loaded, zoo_ids(), folder / f"r{i}.onnx"))), loaded, ids=zoo_ids()), "audit")
        src = ", ".join(f"{r.source_x:.4g}" for r in res.layers)
        port = ", ".join(f"{r.port_x:.4g}" for r in res.layers)
        state = "as the source in every layer" if not res.findings else "; ".join(res.findings)
        gg = "not written (no GGUF writer for this architecture)"
        if loaded.model.config.model_type in ARCH:
            g = last_result(audit_gguf(PortConfig(str(write_gguf(
                loaded.model, folder / f"r{i}.gguf"))), loaded, ids=zoo_ids()), "audit")
            gg = "; ".join(g.findings) or "none"
        print(f"| {label} | {src} | {port} | {state} | {gg} |")
    print(f"(factor check: (0.1 ln 40 + 1)^2 = {(0.1 * math.log(40) + 1) ** 2:.4f})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tokens", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--round-trip", action="store_true", help="also print the round-trip table")
    args = ap.parse_args()
    try:
        import gguf  # noqa: F401
        import onnxruntime  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        print(f"skipped: {exc.name} is not installed (pip install '.[models,deploy]')")
        return 0
    import warnings

    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        cost(args.repeats, args.tokens, Path(tmp))
        if args.round_trip:
            round_trip(Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
