"""A job's fingerprint (config, training code, torch, CPU kernels) and the kernel pin in every
process that trains: what the claims' cache keys on."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from engine.cpu_kernels import X86, kernels_in_use
from engine.experiments import fingerprint
from engine.experiments.fingerprint import TRAINING_MODULES, job_fingerprint
from engine.experiments.job import run_job
from engine.training.config import TrainingConfig

ROOT = Path(__file__).resolve().parents[3]
TINY = TrainingConfig(d_model=16, heads=1, items_max=5, classes=4, key_dim=4, scalings=("sqrt",),
                      steps=2, log_every=1, batch=4, probe_size=2, hist_bins=10, device="cpu")
#: engine modules a job imports that do not decide its numbers (files, the fingerprint itself)
NOT_NUMBERS = {"engine.io", "engine.experiments.fingerprint"}
ON_X86 = platform.machine().lower() in X86


def _python(code: str, env: dict[str, str]) -> str:
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


def _bare_env() -> dict[str, str]:
    """A process started by hand (a Dask worker, a script): no kernel variables set."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")}
    return {**env, "PYTHONPATH": str(ROOT)}


@pytest.mark.parametrize("prelude", ["", "import torch; "])
@pytest.mark.slow
def test_a_bare_process_pins_and_a_job_imports_only_fingerprinted_modules(prelude) -> None:
    """A process started by hand (a Dask worker: no kernel variables set, perhaps torch already
    imported) runs a job on the pinned kernels (torch decides at its first operation, not at
    import), and the job runs no engine module that the fingerprint leaves out."""
    code = (prelude + "import sys, json; from engine.experiments.job import run_job; "
            f"r = run_job({TINY.to_dict()!r}); assert r['error'] is None, r['error']; "
            "print(json.dumps([r['kernels'], "
            "sorted(m for m in sys.modules if m.startswith('engine'))]))")
    kernels, used = json.loads(_python(code, _bare_env()))
    assert set(used) - NOT_NUMBERS <= set(TRAINING_MODULES), set(used) - set(TRAINING_MODULES)
    if ON_X86:
        assert kernels.endswith("aten=AVX2 mkl=AVX2")


def test_a_job_records_the_kernels_it_ran_on_and_its_fingerprint() -> None:
    res = run_job(TINY.to_dict())
    assert res["error"] is None
    assert res["kernels"] == kernels_in_use()
    if ON_X86:
        assert res["kernels"].endswith("aten=AVX2 mkl=AVX2")
    assert res["fingerprint"] == job_fingerprint(TINY.to_dict(), "cpu")


@pytest.mark.skipif(not ON_X86, reason="the pin is for x86 CPUs")
def test_torch_that_already_ran_is_reported_not_hidden() -> None:
    """An operation before engine's import decided torch's kernels: too late to pin, and said."""
    code = ("import warnings, torch; torch.ones(2).exp(); "
            "cap = str(torch.backends.cpu.get_cpu_capability()); "
            "warnings.simplefilter('always'); "
            "w = warnings.catch_warnings(record=True); got = w.__enter__(); import engine; "
            "print(cap, any('already runs' in str(x.message) for x in got))")
    cap, warned = _python(code, _bare_env()).split()
    assert warned == str(cap != "AVX2")


def test_the_fingerprint_changes_with_anything_that_decides_the_numbers(monkeypatch) -> None:
    cfg = TINY.to_dict()
    base = job_fingerprint(cfg, "cpu")
    assert base == job_fingerprint(dict(cfg), "cpu")  # deterministic
    assert job_fingerprint({**cfg, "seed": 1}, "cpu") != base
    assert job_fingerprint(cfg, "cuda:0") != base
    assert job_fingerprint(cfg, "cpu", kernels="x86_64 aten=AVX512 mkl=auto") != base
    monkeypatch.setattr(fingerprint, "code_hash", lambda: "another version")
    assert job_fingerprint(cfg, "cpu") != base
    import torch

    monkeypatch.undo()
    monkeypatch.setattr(torch, "__version__", "2.0.0")
    assert job_fingerprint(cfg, "cpu") != base


def test_the_code_hash_reads_the_training_sources(monkeypatch, tmp_path) -> None:
    """A change to any training module's source changes the hash."""
    import copy as copy_module
    import importlib.util

    fingerprint.code_hash.cache_clear()
    before = fingerprint.code_hash()
    origin = importlib.util.find_spec("engine.training.model").origin
    copy = tmp_path / "model.py"
    copy.write_bytes(Path(origin).read_bytes() + b"\n# changed\n")
    real = importlib.util.find_spec

    def find(name, *a, **kw):
        spec = real(name, *a, **kw)
        if name == "engine.training.model":
            spec = copy_module.copy(spec)
            spec.origin = str(copy)
        return spec

    monkeypatch.setattr(importlib.util, "find_spec", find)
    fingerprint.code_hash.cache_clear()
    try:
        assert fingerprint.code_hash() != before
    finally:
        monkeypatch.undo()
        fingerprint.code_hash.cache_clear()
    assert fingerprint.code_hash() == before


def test_the_fingerprint_is_the_documented_hash_written_out_by_hand(monkeypatch) -> None:
    """Job files in the claims' cache are keyed on this exact text: the first 32 hex digits of
    SHA-256 over compact JSON with sorted keys (config, code, torch, device, kernels). A change
    of format (a key renamed, spaces, another order or length) orphans every cached job."""
    import hashlib

    import torch

    import engine.cpu_kernels

    monkeypatch.setattr(fingerprint, "code_hash", lambda: "C0DE")
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    monkeypatch.setattr(engine.cpu_kernels, "kernels_in_use", lambda: "here aten=X")

    def expected(device: str, kernels: str) -> str:
        text = ('{"code":"C0DE","config":{"a":1,"b":[2,3]},"device":"' + device
                + '","kernels":"' + kernels + '","torch":"9.9.9"}')
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    cfg = {"b": [2, 3], "a": 1}  # keys out of order: sorted in the text
    assert job_fingerprint(cfg, "cuda:0", "there aten=Y") == expected("cuda:0", "there aten=Y")
    assert job_fingerprint(cfg) == expected("cpu", "here aten=X")  # defaults: here, on the CPU
    assert job_fingerprint(cfg, kernels="") == expected("cpu", "")  # given, even if empty
    assert len(job_fingerprint(cfg)) == 32


def test_the_code_hash_is_names_and_bytes_of_the_training_modules_in_order() -> None:
    """SHA-256 over ``name NUL source NUL`` of each TRAINING_MODULES entry, in that order."""
    import hashlib
    import importlib.util

    h = hashlib.sha256()
    for name in TRAINING_MODULES:
        h.update(name.encode() + b"\0" + Path(importlib.util.find_spec(name).origin).read_bytes()
                 + b"\0")
    fingerprint.code_hash.cache_clear()
    assert fingerprint.code_hash() == h.hexdigest()
    assert "engine.training.trainer" in TRAINING_MODULES and "engine.rules" in TRAINING_MODULES
