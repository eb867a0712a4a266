"""``--install-desktop-entry``: the .desktop file and the icon land in the XDG data folder, the
Exec line starts this lab however odd its path, a refused install leaves nothing behind."""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import pytest

from main import main
from ui import desktop_entry
from ui.desktop_entry import exec_value

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(sys.platform in ("darwin", "win32"), reason="XDG desktops only")


def _unescape_string(value: str) -> str:
    """The desktop entry spec's string escapes (\\s \\n \\t \\r \\\\), read left to right."""
    out, i = [], 0
    while i < len(value):
        if value[i] == "\\" and i + 1 < len(value):
            out.append({"s": " ", "n": "\n", "t": "\t", "r": "\r", "\\": "\\"}[value[i + 1]])
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def _expand_percent(text: str) -> str:
    """%% is a literal % (as GLib's launcher reads it: over the whole line, before quoting);
    any other field code is an error here."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "%":
            assert text[i + 1 : i + 2] == "%", f"a field code in {text!r}"
            i += 1
        out.append(text[i])
        i += 1
    return "".join(out)


def _split_exec(value: str) -> list[str]:
    """The spec's Exec rules, by hand: words split at spaces; inside double quotes a backslash
    escapes one of " ` $ \\."""
    text = _expand_percent(_unescape_string(value))
    words, word, quoted, i, started = [], [], False, 0, False
    while i < len(text):
        c = text[i]
        if quoted:
            assert c not in "`$", f"{c} must be escaped inside quotes: {value!r}"
            if c == "\\":
                assert text[i + 1] in '"`$\\', f"a backslash before {text[i + 1]!r}: {value!r}"
                word.append(text[i + 1])
                i += 1
            elif c == '"':
                quoted = False
            else:
                word.append(c)
        elif c == '"':
            quoted, started = True, True
        elif c == " ":
            if word or started:
                words.append("".join(word))
            word, started = [], False
        else:
            word.append(c)
        i += 1
    assert not quoted, value
    if word or started:
        words.append("".join(word))
    return words


def _entry(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "[Desktop Entry]"
    return dict(line.split("=", 1) for line in lines[1:] if line)


@pytest.mark.parametrize("argv", [
    ["/usr/bin/python3", "/home/ann/lab/main.py"],
    ["/home/ann/my lab/.venv/bin/attention-lab"],
    ["/opt/x$HOME/`id`/py", '/a "quoted" \\ path/100%/main.py'],
    ["/tmp/tab\there/py", "", "~/x;y|z&(w)#*?<>'"],
])
def test_exec_lines_read_back_as_the_same_arguments(argv) -> None:
    value = exec_value(argv)
    assert "\n" not in value and "%" not in value.replace("%%", "")
    assert _split_exec(value) == argv


def test_a_line_break_in_a_path_is_refused() -> None:
    with pytest.raises(ValueError, match="line break"):
        exec_value(["/a\nb/python"])


def test_the_entry_and_icon_land_in_xdg_data_home(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data home"))
    assert main(["--install-desktop-entry"]) == 0
    apps = tmp_path / "data home" / "applications"
    assert sorted(p.name for p in apps.iterdir()) == ["attention-lab.desktop"]  # no temp files
    entry = _entry(apps / "attention-lab.desktop")
    assert entry["Type"] == "Application" and entry["Name"] == "Attention Scaling Lab"
    assert entry["Terminal"] == "false" and "Education;" in entry["Categories"]
    # from a checkout: this Python and this checkout's main.py
    assert _split_exec(entry["Exec"]) == [sys.executable, str(ROOT / "main.py")]
    icon = Path(_unescape_string(entry["Icon"]))
    assert icon == tmp_path / "data home" / "icons" / "hicolor" / "256x256" / "apps" / "attention-lab.png"
    data = icon.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (256, 256)
    assert data == (ROOT / "resources" / "icon.png").read_bytes()
    assert str(apps / "attention-lab.desktop") in capsys.readouterr().out
    first = (apps / "attention-lab.desktop").read_bytes()
    assert main(["--install-desktop-entry"]) == 0  # again: the same files, replaced
    assert (apps / "attention-lab.desktop").read_bytes() == first


@pytest.mark.parametrize("value", ["", "relative/dir"])
def test_unset_or_relative_xdg_data_home_means_the_default(tmp_path, monkeypatch, value) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", value)
    monkeypatch.chdir(tmp_path)
    assert desktop_entry.data_home() == tmp_path / ".local" / "share"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert desktop_entry.data_home() == tmp_path / ".local" / "share"


def test_an_installed_lab_starts_its_own_script(tmp_path, monkeypatch) -> None:
    """Outside a checkout: the attention-lab script beside this Python (a venv, pipx), else
    ``python -m main``."""
    monkeypatch.setattr("engine.bundled.checkout_root", lambda: None)
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(python))
    assert desktop_entry.launch_command() == [str(python), "-m", "main"]
    (python.parent / "attention-lab").write_text("#!/bin/sh\n")
    assert desktop_entry.launch_command() == [str(python.parent / "attention-lab")]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_folder_is_refused_in_one_line_leaving_nothing(tmp_path, monkeypatch,
                                                                     capfd) -> None:
    home = tmp_path / "data"
    (home / "icons").mkdir(parents=True)
    (home / "applications").mkdir()
    (home / "applications").chmod(0o500)
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    try:
        assert main(["--install-desktop-entry"]) == 2
        assert list((home / "applications").iterdir()) == []
    finally:
        (home / "applications").chmod(0o700)
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "--install-desktop-entry" in err and "Traceback" not in err
    assert list((home / "icons").iterdir()) == []  # the icon's folders went too


def test_a_file_in_the_way_is_refused_in_one_line_leaving_nothing(tmp_path, monkeypatch,
                                                                  capfd) -> None:
    home = tmp_path / "data"
    home.mkdir()
    (home / "applications").write_text("not a folder")
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    assert main(["--install-desktop-entry"]) == 2
    assert sorted(p.name for p in home.iterdir()) == ["applications"]
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attention-lab: error: --install-desktop-entry")


def test_a_command_with_it_is_refused(capfd) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--install-desktop-entry", "inspect", "1", "2"])
    assert exc.value.code == 2
    assert "--install-desktop-entry: takes no command" in capfd.readouterr().err
