"""What every subcommand shares: one-line errors (exit 2), progress bars, tables."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from engine.errors import ConfigError, FileFormatError

EXIT_USAGE = 2


#: the namespace attribute naming the (sub)parser that parsed the command line's last part
_OWNER = "_lab_parser"


class LabArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one line on stderr and exits 2, with a "did you
    mean --d-k?" for a mistyped option or choice (Python 3.11's argparse has none)."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        ns, extras = super().parse_known_args(args, namespace)
        if not hasattr(ns, _OWNER):  # a subcommand's parser runs first and names itself
            setattr(ns, _OWNER, self)
        return ns, extras

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        ns, extras = self.parse_known_args(args, namespace)
        owner = getattr(ns, _OWNER, self)
        delattr(ns, _OWNER)
        if extras:
            # an unknown option reaches the top parser; the subcommand's knows the right names
            owner.error(f"unrecognized arguments: {' '.join(extras)}"
                        + did_you_mean(extras, list(owner._option_string_actions)))
        return ns

    def error(self, message: str) -> NoReturn:
        # "argument --out: ..." -> "--out: ...", the form of every other error line
        message = re.sub(r"^argument (?=-|[A-Z])", "", message)
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice is not None:
            options = [c.strip().strip("'") for c in choice.group(2).split(",")]
            message += did_you_mean([choice.group(1)], options)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def did_you_mean(typed: Sequence[str], known: Sequence[str]) -> str:
    """"; did you mean --d-k?" for the first of ``typed`` close to one of ``known`` ("" if none);
    an option's value (``--dk=4``) is compared by its name."""
    for word in typed:
        name = word.split("=", 1)[0]
        if not name:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        if close:
            return f"; did you mean {close[0]}?"
    return ""


#: --figure-style choices (ui.export.plot_files.FIGURE_STYLES; repeated here: --help must not import Qt)
FIGURE_STYLES = ("screen", "slide", "paper")


def add_figure_style(p: argparse.ArgumentParser) -> None:
    """``--figure-style``: the figures' look, the GUI's export presets (default slide)."""
    p.add_argument("--figure-style", choices=FIGURE_STYLES, default="slide",
                   help="look of the --figures: slide (1920x1080, text at least 18 px, thick "
                        "lines, the title on the figure; the GUI's slide preset), paper "
                        "(700x460, small type) or screen (as the window shows it) "
                        "(default: slide)")


def add_force(p: argparse.ArgumentParser) -> None:
    """``--force``: replace files already in --out (without it such a folder is refused)."""
    p.add_argument("--force", action="store_true",
                   help="replace files in --out that this command writes (without it, a folder "
                        "that holds any of them is refused, naming them)")


def add_memory_budget(p: argparse.ArgumentParser) -> None:
    """``--memory-budget GB``: the most a model's tensors may take, checked before loading."""
    from engine.probe.memory import BUDGET_MAX_GB, BUDGET_MIN_GB, DEFAULT_BUDGET_GB

    p.add_argument("--memory-budget", type=float, default=DEFAULT_BUDGET_GB, metavar="GB",
                   help="refuse a model whose parameters and buffers would take more than GB "
                        "gigabytes in float32, counted from its config before anything is "
                        f"allocated ({BUDGET_MIN_GB:g}..{BUDGET_MAX_GB:g}; default: "
                        f"{DEFAULT_BUDGET_GB:g})")


def option_name(field: str) -> str:
    """Config field -> the CLI option that sets it (``n_keys`` -> ``--keys``)."""
    special = {"n_keys": "--keys", "d_ks": "--d-k", "d_k": "--d-k", "scalings": "--scaling",
               "dist": "--dist", "out": "--out",
               "experiment": "NAME"}
    return special.get(field, "--" + field.replace("_", "-"))


def fail(prog: str, error: ConfigError | str, field: str | None = None) -> NoReturn:
    """Exit 2 with one line naming the parameter (a file's problem: ``FILE: field path: what is
    wrong``, after the option that named the file when it is known)."""
    if isinstance(error, FileFormatError):
        msg = f"{option_name(error.option)}: {error}" if error.option else str(error)
    elif isinstance(error, ConfigError):
        msg = f"{option_name(error.field)}: {error.message}"
    else:
        msg = f"{option_name(field)}: {error}" if field else str(error)
    sys.stderr.write(f"{prog}: error: {msg}\n")
    raise SystemExit(EXIT_USAGE)



def require_out(prog: str, args: argparse.Namespace) -> None:
    """A command that writes a folder: ``--out`` given, and with ``--figures`` PySide6 there to
    draw them (checked before any work starts)."""
    if not args.out:
        fail(prog, "is required (the folder the results go to)", "out")
    if args.figures:
        try:
            import PySide6  # noqa: F401
        except ImportError:
            fail(prog, "needs PySide6 to draw the figures", "figures")


def path_arg(text: str) -> str:
    """The argparse ``type`` of every option that names a file or folder (--out, --model,
    --text-file, ...): one check (:func:`engine.io.check_path`) refuses, as one line, a path no
    file can have (empty, a name over 255 bytes, a loop of links) before anything looks at it."""
    from engine.io import check_path

    try:
        check_path(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    return text


def write_all_or_none(prog: str, out: Any, names: Sequence[str], patterns: Sequence[str],
                      write: Any) -> list[Any]:
    """``write(folder)`` (-> the paths it wrote) into a staging folder swapped into ``out``
    when complete (:func:`engine.io.staged`): ``out`` ends all new or, after a failure (disk
    full), exactly as it was, a new one not even created; a failure exits 2 saying so. Returns
    the paths as they are in ``out``."""
    from pathlib import Path

    from engine.io import staged

    try:
        with staged(out, f".{prog.split()[-1]}-", names, patterns) as stage:
            written = write(stage)
    except OSError as exc:
        fail(prog, f"cannot write to {str(out)!r}: {exc.strerror or exc}; nothing written "
             "(the folder is as it was)", "out")
    return [Path(out) / Path(p).name for p in written]


#: a --text-file larger than this is refused (the models read at most a few thousand tokens;
#: the tokenizer only ever sees the start of the text)
TEXT_FILE_LIMIT_MB = 10


def text_arg(prog: str, args: argparse.Namespace) -> str | None:
    """The text of ``--text`` or ``--text-file FILE`` (UTF-8), None when neither is given. A
    FIFO, a device or a folder is refused before it is opened (nothing blocks), at most
    TEXT_FILE_LIMIT_MB + 1 byte is read whatever the file's size says, and text that is not
    UTF-8 (``--text`` too: the shell passes bytes) is refused: each one line naming the option."""
    from engine.probe.config import check_text

    if args.text_file:
        from engine.readers.json_file import check_file, read_bytes

        limit = TEXT_FILE_LIMIT_MB * 1_000_000
        try:
            size = check_file(args.text_file, max_bytes=2**62, option="text_file")
            if size > limit:
                fail(prog, f"{args.text_file!r} is {size / 1e6:.1f} MB; texts over "
                     f"{TEXT_FILE_LIMIT_MB} MB are refused (only the first --max-tokens tokens "
                     "are read)", "text_file")
            raw = read_bytes(args.text_file, max_bytes=limit, kind="text file",
                             option="text_file")
            return raw.decode("utf-8")
        except ConfigError as exc:
            fail(prog, exc)
        except UnicodeDecodeError as exc:
            fail(prog, f"{args.text_file!r}: not UTF-8 text (byte {exc.start:,})", "text_file")
    if args.text is not None:
        try:
            check_text(args.text)
        except ConfigError as exc:
            fail(prog, exc.message, "text")
    return args.text


#: a progress bar appears only after this many seconds (short runs print nothing)
PROGRESS_DELAY_S = 1.0
#: the environment variable that sets another delay (seconds; the tests use 0)
PROGRESS_DELAY_ENV = "ATTENTION_LAB_PROGRESS_DELAY"


def progress_delay() -> float:
    """PROGRESS_DELAY_S, or the non-negative number of seconds in PROGRESS_DELAY_ENV."""
    try:
        value = float(os.environ.get(PROGRESS_DELAY_ENV, PROGRESS_DELAY_S))
    except ValueError:
        return PROGRESS_DELAY_S
    return value if value >= 0 else PROGRESS_DELAY_S


def progress_bar(total: int, desc: str, quiet: bool, unit: str = "trial",
                 unit_scale: bool = True) -> Any:
    """A tqdm bar on stderr that appears only for runs longer than ``progress_delay()`` s, and only on
    a terminal (a log file or a pipe would fill with carriage returns)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale,
                disable=quiet or not stderr_is_terminal(),
                delay=progress_delay(), file=sys.stderr, leave=False, dynamic_ncols=True)


def stderr_is_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # closed
        return False


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """Plain aligned text table; ``columns`` is (key, header)."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    cells = [[fmt(r[k]) for k, _ in columns] for r in rows]
    headers = [h for _, h in columns]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)
