"""The readers under fuzz: every file format the lab reads, each with a valid document to mutate,
how to write a document as that file, and how to read it. A read either returns (a reader that
never refuses: a job scan, a progress file, a setting) or raises its one clear error; ``outcome``
turns that into a value the tests judge."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESOURCES = ROOT / "resources"


def _always(_got: Any) -> bool:
    return True


def _same(path: Path) -> Path:
    return path


@dataclass(frozen=True)
class Reader:
    name: str
    suffix: str
    #: a valid document (JSON data; None: the reader takes no JSON document, e.g. weights.pt)
    valid: Callable[[], Any] | None
    #: write data (a JSON document) or raw bytes as the file at ``path``
    write: Callable[[Path, Any], None]
    #: read what ``where`` names; raises one of ``errors``, or returns what it read
    read: Callable[[Path], Any]
    #: refusals this reader may raise (anything else is a bug); () for one that never raises
    errors: tuple[type[BaseException], ...]
    #: a reader that never raises: whether what it returned refuses the file (hostile input)
    refused: Callable[[Any], bool] = _always
    #: whether what a read returned is safe to use (checked for every accepted document)
    sane: Callable[[Any], bool] = _always
    #: ``where`` (a fresh path) -> the file to fill (e.g. a job file inside a prepared folder)
    prepare: Callable[[Path], Path] = _same
    #: reads files (False: a value held elsewhere, e.g. a setting: no folders, FIFOs, links)
    files: bool = True
    #: hostile contents that are a sound file of this format all the same (taken, and sane)
    sound: frozenset[str] = frozenset()


def dump(data: Any) -> bytes:
    return json.dumps(data, allow_nan=True).encode("utf-8")


def write_json(path: Path, doc: Any) -> None:
    path.write_bytes(doc if isinstance(doc, bytes) else dump(doc))


def _file_errors() -> tuple[type[BaseException], ...]:
    from engine.errors import FileFormatError

    return (FileFormatError,)


# -- valid documents ---------------------------------------------------------------------------
def valid_session() -> dict:
    from engine.config import SimulationConfig
    from engine.training.config import TrainingConfig

    return {"app": "attention-scaling-lab", "kind": "session",
            "config": SimulationConfig().to_dict(), "sweep_axis": "d_k",
            "training": TrainingConfig().to_dict(),
            "real_model": {"model": None, "text": "the query meets the key", "rule": "none"}}


SPEC_BASE = {"d_model": 16, "heads": 2, "items_max": 5, "classes": 4, "key_dim": 4,
             "scalings": ["none", "sqrt"], "steps": 8, "log_every": 4, "batch": 8,
             "probe_size": 4, "hist_bins": 20, "device": "cpu"}


def fuzz_spec() -> Any:
    from engine.experiments.spec import Axis, ExperimentSpec, FigureSpec, VerdictSpec
    from engine.training.config import TrainingConfig

    return ExperimentSpec("fuzz", TrainingConfig(**{**SPEC_BASE, "scalings": ("none", "sqrt")}),
                          (Axis("seed", (0, 1)),), figures=(
                              FigureSpec("by_rule", "success", "Success"),),
                          verdict=VerdictSpec("by_rule", "success"))


def valid_experiment_json() -> dict:
    return {"experiment": fuzz_spec().to_dict(), "status": "finished", "jobs": 2, "done": 2,
            "failed": 0, "workers": 1, "executor": "process", "versions": {"numpy": "2.0"}}


def valid_job() -> dict:
    """A job file of job 1 of ``fuzz_spec`` (synthetic numbers: only the form matters here)."""
    from engine.experiments.job import RESULT_FIELDS
    from engine.training.observe import CSV_COLUMNS

    job = fuzz_spec().jobs()[1]
    rules = {r: {**dict.fromkeys(RESULT_FIELDS, 0.5), "steps_to_target": 4, "diverged_step": None,
                 "collapsed": False} for r in job.config.scalings}
    rows = [{**dict.fromkeys(CSV_COLUMNS, 0.25), "scaling": r, "step": s, "temperature": ""}
            for r in job.config.scalings for s in job.config.log_steps]
    return {"config": job.config.to_dict(), "target": 0.9, "rules": rules, "rows": rows,
            "seconds": 1.0, "device": "cpu", "error": None, "cancelled": False,
            "index": job.index, "key": job.key, "values": dict(job.values)}


def valid_claims() -> dict:
    raw = json.loads((RESOURCES / "claims.json").read_text())
    picked, kinds = [], set()
    for claim in raw["claims"]:  # one of each kind
        if claim["kind"] not in kinds:
            kinds.add(claim["kind"])
            picked.append(claim)
    return {"claims": picked}


def _first(path: Path, n: int = 1) -> dict:
    data = json.loads(path.read_text())
    return dict(list(data.items())[:n])


def valid_tour() -> dict:
    data = json.loads((RESOURCES / "tour.json").read_text())
    return {"base": data["base"], "steps": data["steps"][:2]}


def valid_probe_texts() -> dict:
    data = json.loads((RESOURCES / "probe_texts.json").read_text())
    return {"presets": data["presets"][:2]}


# -- readers -----------------------------------------------------------------------------------
def _read_session(path: Path) -> Any:
    from engine.config import SimulationConfig
    from ui.session_file import read_session_file

    return read_session_file(path, lambda: SimulationConfig().to_dict())


def _write_png(path: Path, doc: Any) -> None:
    from PySide6.QtGui import QImage

    from ui.plots.figure_metadata import METADATA_KEY

    text = doc.decode("utf-8", "replace") if isinstance(doc, bytes) else dump(doc).decode()
    image = QImage(4, 4, QImage.Format.Format_RGB32)
    image.fill(0)
    image.setText(METADATA_KEY, text)
    assert image.save(str(path), "PNG")


def _write_svg(path: Path, doc: Any) -> None:
    from xml.sax.saxutils import escape

    from ui.plots.figure_metadata import METADATA_KEY

    text = doc.decode("utf-8", "replace") if isinstance(doc, bytes) else dump(doc).decode()
    path.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4">'
                    f'<metadata id="{METADATA_KEY}">{escape(text)}</metadata>'
                    '<rect width="4" height="4"/></svg>', encoding="utf-8")


def _read_experiment(path: Path) -> Any:
    from engine.experiments.runner import load_experiment

    return load_experiment(path)


def _prepare_job(folder: Path) -> Path:
    """An experiment folder with its experiment.json; the file to fill is job 1's."""
    from engine.io import write_json as lab_write_json

    (folder / "jobs").mkdir(parents=True, exist_ok=True)
    lab_write_json(folder / "experiment.json", valid_experiment_json())
    return folder / "jobs" / "job-00001.json"


def _read_jobs(path: Path) -> Any:
    from engine.experiments.runner import scan_results

    return scan_results(fuzz_spec(), path)


def _jobs_refused(got: Any) -> bool:
    found, ignored = got
    return not found and len(ignored) == 1 and all(len(r) < 1000 and "\n" not in r
                                                    for r in ignored)


def _jobs_usable(got: Any) -> bool:
    """What a scan took is safe for everything downstream: the summaries, the CSV rows, the
    figures and the verdict (a job file that passes must never crash them later)."""
    from engine.experiments.figures import figure_data, verdict
    from engine.experiments.summary import group_results, metrics_rows, summary_rows
    from engine.io import csv_text

    found, ignored = got
    spec = fuzz_spec()
    results = list(found.values())
    csv_text(summary_rows(spec, results))
    csv_text(metrics_rows(results))
    group_results(spec, results)
    figure_data(spec, results)
    verdict(spec, results)
    return len(found) + len(ignored) == 1


def _read_claims(path: Path) -> Any:
    from engine.claims import load_claims

    return load_claims(path)


def _read_training_presets(path: Path) -> Any:
    from engine.training.presets import load_presets

    return load_presets(path)


def _read_simulation_presets(path: Path) -> Any:
    from engine.simulation_presets import load_presets

    return load_presets(path)


def _read_builtin(path: Path) -> Any:
    from engine.experiments.builtin import read_builtin

    return read_builtin(path)


def _read_tour(path: Path) -> Any:
    from ui.pages.tour.steps import load_steps

    return load_steps(path)


def _tour_errors() -> tuple[type[BaseException], ...]:
    from ui.pages.tour.steps import TourError

    return (TourError,)


def _read_probe_texts(path: Path) -> Any:
    from engine.probe.texts import load_text_presets

    return load_text_presets(path)


def _texts_ok(got: Any) -> bool:
    return bool(got) and all(isinstance(n, str) and n.strip() and isinstance(t, str)
                             and t.strip() for n, t in got)


# -- model folders: config.json and the safetensors header, read before anything is built ------
#: a tiny GPT-2's tensors (name: shape, float32): the embeddings and three layers
MODEL_TENSORS = {"wte.weight": [64, 64], **{f"h.{i}.ln_1.weight": [64] for i in range(3)}}
MODEL_DATA_BYTES = 4 * sum(math.prod(shape) for shape in MODEL_TENSORS.values())


def valid_model_config() -> dict:
    return {"model_type": "gpt2", "architectures": ["GPT2Model"], "n_layer": 3, "n_head": 4,
            "n_embd": 64, "n_positions": 128, "vocab_size": 64, "_name_or_path": "tiny"}


def valid_safetensors_header() -> dict:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in MODEL_TENSORS.items():
        n = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    return header


def _write_safetensors(path: Path, doc: Any) -> None:
    """A safetensors file: the header (a document, or raw bytes as the header) and the data of
    the valid header's tensors."""
    import struct

    raw = doc if isinstance(doc, bytes) else dump(doc)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(MODEL_DATA_BYTES))


def _prepare_model_config(folder: Path) -> Path:
    """A model folder with sound weights; the file to fill is its config.json."""
    folder.mkdir(parents=True, exist_ok=True)
    _write_safetensors(folder / "model.safetensors", valid_safetensors_header())
    return folder / "config.json"


def _prepare_safetensors(folder: Path) -> Path:
    """A model folder with a sound config.json; the file to fill is its model.safetensors."""
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", valid_model_config())
    return folder / "model.safetensors"


def _read_model_folder(path: Path) -> Any:
    from engine.probe.model_folder import inspect_model_dir

    return inspect_model_dir(path)


def _model_ok(info: Any) -> bool:
    """What reaches the loader: whole positive sizes that fit, names that are strings."""
    sizes = (info.n_layers, info.n_heads, info.d_model, info.max_positions, info.d_k)
    return (all(type(v) is int and v >= 1 for v in sizes) and isinstance(info.model_type, str)
            and info.model_type.strip() and all(isinstance(a, str) for a in info.architectures)
            and (info.head_dim is not None or info.d_model % info.n_heads == 0))


def _write_weights(path: Path, doc: Any) -> None:
    """Bytes that are JSON as the object torch.save writes of it (a weights.pt of the wrong
    structure), other bytes as they are (not a torch file)."""
    import torch

    from engine.errors import FileFormatError
    from engine.readers.json_file import parse_json

    if isinstance(doc, bytes):
        try:
            doc = parse_json(doc, "case", max_bytes=10**8, max_depth=10**6)
        except (FileFormatError, RecursionError):
            path.write_bytes(doc)
            return
    try:
        torch.save(doc, path)
    except RecursionError:  # (too deep for torch.save itself: the bytes as they are)
        path.write_bytes(dump(doc))


def _read_weights(path: Path) -> Any:
    from engine.probe.training_audit import load_training_runs

    return load_training_runs(path)


def _read_progress(path: Path) -> Any:
    from engine.experiments.job import read_progress

    return read_progress(path)


def _progress_ok(got: Any) -> bool:
    return got is None or (isinstance(got, float) and 0.0 <= got <= 1.0 and math.isfinite(got))


class _Settings:
    """A QSettings stand-in holding one raw value (what a hand-edited settings file gives)."""

    def __init__(self, raw: str) -> None:
        self.raw = raw

    def value(self, _key: str) -> str:
        return self.raw


def _read_setting(path: Path) -> Any:
    from ui.settings import load_json

    return load_json(_Settings(path.read_bytes().decode("utf-8", "replace")), "config")


def _read_training_config(path: Path) -> Any:
    from engine.probe.training_audit import _is_training_config

    return _is_training_config(path)


def readers() -> dict[str, Reader]:
    files = _file_errors()
    return {r.name: r for r in (
        Reader("session", ".json", valid_session, write_json, _read_session, files),
        Reader("figure_png", ".png", valid_session, _write_png, _read_session, files),
        Reader("figure_svg", ".svg", valid_session, _write_svg, _read_session, files),
        Reader("experiment_json", ".json", valid_experiment_json, write_json, _read_experiment,
               files),
        Reader("job_file", "", valid_job, write_json, _read_jobs, (), _jobs_refused,
               _jobs_usable, _prepare_job),
        Reader("claims", ".json", valid_claims, write_json, _read_claims, files),
        Reader("training_presets", ".json", lambda: _first(RESOURCES / "presets" /
                                                           "training.json"),
               write_json, _read_training_presets, files),
        Reader("simulation_presets", ".json", lambda: _first(RESOURCES / "presets" /
                                                             "simulation.json"),
               write_json, _read_simulation_presets, files),
        Reader("builtin_experiment", ".json", lambda: json.loads(
            (RESOURCES / "experiments" / "seeds.json").read_text()), write_json, _read_builtin,
            files),
        Reader("tour", ".json", valid_tour, write_json, _read_tour, _tour_errors()),
        Reader("probe_texts", ".json", valid_probe_texts, write_json, _read_probe_texts, files,
               sane=_texts_ok),
        Reader("model_config", "", valid_model_config, write_json, _read_model_folder, files,
               sane=_model_ok, prepare=_prepare_model_config),
        Reader("safetensors_header", "", valid_safetensors_header, _write_safetensors,
               _read_model_folder, files, sane=_model_ok, prepare=_prepare_safetensors,
               sound=frozenset({"empty_object"})),  # a header of no tensors: an empty file
        Reader("weights", ".pt", None, _write_weights, _read_weights, files),
        Reader("progress", ".progress", lambda: {"step": 3, "steps": 10}, write_json,
               _read_progress, (), lambda got: got is None, _progress_ok),
        Reader("setting", ".ini", lambda: {"d_k": 64}, write_json, _read_setting, (),
               files=False),
        Reader("train_config_json", ".json", lambda: {"command": "train", "config": {}},
               write_json, _read_training_config, (), lambda got: isinstance(got, bool),
               lambda got: isinstance(got, bool)),
    )}


#: the readers whose files are JSON documents (fuzzed field by field)
READERS_WITH_DOCUMENTS = sorted(n for n, r in readers().items() if r.valid is not None)
