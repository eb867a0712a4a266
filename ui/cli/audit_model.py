"""``audit-model``: the scale each layer and head of a real model applies, and what another would do."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from ui.cli.common import fail, text_arg

PROG = "attention-lab audit-model"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", metavar="PATH",
                   help="local Hugging Face folder (BERT family or GPT-2), or the Training lab's "
                   "weights.pt (or the folder of `train --out`); default: the bundled "
                   "all-MiniLM-L6-v2. Never downloads.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--text", help="the text to run through the model (default: the Real model "
                     "page's first preset text)")
    src.add_argument("--text-file", metavar="FILE", help="read the text from FILE (UTF-8)")
    p.add_argument("--inject", action="append", default=[], metavar="LAYER=KIND",
                   help="plant a scaling bug in a layer (from 0) before the audit; KIND is twice, "
                   "none, dmodel or after_softmax; repeatable")
    p.add_argument("--whatif", action="store_true",
                   help="also rerun the (intact) model with its logits x m, m = 1/8 .. 8, and "
                   "write whatif.csv")
    p.add_argument("--whatif-layer", type=int, metavar="LAYER",
                   help="multiply only this layer's logits in the what-if sweep (default: all)")
    p.add_argument("--run", action="append", default=[], metavar="RULE",
                   help="Training lab weights: audit only this run (repeatable; default: all)")
    p.add_argument("--max-tokens", type=int, metavar="N", help="cut the text to N tokens")
    p.add_argument("--out", metavar="DIR", required=True,
                   help="write audit.csv, layers.csv (whatif.csv), audit.json here")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _refuse_unused(args: argparse.Namespace, training: bool) -> None:
    """An option that would be silently ignored is an error (the user meant something by it)."""
    if training:
        given = [("text", args.text is not None), ("text_file", args.text_file is not None),
                 ("max_tokens", args.max_tokens is not None),
                 ("whatif_layer", args.whatif_layer is not None)]
        for name, set_ in given:
            if set_:
                fail(PROG, "does not apply to Training lab weights (they are audited on the "
                     "lab's own probe examples)", name)
        if args.inject:
            fail(PROG, "planting bugs works on transformers models; Training lab weights "
                 "are audited as saved", "inject")
        if args.whatif:
            fail(PROG, "the what-if sweep works on transformers models, not Training lab "
                 "weights", "whatif")
        return
    if args.run:
        fail(PROG, "selects a run of Training lab weights; this model is not one", "run")
    if args.whatif_layer is not None and not args.whatif:
        fail(PROG, "needs --whatif", "whatif_layer")


def _bugs(items: list[str]) -> tuple[tuple[int, str], ...]:
    out = []
    for item in items:
        layer, sep, kind = item.partition("=")
        if not sep or not layer.strip().lstrip("-").isdigit():
            fail(PROG, f"{item!r} must be LAYER=KIND, e.g. 2=twice", "inject")
        out.append((int(layer), kind.strip()))
    return tuple(out)


def _config(args: argparse.Namespace, text: str | None, bugs: tuple[tuple[int, str], ...]):
    """The AuditConfig of a transformers model; a bad folder is refused before torch loads."""
    from engine.errors import ConfigError
    from engine.probe.audit import AuditConfig
    from engine.probe.loader import inspect_model_dir, resolve_model_dir

    if text is None:
        from engine.probe.texts import default_text

        text = default_text()
    cfg = AuditConfig(text=text, model=args.model, inject=bugs, max_tokens=args.max_tokens)
    inspect_model_dir(resolve_model_dir(cfg.model))
    if args.whatif_layer is not None and args.whatif_layer < 0:
        raise ConfigError("whatif_layer", f"layer {args.whatif_layer} is out of range")
    return cfg


def run(args: argparse.Namespace) -> int:
    from engine.errors import Cancelled, ConfigError
    from engine.io import ensure_writable_dir
    from engine.probe.training_audit import training_weights_path

    weights = training_weights_path(args.model)
    _refuse_unused(args, weights is not None)
    text = text_arg(PROG, args)
    bugs = _bugs(args.inject)
    try:
        cfg = None if weights is not None else _config(args, text, bugs)
        created = not Path(args.out).exists()
        out = ensure_writable_dir(args.out)
    except ConfigError as exc:
        if exc.field == "text" and args.text_file:
            fail(PROG, f"{args.text_file!r}: {exc.message}", "text_file")
        fail(PROG, exc)

    def discard() -> None:
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()

    try:
        if weights is None:
            results, whatif = _audit_transformers(cfg, args)
        else:
            results, whatif = _audit_training(weights, args), None
    except ConfigError as exc:
        discard()
        fail(PROG, exc)
    except (KeyboardInterrupt, Cancelled):
        discard()
        sys.stderr.write("interrupted: nothing written\n")
        return 130
    for res in results:
        _print_result(res)
    if whatif is not None:
        _print_whatif(whatif)
    from engine.probe.audit_export import write_audit_outputs

    try:
        paths = write_audit_outputs(out, results, whatif)
    except OSError as exc:
        discard()
        fail(PROG, f"cannot write to {str(out)!r}: {exc.strerror or exc}", "out")
    print(f"wrote {', '.join(p.name for p in paths)} to {out}")
    return 0


def _audit_transformers(cfg, args):
    from engine.probe.audit import audit
    from engine.probe.loader import load_model, tokenize
    from engine.probe.whatif import run_whatif, whatif
    from ui.cli.common import progress_bar

    loaded = load_model(cfg.model)
    bar = progress_bar(100, "audit-model", args.quiet, unit="%")
    result = None
    for snap in audit(cfg, loaded):
        bar.set_description(snap.stage)
        bar.update(round(100 * snap.fraction) - bar.n)
        if snap.result is not None:
            result = snap.result
    bar.close()
    assert result is not None
    sweep = None
    if args.whatif:
        tok = tokenize(loaded, cfg.text, cfg.max_tokens)
        sweep = run_whatif(whatif(loaded, tok.ids, layer=args.whatif_layer))
    return [result], sweep


def _audit_training(weights: Path, args) -> list:
    from engine.probe.training_audit import audit_training

    return [s.result for s in audit_training(weights, tuple(args.run) or None) if s.result]


def _print_result(res) -> None:
    what = f"run {res.run} of {res.model_name}" if res.run else res.model_name
    bugs = ", ".join(f"{k}={v}" for k, v in sorted(res.inject.items()))
    print(f"{what} ({res.model_type}, {res.n_layers} layers x {res.n_heads} heads, d_k {res.d_k}, "
          f"d_model {res.d_model}), {res.n_tokens} tokens; {res.note}"
          + (f"; injected {bugs}" if bugs else ""))
    for layer in range(len(res.layer_fits)):
        print(f"layer {layer}: {res.layer_verdicts[layer]}; {res.scale_text(layer)}"
              + (f"  [injected {res.inject[layer]}]" if layer in res.inject else ""))
    print(f"forward {res.forward_s:.3f} s, fit {res.fit_s:.3f} s")


def _print_whatif(w) -> None:
    ext = "perplexity" if w.perplexity is not None else "pooled cosine"
    vals = w.perplexity if w.perplexity is not None else w.pooled_cosine
    where = "every layer" if w.layer is None else f"layer {w.layer}"
    print(f"what-if (logits of {where} x m): m, H/log n, saturated, output cosine, {ext}")
    for i, m in enumerate(w.multipliers):
        print(f"  m = {m:6.3g}: {w.entropy_norm[i].mean():.3f}  {w.saturated[i].mean():.3f}  "
              f"{w.output_cosine[i]:.4f}  {vals[i]:.4g}")
    print(f"what-if sweep {w.sweep_s:.2f} s")
