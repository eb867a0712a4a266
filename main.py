"""Attention Scaling Lab: parse arguments and dispatch (GUI by default, or a headless command)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, e.g. 1280x720, not {text!r}") from None
    if not (320 <= w <= 10_000 and 240 <= h <= 10_000):
        raise argparse.ArgumentTypeError(f"{text}: width 320..10000 and height 240..10000 pixels")
    return w, h


class _VersionAction(argparse.Action):
    """``--version``: the line is made only when asked (it looks up torch and the device)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        from engine.about import version_line

        print(version_line())
        parser.exit()


def build_parser():  # -> LabArgumentParser
    from ui.cli import COMMANDS
    from ui.cli.common import LabArgumentParser, path_arg

    parser = LabArgumentParser(
        prog="attention-lab",
        description="See, poke and measure softmax(QK^T / sqrt(d_k)) V. "
        "Without a command, opens the desktop app.",
    )
    parser.add_argument("--screenshot", metavar="FILE", type=path_arg,
                        help="open the window with default settings, wait for the first complete "
                        "results, save a PNG of the whole window to FILE and exit")
    parser.add_argument("--size", metavar="WxH", type=_size,
                        help="window size in pixels for this start, e.g. 1280x720 (with "
                        "--screenshot: the size of the picture)")
    parser.add_argument("--page", metavar="TITLE",
                        help="with --screenshot: the page to show, by its tab title (e.g. Training)")
    parser.add_argument("--present", action="store_true",
                        help="start in presentation mode (larger text and lines, one plot at a "
                        "time with the sweep below; F11 toggles it)")
    parser.add_argument("--theme", choices=("light", "dark"), help="colour theme for this start")
    parser.add_argument("--reset-settings", action="store_true",
                        help="ignore the remembered window layout and parameters")
    parser.add_argument("--version", action=_VersionAction,
                        help="print the version, torch's version, the device and Python's, and exit")
    parser.add_argument("--install-desktop-entry", action="store_true",
                        help="add the lab to the desktop's application menu (Linux: a .desktop "
                        "file and the icon in $XDG_DATA_HOME, default ~/.local/share) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=LabArgumentParser)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from ui.cli import COMMANDS

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is not None and args.install_desktop_entry:
        parser.error("--install-desktop-entry: takes no command")
    if args.command is None and args.install_desktop_entry:
        from ui.desktop_entry import run

        return run()
    if args.command is None:
        from ui.app import run_gui

        return run_gui(args)
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        code = int(module.run(args) or 0)
        sys.stdout.flush()  # a pipe's reader that left shows here, not at exit
        return code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:  # `... | head` stopped reading: end quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141


if __name__ == "__main__":
    sys.exit(main())
