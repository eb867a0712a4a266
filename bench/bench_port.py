"""Cost of the ONNX port audit against one ONNX Runtime forward pass of the same graph, and the
round-trip table (architecture, source scale, ONNX scale, GGUF findings) of the tiny zoo models.

For each model: the graph as exported (torch.onnx.export, eager attention), its plain forward pass
in ONNX Runtime (CPU provider, median of ``--repeats``), and the whole ONNX audit without a source
(graph analysis, sessions with the taps, the runs, the fits; median of ``--repeats``); the ratio
audit / forward. The round trip audits each export beside its source model and writes a float32
GGUF file where the writer knows the architecture (llama, gemma2, deepseek2).

    .venv/bin/python bench/bench_port.py [--repeats 3] [--tokens 64]
"""

from __future__ import annotations

import argparse
import math
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


def cost(repeats: int, tokens: int, folder: Path) -> None:
    import numpy as np

    from engine.probe.port import onnx_run
    from engine.probe.port.onnx_audit import PortConfig, audit_onnx
    from engine.probe.port.roundtrip import export_onnx, zoo_model
    from engine.snapshots import last_result

    ids = [int(i) for i in np.random.default_rng(0).integers(1, 64, size=tokens)]
    for label, changes in (("Llama tiny (2 x 4 heads, width 32)", {"num_key_value_heads": 2}),
                           ("Llama small (4 x 8 heads, width 256)",
                            {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8,
                             "num_key_value_heads": 4, "intermediate_size": 512,
                             "max_position_embeddings": 512})):
        loaded = zoo_model("Llama", changes)
        path = export_onnx(loaded, ids, folder / "m.onnx")
        model = onnx_run.open_onnx(path)
        sess = onnx_run.session(model)
        feed = onnx_run.feeds(model, ids)
        sess.run(None, feed)  # warm
        fwd = _median_time(lambda s=sess, f=feed: s.run(None, f), max(repeats, 5))
        audit = _median_time(lambda p=path: last_result(audit_onnx(PortConfig(str(p)), ids=ids),
                                                        "audit"), repeats)
        print(f"{label}, {tokens} tokens: forward {fwd * 1e3:.2f} ms, audit {audit * 1e3:.0f} ms,"
              f" ratio {audit / fwd:.0f}x")


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
    ap.add_argument("--tokens", type=int, default=64)
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
        round_trip(Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
