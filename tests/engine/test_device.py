"""One device resolution for the simulation (backend + device) and for training."""

from __future__ import annotations

import pytest

from engine import device as dev
from engine.config import SimulationConfig
from engine.errors import ConfigError
from engine.sampling import resolve_backend
from engine.training.config import TrainingConfig
from engine.training.trainer import resolve_device as training_device


@pytest.mark.parametrize("gpu", [False, True])
def test_simulation_and_training_resolve_alike(monkeypatch, gpu) -> None:
    monkeypatch.setattr(dev, "cuda_available", lambda: gpu)
    for requested in ("auto", "cpu", "cuda"):
        if requested == "cuda" and not gpu:
            with pytest.raises(ConfigError) as e1:
                training_device(TrainingConfig(device="cuda"))
            with pytest.raises(ConfigError) as e2:
                resolve_backend(SimulationConfig(backend="torch", device="cuda"))
            assert e1.value.field == e2.value.field == "device"
            continue
        want = "cuda" if gpu and requested != "cpu" else "cpu"
        assert dev.resolve_device(requested) == want
        assert training_device(TrainingConfig(device=requested)) == want
        assert resolve_backend(SimulationConfig(backend="torch", device=requested)) == ("torch", want)
        auto = resolve_backend(SimulationConfig(backend="auto", device=requested))
        assert auto == (("torch", "cuda") if want == "cuda" else ("numpy", "cpu"))
    assert resolve_backend(SimulationConfig(backend="numpy", device="cpu")) == ("numpy", "cpu")


def test_unknown_device_names_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        dev.resolve_device("tpu")
    assert err.value.field == "device"
