"""``attention-lab --install-desktop-entry``: a freedesktop.org .desktop file and the icon in the
user's XDG data folder, so the lab starts from the desktop's menu like any application. No Qt.

Files: ``$XDG_DATA_HOME/applications/attention-lab.desktop`` and
``$XDG_DATA_HOME/icons/hicolor/256x256/apps/attention-lab.png`` (XDG_DATA_HOME unset or not an
absolute path: ~/.local/share, as the XDG Base Directory spec says). Each is written atomically,
the icon first so the entry never points at a missing picture; a refused install leaves neither.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

#: the desktop file's id; also the GUI's desktop file name (Wayland matches windows by it)
APP_ID = "attention-lab"
ICON_SIZE = "256x256"
#: what the desktop entry spec makes a program's argument quote (Exec key)
_RESERVED = set(' \t\n"\'\\><~|&;$*?#()`')


def data_home() -> Path:
    """$XDG_DATA_HOME, or ~/.local/share where it is unset, empty or relative (the spec)."""
    value = os.environ.get("XDG_DATA_HOME", "")
    return Path(value) if os.path.isabs(value) else Path.home() / ".local" / "share"


def launch_command() -> list[str]:
    """How the menu starts this copy: a checkout's main.py with this Python; an installed lab's
    ``attention-lab`` script beside this Python (pip, pipx, a venv), else ``python -m main``."""
    from engine.bundled import checkout_root

    root = checkout_root()
    if root is not None:
        return [sys.executable, str(root / "main.py")]
    script = Path(sys.executable).parent / APP_ID
    return [str(script)] if script.is_file() else [sys.executable, "-m", "main"]


def _string(value: str) -> str:
    """A key's value as the spec writes strings: ``\\`` doubled; a line break is refused."""
    if "\n" in value or "\r" in value:
        raise ValueError(f"{value!r}: a desktop entry's value cannot hold a line break")
    return value.replace("\\", "\\\\")


def exec_value(argv: list[str]) -> str:
    """``argv`` as the value of an Exec key: an argument with a reserved character in double
    quotes (double quote, backquote, dollar and backslash escaped inside by a backslash), ``%``
    doubled, then the string escapes every value takes."""
    words = []
    for arg in argv:
        if _RESERVED & set(arg) or not arg:
            arg = '"' + "".join("\\" + c if c in '"`$\\' else c for c in arg) + '"'
        words.append(arg.replace("%", "%%"))
    return _string(" ".join(words))


def desktop_entry(argv: list[str], icon: Path) -> str:
    return "\n".join([
        "[Desktop Entry]",
        "Type=Application",
        "Version=1.5",
        "Name=Attention Scaling Lab",
        "GenericName=Attention scaling lab",
        "Comment=See, poke and measure why attention divides its scores by sqrt(d_k)",
        f"Exec={exec_value(argv)}",
        f"Icon={_string(str(icon))}",
        "Terminal=false",
        "Categories=Education;Science;",
        "Keywords=attention;transformer;softmax;",
        "StartupNotify=true",
        "",
    ])


def _new_folders(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def install(home: Path | None = None) -> tuple[Path, Path]:
    """Write the icon and the desktop entry under ``home`` (default data_home()); OSError or
    ValueError on failure, with nothing left behind."""
    from engine.bundled import resource
    from engine.io import atomic_write_bytes, atomic_write_text

    home = data_home() if home is None else home
    icon = home / "icons" / "hicolor" / ICON_SIZE / "apps" / f"{APP_ID}.png"
    entry = home / "applications" / f"{APP_ID}.desktop"
    text = desktop_entry(launch_command(), icon)
    picture = resource("icon.png").read_bytes()
    created = _new_folders(icon.parent) + _new_folders(entry.parent)
    had_icon = icon.exists()
    try:
        icon.parent.mkdir(parents=True, exist_ok=True)
        entry.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(icon, picture)
        atomic_write_text(entry, text)
    except OSError:
        if not had_icon:
            icon.unlink(missing_ok=True)
        for folder in created:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if empty
        raise
    return entry, icon


def run() -> int:
    """The ``--install-desktop-entry`` option: 0 when written, 2 (one line) when refused."""
    prog = "attention-lab: error: --install-desktop-entry"
    if sys.platform in ("darwin", "win32"):
        sys.stderr.write(f"{prog}: writes a freedesktop.org menu entry (Linux and other XDG "
                         "desktops); for macOS and Windows see docs/install.md\n")
        return 2
    try:
        entry, icon = install()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        where = getattr(exc, "filename", None)
        sys.stderr.write(f"{prog}: {f'{where}: ' if where else ''}{reason}\n")
        return 2
    print(f"wrote {entry}\nwrote {icon}")
    return 0
