"""Hostile command lines: what a careless or hostile user types (a 300-character name for every
path option, an empty --out, a FIFO or /dev/zero as the text, invalid UTF-8 in --text, model
folders whose config or tokenizer files would take gigabytes, a file where an output folder
goes). Each case is a command line built in a fresh folder; every one must end in exit 2 with one
line naming the option, leave that folder as it was, and stay under the corpus's time and memory
bounds (``tests/fuzz/cli_runner.py`` runs them, ``test_cli_corpus.py`` judges them)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz.model_folders import (
    HOSTILE_CONFIGS,
    HOSTILE_LIBRARY_FILES,
    hostile_config_folder,
    hostile_library_folder,
)

#: a name longer than any file system allows (255 bytes)
LONG = "n" * 300
#: the shell's $'hello \xff\xfe world' as Python hands it over from argv (surrogateescape)
INVALID_UTF8 = b"hello \xff\xfe world".decode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class CliCase:
    """``argv(folder)`` builds the command line in a fresh ``folder`` (creating what it needs);
    the error line must hold ``option`` + ":" and each of ``words``."""

    argv: Callable[[Path], list[str]]
    option: str
    words: tuple[str, ...] = ()


def _fifo(folder: Path) -> str:
    os.mkfifo(folder / "text.fifo")
    return str(folder / "text.fifo")


def _socket(folder: Path) -> str:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "text.sock"))
    sock.close()  # the socket file stays
    return str(folder / "text.sock")


_NAME_TOO_LONG = ("300 bytes long, more than the 255",)
_EMPTY = ("must not be empty",)


def _long_paths() -> dict[str, CliCase]:
    """A 300-character name for every option that names a file or folder."""
    def out(cmd: list[str], option: str = "--out") -> CliCase:
        return CliCase(lambda f: [*cmd, option, str(f / LONG)], option, _NAME_TOO_LONG)

    text = ["--text", "the query meets the key"]
    return {
        "long_name_simulate_out": out(["simulate"]),
        "long_name_train_out": out(["train"]),
        "long_name_coord_check_out": out(["coord-check"]),
        "long_name_experiment_out": out(["experiment", "seeds"]),
        "long_name_probe_model_out": out(["probe-model", *text]),
        "long_name_probe_model_model": out(["probe-model", *text], "--model"),
        "long_name_probe_model_text_file": out(["probe-model"], "--text-file"),
        "long_name_audit_model_model": CliCase(lambda f: [
            "audit-model", "--model", str(f / LONG), "--out", str(f / "out")], "--model",
            _NAME_TOO_LONG),
        "long_name_audit_model_out": out(["audit-model"]),
        "long_name_audit_model_onnx": out(["audit-model"], "--onnx"),
        "long_name_audit_model_gguf": out(["audit-model"], "--gguf"),
        "long_name_audit_model_reference": out(["audit-model"], "--reference"),
        "long_name_audit_model_text_file": CliCase(lambda f: [
            "audit-model", "--text-file", str(f / LONG), "--out", str(f / "out")],
            "--text-file", _NAME_TOO_LONG),
        "long_name_reproduce_out": out(["reproduce", "--list"]),
        "long_name_reproduce_claims": out(["reproduce", "--list"], "--claims"),
        "long_name_reproduce_cache": out(["reproduce", "--list"], "--cache"),
        "long_name_screenshot": out([], "--screenshot"),
    }


def _empty_paths() -> dict[str, CliCase]:
    """An empty --out (``simulate --out ""`` once ran, wrote nothing and exited 0)."""
    def empty(cmd: list[str], option: str = "--out") -> CliCase:
        return CliCase(lambda f: [*cmd, option, ""], option, _EMPTY)

    text = ["--text", "the query meets the key"]
    return {
        "empty_out_simulate": empty(["simulate"]),
        "empty_out_train": empty(["train"]),
        "empty_out_coord_check": empty(["coord-check"]),
        "empty_out_experiment": empty(["experiment", "seeds"]),
        "empty_out_probe_model": empty(["probe-model", *text]),
        "empty_out_audit_model": empty(["audit-model"]),
        "empty_model_probe_model": empty(["probe-model", *text], "--model"),
    }


def _texts() -> dict[str, CliCase]:
    """Texts that once blocked forever, read until a MemoryError, or reached the tokenizer as
    invalid text."""
    def probe(source: Callable[[Path], str], words: tuple[str, ...]) -> CliCase:
        return CliCase(lambda f: ["probe-model", "--text-file", source(f)], "--text-file", words)

    def audit(source: Callable[[Path], str], words: tuple[str, ...]) -> CliCase:
        return CliCase(lambda f: ["audit-model", "--text-file", source(f), "--out",
                                  str(f / "out")], "--text-file", words)

    return {
        "text_file_fifo_probe_model": probe(_fifo, ("FIFO", "not a regular file")),
        "text_file_fifo_audit_model": audit(_fifo, ("FIFO", "not a regular file")),
        "text_file_dev_zero_probe_model": probe(lambda f: "/dev/zero", ("device",)),
        "text_file_dev_zero_audit_model": audit(lambda f: "/dev/zero", ("device",)),
        "text_file_socket_probe_model": probe(_socket, ("socket",)),
        "text_file_folder_probe_model": probe(lambda f: str(f), ("folder",)),
        "text_invalid_utf8_probe_model": CliCase(
            lambda f: ["probe-model", "--text", INVALID_UTF8], "--text", ("byte 0xff",)),
        "text_invalid_utf8_audit_model": CliCase(
            lambda f: ["audit-model", "--text", INVALID_UTF8, "--out", str(f / "out")],
            "--text", ("byte 0xff",)),
        "text_lone_surrogate_audit_model": CliCase(
            lambda f: ["audit-model", "--text", "a \ud800 b", "--out", str(f / "out")],
            "--text", ("lone surrogate U+D800",)),
    }


def _model_folders() -> dict[str, CliCase]:
    """Folders whose tensors the config decides, and tokenizer files a library reads whole."""
    cases: dict[str, CliCase] = {}
    for name in HOSTILE_CONFIGS:
        # over the default budget (4 GB), or under it but far beyond what the weights hold
        why = "memory budget of 4 GB" if name == "type_vocab_50m" else "left random"
        cases[f"model_memory_{name}"] = CliCase(
            lambda f, name=name: ["audit-model", "--model",
                                  str(hostile_config_folder(f / "model", name)),
                                  "--out", str(f / "out")],
            "--model", ("config.json", why))
    for name in HOSTILE_LIBRARY_FILES:
        cases[f"model_file_{name}"] = CliCase(
            lambda f, name=name: ["probe-model", "--text", "the key", "--model",
                                  str(hostile_library_folder(f / "model", name)),
                                  "--out", str(f / "out")],
            "--model", ("not a regular file",) if "fifo" in name or "dev_zero" in name
            else ("refused unread",))
    cases["model_memory_budget_out_of_range"] = CliCase(
        lambda f: ["audit-model", "--memory-budget", "0", "--out", str(f / "out")],
        "--memory-budget", ("must be in [0.1, 4096], got 0",))
    return cases


def _output_folders() -> dict[str, CliCase]:
    def jobs_file(f: Path) -> list[str]:
        (f / "run").mkdir()
        (f / "run" / "jobs").write_text("a user's notes")
        return ["experiment", "seeds", "--out", str(f / "run")]

    return {"experiment_out_with_a_file_named_jobs": CliCase(
        jobs_file, "--out", ("is a file where this writes a folder",))}


#: id -> the case (the corpus of hostile command lines)
CLI_CASES: dict[str, CliCase] = {**_long_paths(), **_empty_paths(), **_texts(),
                                 **_model_folders(), **_output_folders()}
