"""``audit-model --onnx FILE`` / ``--gguf FILE``: the audit of a deployed port beside its source."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from ui.cli.common import fail, path_arg, write_all_or_none

PROG = "attention-lab audit-model"


def add_port_arguments(p: argparse.ArgumentParser) -> None:
    port = p.add_mutually_exclusive_group()
    port.add_argument("--onnx", metavar="FILE", type=path_arg, help="audit this ONNX graph as ONNX Runtime runs "
                      "it (CPU provider), layer by layer beside --reference; needs the 'deploy' "
                      "extra; writes port.csv and port.json")
    port.add_argument("--gguf", metavar="FILE", type=path_arg, help="audit this GGUF file's attention metadata "
                      "as llama.cpp reads it (and, where transformers reads the architecture, its "
                      "weights in the source architecture) against --reference; writes "
                      "port_gguf.csv, port.csv and port.json")
    p.add_argument("--reference", metavar="PATH", type=path_arg, help="with --onnx/--gguf: the source model's "
                   "local Hugging Face folder (its tokenizer gives the token ids; without it an "
                   "ONNX graph reads a tokenizer next to it, or seeded token ids)")


def port_requested(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "onnx", None) or getattr(args, "gguf", None))


def _refuse_unused(args: argparse.Namespace) -> None:
    opt = "onnx" if args.onnx else "gguf"
    if args.model is not None:
        fail(PROG, f"--{opt} audits a port; give its source with --reference", "model")
    for name, given in (("inject", bool(args.inject)), ("whatif", args.whatif),
                        ("backend", args.backend != "eager"), ("run", bool(args.run)),
                        ("whatif_layer", args.whatif_layer is not None)):
        if given:
            fail(PROG, f"does not apply to a port audit (--{opt})", name)
    if args.reference is None and args.gguf and (args.text or args.text_file):
        fail(PROG, "a GGUF audit reads text through the source's tokenizer: give --reference",
             "text")


def run_port(args: argparse.Namespace, text: str | None) -> int:
    from engine.errors import Cancelled, ConfigError
    from engine.io import check_output_dir
    from engine.probe.port.export import PORT_FILES, write_port_outputs
    from engine.probe.port.onnx_audit import PortConfig

    if args.reference is not None and not (args.onnx or args.gguf):
        fail(PROG, "needs --onnx or --gguf (the port to compare with this source)", "reference")
    _refuse_unused(args)
    field = "onnx" if args.onnx else "gguf"
    try:
        cfg = PortConfig(path=args.onnx or args.gguf, reference=args.reference, text=text,
                         max_tokens=args.max_tokens, format=field,
                         memory_budget=args.memory_budget)
        _check_files(cfg, field)
        out = check_output_dir(args.out, PORT_FILES, force=args.force)
    except ConfigError as exc:
        fail(PROG, exc)
    try:
        result = _drain(cfg, args.quiet)
    except ConfigError as exc:
        fail(PROG, exc)
    except (KeyboardInterrupt, Cancelled):
        sys.stderr.write("interrupted: nothing written\n")
        return 130
    print_port(result)
    paths = write_all_or_none(PROG, out, PORT_FILES, (),
                              lambda folder: write_port_outputs(folder, result))
    print(f"wrote {', '.join(p.name for p in paths)} to {out}")
    return 0


def _check_files(cfg, field: str) -> None:
    """A missing file or folder is refused before anything heavy loads."""
    from engine.errors import ConfigError

    if not Path(cfg.path).expanduser().is_file():
        raise ConfigError(field, f"{cfg.path!r} is not a file")
    if cfg.reference is not None:
        from engine.probe.loader import inspect_model_dir, resolve_model_dir

        try:
            inspect_model_dir(resolve_model_dir(cfg.reference))
        except ConfigError as exc:
            raise ConfigError("reference", exc.message) from None


def _drain(cfg, quiet: bool):
    from engine.probe.port.gguf_audit import audit_gguf
    from engine.probe.port.onnx_audit import audit_onnx
    from ui.cli.common import progress_bar

    gen = audit_gguf(cfg) if cfg.kind == "gguf" else audit_onnx(cfg)
    bar = progress_bar(100, "audit-model", quiet, unit="%")
    result = None
    for snap in gen:
        bar.set_description(snap.stage)
        bar.update(round(100 * snap.fraction) - bar.n)
        result = snap.result or result
    bar.close()
    assert result is not None
    return result


def _x(v: float) -> str:
    return f"{v:#.4g}" if math.isfinite(v) else "-"


def print_port(res) -> None:
    src = res.source_name or "no source (give --reference to compare)"
    print(f"{res.kind.upper()} port {res.path} beside {src}; {res.n_tokens} tokens "
          f"({res.id_source or 'metadata only'})")
    for m in res.metadata:
        print(f"  {m.key}: file {m.file}; source {m.source or '-'}"
              + (f"  FINDING: {m.finding}" if m.finding else ""))
    if res.layers:
        print("layer  block    port x1/sqrt(d_k)  source x1/sqrt(d_k)  ratio   state; port verdict")
    for r in res.layers:
        print(f"{r.layer:5d}  {r.block:8s} {_x(r.port_x):>18s}  {_x(r.source_x):>19s}  "
              f"{_x(r.ratio):>6s}  {r.state or '-'}; {r.port_verdict}  [{r.kind}]")
    if res.findings:
        print(f"{len(res.findings)} finding(s):")
        for f in res.findings:
            print(f"  MISMATCH {f}")
    elif res.source is not None:
        print("the port scales attention as the source does in every layer")
    for k, v in res.timings.items():
        if isinstance(v, float):
            print(f"{k} {v:.4f} s", end="; ")
    if res.timings:
        print()
