"""The documentation builds as a site in strict mode (a broken link, anchor or missing page fails),
every page is in the navigation, and the README's links and test command hold.

CI installs mkdocs through the ``test`` extra (which pulls in the ``docs`` extra), so the build is
never skipped there."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, env=env, timeout=300)


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in _nav_pages(item)]
    if isinstance(node, dict):
        return [p for value in node.values() for p in _nav_pages(value)]
    return []


def _config() -> dict:
    # the theme's !!python/name tags are not needed here: load the plain structure
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    result = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "guide" / "simulation.html").is_file()
    assert (tmp_path / "site" / "cli.html").is_file()


def test_strict_mode_fails_a_broken_link_and_anchor(tmp_path: Path) -> None:
    """The build has teeth: the same config over a copy of docs/ with one bad link fails."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "guide" / "inspector.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](../no_such_page.md)\n",
                    encoding="utf-8")
    result = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0 and "no_such_page.md" in result.stdout + result.stderr
    page.write_text(page.read_text(encoding="utf-8").replace(
        "../no_such_page.md", "../cli.md#no-such-command"), encoding="utf-8")
    result = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0 and "no-such-command" in result.stdout + result.stderr


def test_every_page_is_in_the_navigation_and_every_entry_exists() -> None:
    nav = _nav_pages(_config()["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(set(nav)) == pages, (set(pages) - set(nav), set(nav) - set(pages))
    assert len(nav) == len(set(nav))


def test_the_readme_links_point_at_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10, local  # the table of links into docs/ and the screenshots
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing
    for page in ("guide/simulation.md", "guide/training.md", "cli.md", "results.md"):
        assert f"docs/{page}" in local, page


def test_the_readme_is_a_front_door() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 160


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run runs the README's install-and-test line: the two stay in step."""
    readme = README.read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = 'pip install -e ".[test]" && python -m pytest -n auto'
    assert command in readme
    assert command in (DOCS / "index.md").read_text(encoding="utf-8")  # the site's front page
    assert command in ci.splitlines()


def _quick_start() -> list[str]:
    text = README.read_text(encoding="utf-8").split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", text, flags=re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    """The five commands, verbatim except that ``runs/`` lands in a temporary folder."""
    commands = _quick_start()
    assert len(commands) == 5 and all(c.startswith("python main.py") for c in commands)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
           "HOME": str(tmp_path / "home")}
    for command in commands[:4]:
        argv = [sys.executable, *command.replace("runs/", f"{tmp_path}/runs/").split()[1:]]
        result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env,
                                timeout=600)
        assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-2000:])
    assert (tmp_path / "runs" / "simulate" / "summary.csv").is_file()
    assert (tmp_path / "runs" / "train" / "metrics.csv").is_file()
    # the last one opens the window: it must still be running (no traceback) after a while
    assert commands[4] == "python main.py"
    app = subprocess.Popen([sys.executable, "main.py"], cwd=ROOT, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        app.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if app.poll() is None:
            app.terminate()
            app.wait(timeout=30)
            alive = True
        else:
            alive = False
    assert alive, app.stderr.read()[-2000:]


def _cells(row: str) -> int:
    return len(re.split(r"(?<!\\)\|", row.strip().strip("|")))


def test_every_table_has_as_many_cells_per_row_as_its_header() -> None:
    """A header whose cell count differs from its separator is no table at all (a bare ``|J|``
    in a header cell did that to the worked examples): every row matches its header."""
    bad = []
    for path in [README, *sorted(DOCS.rglob("*.md"))]:
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if i and re.fullmatch(r"\|( *:?-+:? *\|)+", line.strip()):
                width = _cells(line)
                j = i + 1
                rows = [lines[i - 1]]
                while j < len(lines) and lines[j].startswith("|"):
                    rows.append(lines[j])
                    j += 1
                bad += [f"{path.name}:{i}: {row[:60]}" for row in rows if _cells(row) != width]
    assert not bad, "\n".join(bad)


def test_the_tour_guide_counts_the_steps_of_resources_tour_json() -> None:
    from ui.pages.tour.steps import load_steps

    steps = load_steps()
    appendix = [s for s in steps if s.title.startswith("Beyond the question")]
    asking = [s for s in steps if s.question is not None]
    text = (DOCS / "guide" / "tour.md").read_text(encoding="utf-8")
    assert f"The question takes {len(steps) - len(appendix)} steps" in text
    assert f"appendix of {len(appendix)} steps" in text
    assert f"\n{len(asking)} steps ask first" in text
    for step in appendix:
        assert step.title.split(": ", 1)[1].split()[0].lower() in text.lower(), step.title


def test_the_module_map_names_modules_that_exist() -> None:
    """docs/architecture.md's map: every ``name.py`` and ``folder/`` it names exists under the
    top-level folder it is listed in (the map stays true as modules move)."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"```\n(.*?)```", text, flags=re.S).group(1)
    top, missing, named = ROOT, [], 0
    for line in block.splitlines():
        if line[:1] not in (" ", ""):
            first = line.split()[0]
            top = ROOT / first.rstrip("/") if first.endswith("/") else ROOT
            if first.endswith(("/", ".py")):
                named += 1
                if not (ROOT / first).exists():
                    missing.append(first)
        entry = line[2:].split(" ")[0] if line.startswith("  ") and line[2:3] != " " else ""
        if entry.endswith("/"):
            named += 1
            if not (top / entry).is_dir():
                missing.append(f"{top.name}/{entry}")
        for name in re.findall(r"(?<![\w/.])([a-z_][\w/]*\.py)\b", line):
            named += 1
            if not any(top.rglob(name)):
                missing.append(f"{top.relative_to(ROOT)}: {name}")
    assert named >= 40, named
    assert not missing, missing
