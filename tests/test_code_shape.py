"""The code stays readable: no function in engine/ or ui/ longer than about 60 lines, and no
nesting five blocks deep (a long function or a deep nest is split into named steps)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "ui")
MAX_LINES = 60
MAX_DEPTH = 4  #: blocks inside a function; the fifth level fails
BLOCKS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
          ast.Match) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _depth(node: ast.AST, level: int = 0) -> int:
    """The deepest block nesting under ``node`` (an ``elif`` is not a level of its own; a nested
    function starts again at 0: it is checked on its own)."""
    deepest = level
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (*FUNCTIONS, ast.ClassDef, ast.Lambda)):
            continue
        is_elif = (isinstance(node, ast.If) and isinstance(child, ast.If)
                   and len(node.orelse) == 1 and node.orelse[0] is child)
        step = 1 if isinstance(child, BLOCKS) and not is_elif else 0
        deepest = max(deepest, _depth(child, level + step))
    return deepest


def _body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the ``def`` to the last statement, the docstring left out."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str) and len(body) > 1:
        return body[-1].end_lineno - body[1].lineno + 2
    return fn.end_lineno - fn.lineno + 1


def shape_problems(text: str, name: str) -> list[str]:
    """Each function of the source ``text`` that is too long or nested too deep."""
    problems = []
    for node in ast.walk(ast.parse(text, filename=name)):
        if not isinstance(node, FUNCTIONS):
            continue
        lines = _body_lines(node)
        if lines > MAX_LINES:
            problems.append(f"{name}:{node.lineno} {node.name}: {lines} lines (at most {MAX_LINES})")
        depth = _depth(node)
        if depth > MAX_DEPTH:
            problems.append(f"{name}:{node.lineno} {node.name}: nested {depth} deep "
                            f"(at most {MAX_DEPTH})")
    return problems


def test_the_checks_see_a_long_function_and_a_deep_nest():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES + 1))
    deep = ("def g(a):\n    for x in a:\n        if x:\n            while x:\n"
            "                with open(x) as f:\n                    if f:\n                        pass\n")
    fine = "def h(a):\n    if a:\n        pass\n    elif a:\n        if a:\n            pass\n"
    just = "def k():\n" + "".join(f"    y{i} = {i}\n" for i in range(MAX_LINES - 1))  # 60 lines
    found = shape_problems(f"def f():\n{body}\n{deep}\n{fine}\n{just}", "probe.py")
    assert any(" f: " in p and "lines" in p for p in found)
    assert any(" g: nested 5 deep" in p for p in found)
    assert not any(" h: " in p for p in found)
    assert not any(" k: " in p for p in found)


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_long_function_and_no_deep_nesting(path):
    assert shape_problems(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))) == []

