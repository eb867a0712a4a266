"""``audit-model``: the scale each layer and head of a real model applies, and what another would do."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ui.cli.common import (
    TEXT_FILE_LIMIT_MB,
    add_force,
    add_memory_budget,
    fail,
    path_arg,
    text_arg,
    write_all_or_none,
)

PROG = "attention-lab audit-model"
#: the exit status when some attention layers of the model could not be seen (and so were not
#: audited): the audit of the others is written, but it does not cover the model
PARTIAL_EXIT = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", metavar="PATH", type=path_arg,
                   help="local Hugging Face folder of any architecture transformers runs on text "
                   "(no remote code), or the Training lab's weights.pt (or the folder of `train "
                   "--out`); default: the bundled all-MiniLM-L6-v2. Never downloads.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--text", help="the text to run through the model (default: the Real model "
                     "page's first preset text)")
    src.add_argument("--text-file", metavar="FILE", type=path_arg, help=f"read the text from FILE (UTF-8, at "
                     f"most {TEXT_FILE_LIMIT_MB} MB; only its start is tokenized)")
    p.add_argument("--inject", action="append", default=[], metavar="LAYER=KIND",
                   help="plant a scaling bug in an attention layer (from 0, in call order: "
                   "encoder, then decoder self- and cross-attention) before the audit; KIND is "
                   "twice, none, dmodel, after_softmax, head_dim or softcap_off; repeatable")
    p.add_argument("--whatif", action="store_true",
                   help="also rerun the model with its logits x m, m = 1/8 .. 8, and write "
                   "whatif.csv (on the model with the --inject bugs, if any: it says which)")
    p.add_argument("--backend", choices=("eager", "sdpa", "all"), default="eager",
                   help="eager: the audit only (default); sdpa: also compare each layer's "
                   "output under SDPA with eager; all: every implementation this machine has "
                   "(flex and flash on CUDA); writes backends.csv")
    p.add_argument("--whatif-layer", type=int, metavar="LAYER",
                   help="multiply only this layer's logits in the what-if sweep (default: all)")
    p.add_argument("--run", action="append", default=[], metavar="RULE",
                   help="Training lab weights: audit only this run (repeatable; default: all)")
    p.add_argument("--max-tokens", type=int, metavar="N", help="cut the text to N tokens")
    p.add_argument("--out", metavar="DIR", type=path_arg, required=True,
                   help="write audit.csv, layers.csv (whatif.csv), audit.json here")
    add_memory_budget(p)
    add_force(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    from ui.cli.audit_port import add_port_arguments

    add_port_arguments(p)


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
        if args.backend != "eager":
            fail(PROG, "compares transformers backends; Training lab weights run the lab's own "
                 "attention", "backend")
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
    from engine.io import check_output_dir
    from engine.probe.audit_export import AUDIT_FILES
    from engine.probe.memory import check_budget
    from engine.probe.training_audit import training_weights_path
    from ui.cli.audit_port import port_requested, run_port

    if port_requested(args) or args.reference is not None:
        return run_port(args, text_arg(PROG, args))
    weights = training_weights_path(args.model)
    _refuse_unused(args, weights is not None)
    text = text_arg(PROG, args)
    bugs = _bugs(args.inject)
    try:
        check_budget(args.memory_budget)
        cfg = None if weights is not None else _config(args, text, bugs)
        out = check_output_dir(args.out, AUDIT_FILES, force=args.force)
    except ConfigError as exc:
        if exc.field == "text" and args.text_file:
            fail(PROG, f"{args.text_file!r}: {exc.message}", "text_file")
        fail(PROG, exc)

    backends = None
    try:
        if weights is None:
            results, whatif, backends = _audit_transformers(cfg, args)
        else:
            results, whatif = _audit_training(weights, args), None
    except ConfigError as exc:
        fail(PROG, exc)
    except (KeyboardInterrupt, Cancelled):
        sys.stderr.write("interrupted: nothing written\n")
        return 130
    for res in results:
        _print_result(res)
    if whatif is not None:
        _print_whatif(whatif)
    if backends is not None:
        _print_backends(backends, results[0])
    from engine.probe.audit_export import write_audit_outputs

    paths = write_all_or_none(PROG, out, AUDIT_FILES, (), lambda folder: write_audit_outputs(
        folder, results, whatif, backends=backends))
    print(f"wrote {', '.join(p.name for p in paths)} to {out}")
    return PARTIAL_EXIT if any(r.not_seen for r in results) else 0


def _audit_transformers(cfg, args):
    from engine.errors import ConfigError
    from engine.probe.audit import audit
    from engine.probe.loader import load_model, tokenize
    from engine.probe.whatif import run_whatif, whatif
    from ui.cli.common import progress_bar

    loaded = load_model(cfg.model, args.memory_budget)
    from engine.probe.inject import check_layers

    check_layers(loaded, cfg.bugs, "inject")
    if args.whatif_layer is not None and args.whatif_layer >= loaded.n_sites:
        raise ConfigError("whatif_layer", f"layer {args.whatif_layer} is out of range; this "
                          f"model has layers 0..{loaded.n_sites - 1}")
    bar = progress_bar(100, "audit-model", args.quiet, unit="%")
    result = None
    for snap in audit(cfg, loaded):
        bar.set_description(snap.stage)
        bar.update(round(100 * snap.fraction) - bar.n)
        if snap.result is not None:
            result = snap.result
    bar.close()
    assert result is not None
    sweep = backends = None
    tok = tokenize(loaded, cfg.text, cfg.max_tokens)
    if args.whatif:
        sweep = run_whatif(whatif(loaded, tok.ids, layer=args.whatif_layer, bugs=cfg.bugs))
    if args.backend != "eager":
        from engine.probe.backends import compare_backends

        backends = compare_backends(loaded, tok.ids, ["sdpa"] if args.backend == "sdpa" else None)
    return [result], sweep, backends


def _audit_training(weights: Path, args) -> list:
    from engine.probe.training_audit import audit_training

    return [s.result for s in audit_training(weights, tuple(args.run) or None) if s.result]


def _print_result(res) -> None:
    what = f"run {res.run} of {res.model_name}" if res.run else res.model_name
    bugs = ", ".join(f"{k}={v}" for k, v in sorted(res.inject.items()))
    print(f"{what} ({res.model_type}, {res.n_layers} layers x {res.n_heads} heads, d_k {res.d_k_text()}, "
          f"d_model {res.d_model}), {res.n_tokens} tokens; {res.note}"
          + (f"; injected {bugs}" if bugs else ""))
    if res.weights_text:
        print(f"weights: {res.weights_text}")
    for layer in range(len(res.layer_fits)):
        site = res.sites[layer] if res.sites else None
        print(f"layer {layer}: {res.layer_verdicts[layer]}; {res.scale_text(layer)}"
              + (f"  [injected {res.inject[layer]}]" if layer in res.inject else ""))
        if site is not None:
            print(f"    {site.block}: {'; '.join(site.features)}; {res.declared_text(layer)}: "
                  f"{res.state_text(layer)}")
            if site.position:
                from engine.probe.audit import position_text

                print(f"      s(position): {position_text(site.position)}")
            if site.shares_weights_with is not None:
                print(f"      (the module of layer {site.shares_weights_with} called again: "
                      "the same weights)")
            if site.declared_note:
                print(f"      ({site.declared_note})")
    for miss in res.not_seen:
        print(f"not seen: {miss.name} ({miss.why})")
    mism, unknown = res.mismatched_layers(), res.unknown_layers()
    if res.sites:
        print(res.coverage_text())
        print(f"{len(mism)} of {res.n_layers} layers differ from what the model declares"
              + (f": {', '.join(map(str, mism))}" if mism else "")
              + (f"; {len(unknown)} with a declaration that does not account for their code's "
                 f"factors: {', '.join(map(str, unknown))}" if unknown else ""))
    print(f"forward {res.forward_s:.3f} s, fit {res.fit_s:.3f} s")


def _print_backends(rep, res) -> None:
    for backend, why in rep.unavailable.items():
        print(f"backend {backend}: not compared ({why})")
    for backend in rep.compared:
        rows = [s for s in rep.sites if s.backend == backend]
        worst = max(rows, key=lambda s: s.output_rel_diff)
        flagged = [s for s in rows if s.flagged]
        if flagged:
            parts = ", ".join(f"layer {s.site} (output differs by {s.output_rel_diff:.2g} of its "
                              f"size)" for s in flagged)
            print(f"backend {backend}: DISAGREES with eager in {parts}")
        else:
            print(f"backend {backend}: agrees with eager in all {len(rows)} layers (largest "
                  f"relative difference {worst.output_rel_diff:.2g}, tolerance there "
                  f"{worst.tolerance:.2g}; intact model)")


def _print_whatif(w) -> None:
    ext = "perplexity" if w.perplexity is not None else "pooled cosine"
    vals = w.perplexity if w.perplexity is not None else w.pooled_cosine
    where = "every layer" if w.layer is None else f"layer {w.layer}"
    print(f"what-if on the {w.model_state} (logits of {where} x m; m = 1 is that model's own "
          f"scale): m, H/log n, saturated, output cosine, {ext}")
    for i, m in enumerate(w.multipliers):
        print(f"  m = {m:6.3g}: {w.entropy_norm[i].mean():.3f}  {w.saturated[i].mean():.3f}  "
              f"{w.output_cosine[i]:.4f}  {vals[i]:.4g}")
    print(f"what-if sweep {w.sweep_s:.2f} s")
