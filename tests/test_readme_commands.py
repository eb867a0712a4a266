"""The README's and the docs' code blocks paste and run as written: every ``python main.py`` /
``attention-lab`` command in a bash block parses with the CLI's own argparse, and none holds a placeholder
(``[--json]``, ``DIR``, ``...``) that a shell would pass on literally."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: every Markdown file a user reads commands from
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
#: words of a usage synopsis, not of a command one can run
PLACEHOLDER = re.compile(r"^(\[.*|.*\]|DIR|FILE|PATH|TEXT|ADDRESS|N|L|\.\.\.|\"\.\.\.\")$")


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)


def commands(block: str) -> list[list[str]]:
    """The block's commands as argv lists: continuation lines joined, comments dropped, ``&&``
    chains split."""
    joined = block.replace("\\\n", " ")
    out: list[list[str]] = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        current: list[str] = []
        for word in words + ["&&"]:
            if word == "&&":
                if current:
                    out.append(current)
                current = []
            else:
                current.append(word)
    return out


def lab_commands(pages: list[Path] = PAGES) -> list[list[str]]:
    found = []
    blocks = [b for page in pages for b in bash_blocks(page.read_text(encoding="utf-8"))]
    for block in blocks:
        for argv in commands(block):
            if argv[:2] == ["python", "main.py"]:
                found.append(argv[2:])
            elif argv[:1] == ["attention-lab"]:
                found.append(argv[1:])
    return found


def test_the_readme_has_commands_to_check() -> None:
    assert len(lab_commands()) >= 10


@pytest.mark.parametrize("argv", lab_commands(), ids=lambda a: " ".join(a)[:60])
def test_each_readme_command_parses_with_the_cli(argv: list[str], capsys) -> None:
    from main import build_parser

    assert not [w for w in argv if PLACEHOLDER.match(w)], f"placeholder in {' '.join(argv)}"
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse refused it: the README would fail when pasted
        if exc.code == 0:  # --version / --help print and exit 0 while parsing
            return
        pytest.fail(f"{' '.join(argv)}: {capsys.readouterr().err.strip()} (exit {exc.code})")


def test_the_install_line_has_the_cpu_torch_command_next_to_it() -> None:
    first = bash_blocks(README.read_text(encoding="utf-8"))[0]
    lines = [argv for argv in commands(first)]
    torch = next(i for i, a in enumerate(lines)
                 if a[:2] == ["pip", "install"] and a[2:3] and a[2].startswith("torch"))
    install = next(i for i, a in enumerate(lines) if a[:3] == ["pip", "install", "-e"])
    assert torch < install, "the CPU torch must be installed before the project"
    assert "https://download.pytorch.org/whl/cpu" in lines[torch]


def test_the_length_example_is_the_run_its_table_was_measured_with() -> None:
    """The code block's length command carries the --trials and --seed of the "Measured (...)"
    sentence above the table, so pasting it reproduces the table."""
    pattern = r"Measured \(`(python main\.py simulate --d-k 64 --keys [^`]*)`"
    page = next(p for p in PAGES if re.search(pattern, p.read_text(encoding="utf-8")))
    measured = re.search(pattern, page.read_text(encoding="utf-8"))
    assert measured is not None
    quoted = shlex.split(" ".join(measured.group(1).split()))[2:]
    in_block = [a for a in lab_commands([page]) if a[:1] == ["simulate"] and "65536" in a]
    assert in_block, "no length example in a code block"
    from main import build_parser

    parse = build_parser().parse_args
    assert vars(parse(in_block[0])) == vars(parse(quoted))


def test_a_placeholder_is_caught() -> None:
    """The checks above do see a synopsis (so they fail if the README gets one back)."""
    argv = commands("python main.py inspect 16 8 --scale 8 [--json]\n")[0][2:]
    assert [w for w in argv if PLACEHOLDER.match(w)] == ["[--json]"]
    argv = commands("python main.py train --out DIR\n")[0][2:]
    assert [w for w in argv if PLACEHOLDER.match(w)] == ["DIR"]
