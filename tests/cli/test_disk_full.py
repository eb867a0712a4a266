"""Disk full: a command's output folder is all old or all new. ``simulate --force`` over an
earlier run that runs out of space mid-way leaves the earlier run's files exactly as they were
(once it left the new summary.csv beside the old histograms); ``train`` into a new folder leaves
no folder. Simulated by an ENOSPC at the write itself (everywhere), and for real on a tiny tmpfs
in a private mount namespace (where ``unshare`` may make one: skipped with the reason elsewhere).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import engine.io as io_mod
import main

ROOT = Path(__file__).resolve().parents[2]
SIMULATE = ["simulate", "--trials", "100", "--seed", "1", "--quiet"]


def _exit_code(argv: list[str]) -> int:
    try:
        return main.main(argv)
    except SystemExit as exc:
        return int(exc.code)


def _contents(folder: Path) -> dict[str, str]:
    """name -> sha256 of every entry in ``folder`` (hidden ones too: no staging left over)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "folder"
            for p in sorted(folder.iterdir())}


def _full_after(monkeypatch, n_writes: int) -> None:
    """Every atomic write after the first ``n_writes`` fails as a full disk does."""
    real, calls = io_mod.atomic_write_bytes, []

    def write(path, data):
        calls.append(path)
        if len(calls) > n_writes:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(io_mod, "atomic_write_bytes", write)


def test_simulate_force_on_a_full_disk_keeps_the_earlier_run(tmp_path: Path, monkeypatch,
                                                             capsys) -> None:
    out = tmp_path / "run"
    assert _exit_code([*SIMULATE, "--d-k", "4", "--out", str(out)]) == 0
    (out / "notes.txt").write_text("mine")
    before = _contents(out)
    capsys.readouterr()
    _full_after(monkeypatch, 1)  # the new summary.csv is written, then the disk is full
    assert _exit_code([*SIMULATE, "--d-k", "8", "--seed", "2", "--out", str(out),
                       "--force"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out: cannot write to" in err[0], err
    assert "No space left on device; nothing written (the folder is as it was)" in err[0]
    assert _contents(out) == before


@pytest.mark.slow
def test_train_on_a_full_disk_leaves_no_folder(tmp_path: Path, monkeypatch, capsys) -> None:
    pytest.importorskip("torch")
    _full_after(monkeypatch, 2)
    out = tmp_path / "new" / "train"
    assert _exit_code(["train", "--steps", "2", "--log-every", "1", "--quiet",
                       "--out", str(out)]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # not the folder, not its parent, no staging


#: run inside a private mount namespace with a 96 kB tmpfs at argv[1]: the first simulate fits,
#: the second (--force, four times the data) does not; train then finds the disk full
_ON_A_TINY_DISK = r"""
import hashlib, json, subprocess, sys
from pathlib import Path
disk = Path(sys.argv[1])
run = lambda *a: subprocess.run([sys.executable, "main.py", *a, "--quiet"], capture_output=True,
                                text=True)
sums = lambda d: {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}
first = run("simulate", "--trials", "100", "--d-k", "4", "--seed", "1", "--out", str(disk / "s"))
before = sums(disk / "s")
second = run("simulate", "--trials", "100", "--d-k", "4", "8", "16", "32", "64", "--seed", "2",
             "--out", str(disk / "s"), "--force")
train = run("train", "--steps", "2", "--log-every", "1", "--out", str(disk / "t"))
print(json.dumps({"first": first.returncode, "before": before, "second": second.returncode,
                  "second_err": second.stderr, "after": sums(disk / "s"),
                  "train": train.returncode, "train_err": train.stderr,
                  "left": sorted(p.name for p in disk.iterdir())}))
"""


@pytest.mark.slow
def test_on_a_real_full_file_system(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    if unshare is None or not sys.platform.startswith("linux"):
        pytest.skip("needs Linux's unshare to mount a tiny tmpfs in a private namespace")
    disk = tmp_path / "disk"
    disk.mkdir()
    script = tmp_path / "tiny_disk.py"
    script.write_text(_ON_A_TINY_DISK)
    mount = f'mount -t tmpfs -o size=96k tmpfs "$1" && exec "{sys.executable}" "$2" "$1"'
    try:
        proc = subprocess.run([unshare, "--user", "--map-root-user", "--mount", "sh", "-c",
                               mount, "sh", str(disk), str(script)], cwd=ROOT,
                              capture_output=True, text=True, timeout=600,
                              env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    except OSError as exc:
        pytest.skip(f"cannot run unshare: {exc}")
    if proc.returncode != 0 and not proc.stdout.strip():
        pytest.skip(f"no private tmpfs here (unprivileged user namespaces or mounts not "
                    f"allowed): {proc.stderr.strip()[-300:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["first"] == 0 and len(got["before"]) == 3, got
    assert got["second"] == 2 and "No space left on device" in got["second_err"], got
    assert got["after"] == got["before"]  # the earlier run, byte for byte, nothing beside it
    assert got["train"] == 2 and "No space left on device" in got["train_err"], got
    assert got["left"] == ["s"]  # no train folder, no staging folder
