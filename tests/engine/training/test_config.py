"""Training parameters: validation names the field; presets are valid data; no torch needed."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.training.config import FIELD_HELP, TRAINING_RULES, TrainingConfig
from engine.training.presets import DEFAULT_PRESET, load_presets, preset

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("changes,field", [
    ({"task": "copy"}, "task"),
    ({"heads": 3}, "heads"),
    ({"d_model": 0}, "d_model"),
    ({"layers": 5}, "layers"),
    ({"scalings": ()}, "scalings"),
    ({"scalings": ("sqrt", "sqrt")}, "scalings"),
    ({"scalings": ("sqrt", "sqrt3")}, "scalings"),
    ({"lr": 0.0}, "lr"),
    ({"items_min": 8, "items_max": 4}, "items_max"),
    ({"task": "recall", "pairs": 20, "classes": 16}, "pairs"),
    ({"optimizer": "lbfgs"}, "optimizer"),
    ({"saturation_threshold": 1.0}, "saturation_threshold"),
    ({"mlp": "yes"}, "mlp"),
    ({"warmup": -1}, "warmup"),
    ({"decay": "linear"}, "decay"),
    ({"lr_floor": 1.5}, "lr_floor"),
    ({"weight_decay": -0.1}, "weight_decay"),
    ({"grad_clip": float("nan")}, "grad_clip"),
    ({"heads": 64, "d_model": 64, "steps": 100_000, "log_every": 1}, "hist_bins"),
])
def test_invalid_values_name_the_field(changes, field):
    with pytest.raises(ConfigError) as exc:
        TrainingConfig(**changes)
    assert exc.value.field == field


def test_derived_values_and_round_trip():
    cfg = TrainingConfig(d_model=64, heads=4, steps=25, log_every=10)
    assert cfg.head_dim == 16 and cfg.replace(d_k=40).head_dim == 40
    assert cfg.log_steps == (0, 10, 20, 25)
    assert TrainingConfig(task="recall", pairs=5).seq_len == 11
    assert TrainingConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError) as exc:
        TrainingConfig.from_dict({"d_modle": 3})
    assert exc.value.field == "d_modle"


def test_rule_names_extend_the_simulator_and_every_field_is_documented():
    from engine.config import RULES

    assert TRAINING_RULES[: len(RULES)] == RULES
    assert TRAINING_RULES[len(RULES):] == ("sqrt_twice", "scale_after_softmax", "qknorm_gain",
                                           "qkclip")
    import dataclasses

    assert {f.name for f in dataclasses.fields(TrainingConfig)} == set(FIELD_HELP)


def test_presets_are_valid_and_demo_is_the_default():
    presets = load_presets()
    assert next(iter(presets)) == DEFAULT_PRESET == "demo"
    assert {"demo", "small_dk", "qknorm_cosine", "bugs", "recall"} <= set(presets)
    demo = preset("demo").config
    assert set(demo.scalings) == {"none", "sqrt", "dk"} and demo.head_dim >= 128
    assert preset("small_dk").config.head_dim <= 8
    assert {"qknorm", "cosine"} <= set(preset("qknorm_cosine").config.scalings)
    assert {"sqrt_twice", "scale_after_softmax"} <= set(preset("bugs").config.scalings)
    assert preset("recall").config.task == "recall"
    with pytest.raises(ConfigError):
        preset("nope")


def test_config_and_presets_import_no_torch():
    code = ("import sys\nimport engine.training.config, engine.training.presets, "
            "engine.training.observe\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_from_dict_is_the_shared_helper_lists_become_tuples():
    from engine.validate import config_from_dict

    cfg = TrainingConfig.from_dict({"scalings": ["sqrt", "qknorm"], "d_model": 64, "heads": 2})
    assert cfg.scalings == ("sqrt", "qknorm") and cfg.head_dim == 32
    assert config_from_dict(TrainingConfig, {"scalings": "dk"}).scalings == ("dk",)
    with pytest.raises(ConfigError) as exc:
        config_from_dict(TrainingConfig, ["d_model", 3])
    assert exc.value.field == "config"


@pytest.mark.parametrize("changes,field", [
    ({"d_model": 4096}, "d_model"),  # 3 rules x 67M parameters
    ({"d_model": 512, "heads": 64, "d_k": 4096}, "d_model"),
    ({"batch": 65_536}, "batch"),
    ({"items_max": 1024}, "batch"),
    ({"probe_size": 4096, "items_max": 200, "batch": 1}, "probe_size"),
])
def test_configs_that_would_exhaust_memory_are_refused_by_name(changes, field):
    with pytest.raises(ConfigError) as exc:
        TrainingConfig(**changes)
    assert exc.value.field == field and "memory" in exc.value.message


def test_the_size_guards_leave_the_presets_and_one_wide_model_alone():
    for p in load_presets().values():
        assert p.config.n_params * len(p.config.scalings) < 10_000_000
    TrainingConfig(d_model=4096, scalings=("sqrt",))  # one rule at the widest d_model still fits


def test_lr_schedule_warmup_then_cosine_to_the_floor():
    cfg = TrainingConfig(steps=110, warmup=10, decay="cosine", lr_floor=0.1)
    assert cfg.lr_factor(0) == pytest.approx(0.1)  # update 1 of 10: lr / 10
    assert cfg.lr_factor(4) == pytest.approx(0.5)
    assert cfg.lr_factor(9) == pytest.approx(1.0)
    assert cfg.lr_factor(10) == pytest.approx(1.0)  # cosine starts at lr ...
    assert cfg.lr_factor(60) == pytest.approx(0.1 + 0.9 * 0.5)  # ... halfway: mid-point ...
    assert cfg.lr_factor(110) == pytest.approx(0.1)  # ... and ends at lr x lr_floor
    factors = [cfg.lr_factor(s) for s in range(10, 111)]
    assert all(a >= b for a, b in itertools.pairwise(factors))


def test_no_schedule_is_exactly_one():
    cfg = TrainingConfig()
    assert {cfg.lr_factor(s) for s in range(cfg.steps)} == {1.0}
    assert TrainingConfig(warmup=4).lr_factor(100) == 1.0
