"""The grid of an experiment: product of the axes, validation before anything runs, round trip."""

from __future__ import annotations

import json

import pytest

from engine.errors import ConfigError
from engine.experiments.builtin import builtin, load_builtins
from engine.experiments.spec import Axis, ExperimentSpec, FigureSpec, VerdictSpec, axis_fields
from engine.training.config import TrainingConfig

BASE = TrainingConfig(d_model=32, heads=2, items_max=6, scalings=("none", "sqrt"), steps=6,
                      log_every=3, batch=8, probe_size=4, device="cpu")


def test_jobs_are_the_product_of_the_axes_last_axis_fastest():
    spec = ExperimentSpec("g", BASE, (Axis("lr", (1e-3, 1e-2)), Axis("seed", (0, 1, 2))))
    jobs = spec.jobs()
    assert [j.index for j in jobs] == list(range(6))
    assert [(j.values["lr"], j.values["seed"]) for j in jobs] == [
        (1e-3, 0), (1e-3, 1), (1e-3, 2), (1e-2, 0), (1e-2, 1), (1e-2, 2)]
    assert jobs[4].config == BASE.replace(lr=1e-2, seed=1)
    assert len({j.key for j in jobs}) == 6
    assert ExperimentSpec("one", BASE).jobs()[0].config == BASE


def test_the_required_fields_can_be_axes():
    names = set(axis_fields())
    assert {"lr", "seed", "d_model", "d_k", "heads", "qk_init", "steps", "batch", "layers",
            "warmup", "weight_decay", "decay", "optimizer", "task"} <= names
    assert "scalings" not in names and "device" not in names


@pytest.mark.parametrize("axes,needle", [
    ((Axis("lr", (1e-3, -1.0)),), "lr=-1.0"),
    ((Axis("heads", (1, 3)),), "heads=3"),
    ((Axis("seed", (0, 1.5)),), "seed=1.5"),
    ((Axis("optimizer", ("adam", "lbfgs")),), "optimizer='lbfgs'"),
    ((Axis("d_model", (32, 30)), Axis("heads", (2, 4))), "d_model=30,heads=4"),  # fine alone, not together
])
def test_an_invalid_value_is_refused_naming_the_axis_and_the_value(axes, needle):
    with pytest.raises(ConfigError) as exc:
        ExperimentSpec("bad", BASE, axes)
    assert exc.value.field == "axis" and needle in exc.value.message


@pytest.mark.parametrize("make,needle", [
    (lambda: Axis("bogus", (1,)), "bogus"),
    (lambda: Axis("scalings", ("sqrt",)), "scalings"),
    (lambda: Axis("lr", ()), "lr"),
    (lambda: Axis("seed", (1, 1)), "twice"),
    (lambda: Axis.parse("lr"), "FIELD="),
    (lambda: Axis.parse("seed=a,b"), "seed=a"),
    (lambda: ExperimentSpec("x", BASE, (Axis("seed", (0,)), Axis("seed", (1,)))), "twice"),
])
def test_bad_axes_are_refused(make, needle):
    with pytest.raises(ConfigError) as exc:
        make()
    assert exc.value.field == "axis" and needle in exc.value.message


def test_parse_types_the_values_as_their_field():
    assert Axis.parse("lr=1e-3,3e-2").values == (1e-3, 3e-2)
    assert Axis.parse("seed=0,1,2").values == (0, 1, 2)
    assert Axis.parse("mlp=true,false").values == (True, False)
    assert Axis.parse("optimizer=adam,sgd").values == ("adam", "sgd")
    assert Axis.parse("d-k=16,64").field == "d_k"


def test_to_dict_from_dict_rebuilds_the_same_jobs():
    spec = ExperimentSpec("rt", BASE, (Axis("lr", (1e-3, 1e-2)), Axis("seed", (0, 1))),
                          title="t", description="d", target=0.8,
                          figures=(FigureSpec("vs_axis", "final_loss", "loss", x="lr"),),
                          verdict=VerdictSpec("ends_of_axis", "success", "lr"))
    again = ExperimentSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec
    assert [(j.key, j.config) for j in again.jobs()] == [(j.key, j.config) for j in spec.jobs()]


def test_figure_and_verdict_refer_to_axes():
    with pytest.raises(ConfigError):
        ExperimentSpec("x", BASE, (Axis("seed", (0,)),),
                       figures=(FigureSpec("vs_axis", "final_loss", "t", x="lr"),))
    with pytest.raises(ConfigError):
        ExperimentSpec("x", BASE, (Axis("seed", (0,)),), verdict=VerdictSpec("ends_of_axis",
                                                                             "success", "lr"))


def test_builtin_experiments_are_valid_data():
    specs = load_builtins()
    assert list(specs)[:5] == ["seeds", "head_width", "learning_rate", "logit_control", "heads"]
    seeds = builtin("seeds")
    assert len(seeds.axes[0].values) >= 8 and seeds.base.head_dim == 256
    hw = builtin("head_width")
    assert min(hw.axes[0].values) == 16 and max(hw.axes[0].values) == 512 and hw.base.heads == 1
    lr = builtin("learning_rate")
    lrs = next(a.values for a in lr.axes if a.field == "lr")
    assert max(lrs) / min(lrs) >= 100 and set(lr.rules) == {"sqrt", "qknorm", "none"}
    assert lr.base.layers == 2 and lr.base.mlp and lr.base.d_model == 128 and lr.base.heads == 2
    heads = builtin("heads")
    assert next(a.values for a in heads.axes if a.field == "heads")[-1] == 16
    for spec in specs.values():
        assert spec.title and len(spec.description) > 100 and spec.figures
    with pytest.raises(ConfigError):
        builtin("nope")


@pytest.mark.parametrize("at, needle", [({"batch": 8}, "'batch' is not an axis"),
                                        ({"lr": 0.5}, "lr=0.5 is not one of"),
                                        ({"seed": 0}, "not an axis other than over"),
                                        (5, "at must map")])
def test_a_verdict_at_names_an_axis_and_one_of_its_values(at, needle):
    with pytest.raises(ConfigError) as exc:
        ExperimentSpec("t", BASE, (Axis("lr", (1e-3, 1e-2)), Axis("seed", (0, 1))),
                       verdict=VerdictSpec("ends_of_axis", "success", "seed", at=at))
    assert exc.value.field == "verdict" and needle in exc.value.message


def test_a_verdict_at_survives_the_json_round_trip():
    spec = builtin("warmup")
    assert spec.verdict.at == (("lr", 0.01),)
    assert ExperimentSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
