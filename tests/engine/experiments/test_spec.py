"""The grid of an experiment: product of the axes, validation before anything runs, round trip."""

from __future__ import annotations

import json

import pytest

from engine.errors import ConfigError
from engine.experiments.builtin import builtin, load_builtins
from engine.experiments.spec import (
    JOBS_MAX,
    Axis,
    ExperimentSpec,
    FigureSpec,
    VerdictSpec,
    axis_fields,
    parse_value,
)
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


# --- every refusal with its field and message, the defaults, muP's base width (no training) ---

def _refusal(make) -> tuple[str, str]:
    with pytest.raises(ConfigError) as exc:
        make()
    return exc.value.field, exc.value.message


def test_a_grid_without_axes_is_one_job_keyed_base():
    (job,) = ExperimentSpec("one", BASE).jobs()
    assert (job.index, job.key, job.values) == (0, "base", {})
    assert ExperimentSpec("g", BASE, (Axis("seed", (3,)),)).jobs()[0].key == "seed=3"


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("1", True), ("yes", True), ("YES", True), (" On ", True),
    ("false", False), ("0", False), ("no", False), ("NO", False), ("Off", False)])
def test_a_switch_axis_reads_the_usual_spellings(text, value):
    assert parse_value("mlp", text) is value


def test_parse_value_refuses_what_is_not_its_fields_type():
    assert parse_value("seed", " 3.0 ") == 3 and isinstance(parse_value("seed", "3.0"), int)
    assert parse_value("lr", "1e-3") == 1e-3 and parse_value("optimizer", " sgd ") == "sgd"
    assert _refusal(lambda: parse_value("mlp", "maybe")) == ("axis", "mlp=maybe: not a valid bool")
    assert _refusal(lambda: parse_value("seed", "3.5")) == ("axis", "seed=3.5: not a valid int")
    assert _refusal(lambda: parse_value("lr", "fast")) == ("axis", "lr=fast: not a valid float")


def test_an_axis_of_one_bare_value_and_a_list_are_kept_as_tuples():
    assert Axis("lr", 0.1).values == (0.1,)
    assert Axis("optimizer", "adam").values == ("adam",)  # not ("a", "d", "a", "m")
    assert Axis("seed", 4).values == (4,)
    assert Axis("seed", [0, 1]).values == (0, 1)


def test_the_axis_refusals_name_the_field_and_what_is_wrong():
    field, message = _refusal(lambda: Axis("bogus", (1,)))
    assert field == "axis"
    assert message.startswith("'bogus' is not a field that can vary (one of task, items_min, ")
    assert ", d_model, heads, d_k, layers, " in message and message.endswith(", eval_every)")
    assert _refusal(lambda: Axis("lr", ())) == ("axis", "lr: needs at least one value")
    assert _refusal(lambda: Axis("seed", (1, 2, 1))) == ("axis",
                                                          "seed: lists a value twice: '1, 2, 1'")
    # the values are quoted up to 80 characters, their quotes included: 78 characters of
    # values are kept whole, 79 are cut after the 79th and the quoted length (81) said
    whole, cut = (*range(1, 21), 100, 10), (*range(22), 1)
    assert [len(", ".join(map(str, v))) for v in (whole, cut)] == [78, 79]
    assert _refusal(lambda: Axis("seed", whole))[1] == (
        "seed: lists a value twice: '" + ", ".join(map(str, whole)) + "'")
    assert _refusal(lambda: Axis("seed", cut))[1] == (
        "seed: lists a value twice: '" + ", ".join(map(str, cut)) + "… (81 characters)")


def test_axis_parse_refusals_and_values_that_hold_an_equals_sign():
    assert _refusal(lambda: Axis.parse("lr")) == ("axis", "'lr': expected FIELD=V1,V2,...")
    assert _refusal(lambda: Axis.parse("lr=")) == ("axis", "'lr=': expected FIELD=V1,V2,...")
    assert _refusal(lambda: Axis.parse("lr=  ")) == ("axis", "'lr=  ': expected FIELD=V1,V2,...")
    assert _refusal(lambda: Axis.parse("lr= ,")) == ("axis", "lr: needs at least one value")
    assert _refusal(lambda: Axis.parse("bogus=1"))[1].startswith(
        "'bogus' is not a field that can vary (one of task,")
    assert Axis.parse("optimizer=x=y").values == ("x=y",)  # split at the first "="


def test_the_spec_refusals_name_their_field():
    axes = (Axis("lr", (1e-3, 1e-2)), Axis("seed", (0, 1)))
    assert _refusal(lambda: ExperimentSpec("", BASE)) == ("name", "an experiment needs a name")
    assert _refusal(lambda: ExperimentSpec("  ", BASE)) == ("name", "an experiment needs a name")
    assert _refusal(lambda: ExperimentSpec(5, BASE)) == ("name", "an experiment needs a name")
    assert _refusal(lambda: ExperimentSpec("x", BASE.to_dict())) == ("base",
                                                                     "must be a TrainingConfig")
    assert _refusal(lambda: ExperimentSpec("x", BASE, (Axis("seed", (0,)), Axis("lr", (0.1,)),
                                                       Axis("seed", (1,))))) == (
        "axis", "an axis is given twice: seed, lr, seed")
    assert _refusal(lambda: ExperimentSpec("x", BASE, axes, target=0)) == (
        "target", "must be in (0, 1], got 0")
    assert _refusal(lambda: ExperimentSpec("x", BASE, axes, target=1.01)) == (
        "target", "must be in (0, 1], got 1.01")
    fig = FigureSpec("vs_axis", "final_loss", "loss", x="lr", panel="width_axis")
    assert _refusal(lambda: ExperimentSpec("x", BASE, axes, figures=(fig,))) == (
        "figures", "'loss': panel='width_axis' is not an axis")
    fig = FigureSpec("optimum", "final_loss", "best", x="seed", over="d_model")
    assert _refusal(lambda: ExperimentSpec("x", BASE, axes, figures=(fig,))) == (
        "figures", "'best': over='d_model' is not an axis")
    verdict = VerdictSpec("transfer", "final_loss", over="lr", width="d_model")
    assert _refusal(lambda: ExperimentSpec("x", BASE, axes, verdict=verdict)) == (
        "verdict", "width='d_model' is not an axis")
    verdict = VerdictSpec("ends_of_axis", over="heads")
    assert _refusal(lambda: ExperimentSpec("x", BASE, axes, verdict=verdict)) == (
        "verdict", "over='heads' is not an axis")


def test_a_spec_keeps_tuples_and_a_float_target():
    spec = ExperimentSpec("x", BASE, [Axis("seed", (0, 1))],
                          figures=[FigureSpec("by_rule", "success", "s")], target=1)
    assert isinstance(spec.axes, tuple) and isinstance(spec.figures, tuple)
    assert spec.target == 1.0 and isinstance(spec.target, float)
    assert ExperimentSpec("x", BASE).target == 0.9


def test_a_grid_of_jobs_max_jobs_runs_and_one_more_is_refused(monkeypatch):
    from engine.experiments import spec as spec_mod

    monkeypatch.setattr(spec_mod, "JOBS_MAX", 6)
    assert len(ExperimentSpec("x", BASE, (Axis("lr", (1e-3, 1e-2)),
                                          Axis("seed", (0, 1, 2)))).jobs()) == 6
    assert _refusal(lambda: ExperimentSpec("x", BASE, (Axis("lr", (1e-3, 1e-2)),
                                                       Axis("seed", (0, 1, 2, 3))))) == (
        "axis", "the grid has 8 jobs, more than 6")
    monkeypatch.setattr(spec_mod, "JOBS_MAX", 1500)  # refused before a job is built
    assert _refusal(lambda: ExperimentSpec("x", BASE, (Axis("lr", tuple(range(1, 41))),
                                                       Axis("seed", tuple(range(40)))))) == (
        "axis", "the grid has 1,600 jobs, more than 1,500")
    assert spec_mod.JOBS_MAX == 1500 and JOBS_MAX == 100_000


def test_lengths_are_needed_by_a_length_figure_or_verdict_and_only_then():
    fig = FigureSpec("vs_length", "accuracy", "acc")
    needs = ("eval_lengths", "a vs_length figure or a longest_length verdict needs evaluation "
                             "lengths in the base config")
    assert _refusal(lambda: ExperimentSpec("x", BASE, figures=(fig,))) == needs
    assert _refusal(lambda: ExperimentSpec(
        "x", BASE, verdict=VerdictSpec("longest_length", "accuracy"))) == needs
    with_lengths = BASE.replace(eval_lengths=(4, 6))
    spec = ExperimentSpec("x", with_lengths, figures=(fig,),
                          verdict=VerdictSpec("longest_length", "entropy_norm"))
    assert spec.base.eval_lengths == (4, 6)
    assert ExperimentSpec("x", BASE, figures=(FigureSpec("by_rule", "success", "s"),)).figures


def test_an_axis_value_whose_check_raises_a_type_error_is_reported_as_the_wrong_type():
    """No field's check raises TypeError today; a base whose ``replace`` does (e.g. a future
    check comparing a value of another type) is still reported as a refusal of that value."""
    class Picky(TrainingConfig):
        def replace(self, **changes):
            if changes.get("lr") == 0.5:
                raise TypeError("'<' not supported")
            return super().replace(**changes)

    base = Picky(**{f: getattr(BASE, f) for f in BASE.to_dict()})
    assert _refusal(lambda: ExperimentSpec("x", base, (Axis("lr", (0.1, 0.5)),))) == (
        "axis", "lr=0.5: wrong type")


@pytest.mark.parametrize(("make", "message"), [
    (lambda: FigureSpec("pie", "success", "t"),
     "must be one of by_rule, vs_axis, vs_step, vs_length, optimum, lr_sensitivity; got 'pie'"),
    (lambda: FigureSpec("vs_axis", "success", "t"), "'t': a vs_axis figure needs x (an axis)"),
    (lambda: FigureSpec("optimum", "final_loss", "o"), "'o': a optimum figure needs x (an axis)"),
    (lambda: FigureSpec("lr_sensitivity", "final_loss", "s"),
     "'s': a lr_sensitivity figure needs x (an axis)"),
    (lambda: FigureSpec("optimum", "final_loss", "o", x="d_model"),
     "'o': an optimum figure needs over (an axis)"),
    (lambda: FigureSpec("by_rule", "success", "b", panel="lr"),
     "'b': panel is for vs_axis figures"),
    (lambda: FigureSpec("vs_length", "loss", "L"),
     "must be one of accuracy, entropy_norm; got 'loss'"),
])
def test_figure_refusals(make, message):
    assert _refusal(make) == ("figures", message)


def test_figures_that_need_nothing_more_are_accepted():
    assert FigureSpec("by_rule", "success", "t").x == ""
    assert FigureSpec("vs_step", "loss", "t").panel == ""  # x optional: one curve per rule
    assert FigureSpec("vs_axis", "success", "t", x="lr", panel="seed").panel == "seed"
    assert FigureSpec("optimum", "final_loss", "o", x="d_model", over="lr").over == "lr"
    assert FigureSpec("vs_length", "entropy_norm", "L").y == "entropy_norm"


@pytest.mark.parametrize(("make", "message"), [
    (lambda: VerdictSpec("vote"), "must be one of by_rule, ends_of_axis, longest_length, "
                                  "transfer, lr_sensitivity; got 'vote'"),
    (lambda: VerdictSpec("transfer", "final_loss", over="lr"),
     "transfer needs over (e.g. lr) and width (an axis)"),
    (lambda: VerdictSpec("transfer", "final_loss", width="d_model"),
     "transfer needs over (e.g. lr) and width (an axis)"),
    (lambda: VerdictSpec("ends_of_axis"), "ends_of_axis needs over (an axis)"),
    (lambda: VerdictSpec("lr_sensitivity", "final_loss"), "lr_sensitivity needs over (an axis)"),
    (lambda: VerdictSpec("longest_length", "success"),
     "must be one of accuracy, entropy_norm; got 'success'"),
    (lambda: VerdictSpec(at=[("lr", 1, 2)]), "at must map axes to one value each, got "
                                             "[('lr', 1, 2)]"),
])
def test_verdict_refusals(make, message):
    assert _refusal(make) == ("verdict", message)


def test_verdicts_that_need_nothing_more_are_accepted():
    assert VerdictSpec("transfer", "final_loss", over="lr", width="d_model").width == "d_model"
    assert VerdictSpec("longest_length", "accuracy").metric == "accuracy"
    assert VerdictSpec(at={"lr": 0.1, "seed": 2}).at == (("lr", 0.1), ("seed", 2))
    assert VerdictSpec(at=[["lr", 0.1]]).at == (("lr", 0.1),)


MUP = BASE.replace(param="mup")


def test_mup_jobs_take_the_narrowest_width_as_base_width_where_the_grid_leaves_it_open():
    spec = ExperimentSpec("m", MUP, (Axis("d_model", (64, 32, 128)), Axis("seed", (0,))))
    assert [j.config.base_width for j in spec.jobs()] == [32, 32, 32]
    # the width axis is d_k: its narrowest value, not d_model's
    spec = ExperimentSpec("m", MUP.replace(width_axis="d_k"),
                          (Axis("d_model", (32, 64)), Axis("d_k", (16, 8))))
    assert {j.config.base_width for j in spec.jobs()} == {8}
    # the width axis given as an axis value per job
    spec = ExperimentSpec("m", MUP.replace(d_k=8), (Axis("width_axis", ("d_model", "d_k")),
                                                     Axis("d_k", (16, 8)),
                                                     Axis("d_model", (64, 32))))
    assert {(j.values["width_axis"], j.config.base_width) for j in spec.jobs()} == {
        ("d_model", 32), ("d_k", 8)}


def test_the_base_width_stays_as_given_for_sp_jobs_a_set_width_or_no_width_axis():
    spec = ExperimentSpec("m", BASE, (Axis("param", ("sp", "mup")), Axis("d_model", (64, 32))))
    assert {(j.values["param"], j.config.base_width) for j in spec.jobs()} == {
        ("sp", 0), ("mup", 32)}
    spec = ExperimentSpec("m", MUP.replace(base_width=16), (Axis("d_model", (64, 32)),))
    assert {j.config.base_width for j in spec.jobs()} == {16}
    spec = ExperimentSpec("m", MUP, (Axis("base_width", (16, 0)), Axis("d_model", (64, 32))))
    assert [j.config.base_width for j in spec.jobs()] == [16, 16, 0, 0]
    spec = ExperimentSpec("m", MUP, (Axis("seed", (0, 1)),))  # no width axis: its own width
    assert {j.config.base_width for j in spec.jobs()} == {0}
    spec = ExperimentSpec("m", BASE.replace(param="mup", width_axis="d_k"),
                          (Axis("d_model", (64, 32)),))  # the width axis is not in the grid
    assert {j.config.base_width for j in spec.jobs()} == {0}


# --- from_dict: the structure, the sizes, the preset, the defaults -------------------------

def _from(data) -> tuple[str, str]:
    return _refusal(lambda: ExperimentSpec.from_dict(data))


def test_from_dict_fills_the_defaults_and_reads_a_bare_axis_value():
    spec = ExperimentSpec.from_dict({"axes": {"seed": 3, "lr": [0.1, 0.2]}})
    assert (spec.name, spec.title, spec.description, spec.target) == ("experiment", "", "", 0.9)
    assert spec.axes == (Axis("seed", (3,)), Axis("lr", (0.1, 0.2)))
    assert spec.base == TrainingConfig() and spec.figures == ()
    assert spec.verdict == VerdictSpec()


def test_from_dict_starts_from_a_preset_and_applies_the_base_on_top():
    from engine.training.presets import preset

    small = preset("small_dk").config
    spec = ExperimentSpec.from_dict({"name": "p", "preset": "small_dk", "base": {"lr": 0.0123}})
    assert spec.base == small.replace(lr=0.0123)
    assert ExperimentSpec.from_dict({"preset": "small_dk"}).base == small
    assert small.lr != 0.0123 and small.replace(lr=0.0123) != TrainingConfig(lr=0.0123)


def test_from_dict_refusals_name_the_path():
    assert _from([1]) == ("experiment", "must be a mapping, got list")
    assert _from({"base": {"lr": -1}}) == ("base.lr", "must be in (0, 100], got -1")
    assert _from({"nme": "x"}) == ("nme", "unknown experiment key (known: axes, base, "
                                          "description, figures, name, preset, target, title, "
                                          "verdict)")
    assert _from({"figures": [{"knd": 1}]}) == (
        "figures[0].knd", "unknown key (known: kind, over, panel, title, x, x_log, y, y_label, "
                          "y_log)")
    assert _from({"verdict": {"atx": 1}}) == (
        "verdict.atx", "unknown key (known: at, kind, metric, over, width)")
    assert _from({"axes": {"seed": {}}}) == ("axes.seed", "must be a list of values, got an "
                                                          "empty object")
    assert _from({"axes": {"seed": [{}]}}) == (
        "axes.seed[0]", "must be a number, a string or true/false, got an empty object")
    assert _from({"verdict": {"at": 5}}) == ("verdict.at", "must be an object of axis: value, "
                                                           "got 5")
    assert _from({"verdict": {"at": [5]}}) == ("verdict.at[0]",
                                               "must be an [axis, value] pair, got 5")
    assert _from({"verdict": {"at": [["seed"]]}}) == ("verdict.at[0]",
                                                      "needs at least 2 item(s), got 1")
    assert _from({"verdict": {"at": [["seed", 0, 1]]}}) == ("verdict.at[0]",
                                                            "a list of 3 items, more than 2")


@pytest.mark.parametrize(("key", "limit"), [("name", 200), ("title", 1000),
                                            ("description", 20_000), ("preset", 200)])
def test_the_texts_of_a_spec_have_their_limits(key, limit):
    assert _from({key: "x" * (limit + 1)}) == (
        key, f"a string of {limit + 1:,} characters, more than {limit:,}")
    if key != "preset":
        assert getattr(ExperimentSpec.from_dict({key: "x" * limit}), key) == "x" * limit
    else:  # at the limit, the name is read as a preset's (and refused as none of them)
        assert _from({key: "x" * limit})[0] == "preset"


def test_the_sizes_of_a_spec_have_their_limits():
    """64 axes, 100 figures, 64 pairs in ``at``, 200 characters in a value, JOBS_MAX values in
    one axis: one more of each is refused by the structure check, naming it."""
    assert _from({"axes": {f"a{i}": [1] for i in range(65)}}) == (
        "axes", "an object of 65 keys, more than 64")
    assert _from({"axes": {f"a{i}": [1] for i in range(64)}})[0] == "axis"  # past the check
    fig = {"kind": "by_rule", "y": "success", "title": "t"}
    assert _from({"figures": [fig] * 101}) == ("figures", "a list of 101 items, more than 100")
    assert len(ExperimentSpec.from_dict({"figures": [fig] * 100}).figures) == 100
    assert _from({"verdict": {"at": {f"a{i}": 1 for i in range(65)}}}) == (
        "verdict.at", "must be an object of axis: value, got an object of 65 keys")
    assert _from({"verdict": {"at": [["a", 1]] * 65}}) == (
        "verdict.at", "must be an object of axis: value, got a list of 65 items")
    assert VerdictSpec(**{"at": {f"a{i}": 1 for i in range(64)}}).at[63] == ("a63", 1)
    assert _from({"verdict": {"at": {f"a{i}": 1 for i in range(64)}}})[0] == "verdict"
    assert _from({"verdict": {"at": [["a", 1]] * 64}})[0] == "verdict"
    field, message = _from({"axes": {"optimizer": ["x" * 201]}})
    assert field == "axes.optimizer[0]" and message.startswith(
        "must be a number, a string or true/false, got 'xxxx") and message.endswith(
        "(201 characters)")
    assert _from({"axes": {"optimizer": ["x" * 200]}})[0] == "axis"  # past the check
    assert _from({"axes": {"seed": list(range(JOBS_MAX + 1))}}) == (
        "axes.seed", f"must be a list of values, got a list of {JOBS_MAX + 1:,} items")
    # more values than a plain list's default limit (1,000) pass the structure check: refused
    # only by the verdict that comes next, before a job is built
    assert _from({"axes": {"seed": list(range(1001))},
                  "verdict": {"kind": "ends_of_axis", "over": "lr"}}) == (
        "verdict", "over='lr' is not an axis")


def test_a_verdict_at_any_value_of_its_axis_is_accepted_first_and_last_included():
    axes = (Axis("lr", (1e-3, 3e-3, 1e-2)), Axis("seed", (0, 1)))
    for lr in (1e-3, 3e-3, 1e-2):
        spec = ExperimentSpec("t", BASE, axes, verdict=VerdictSpec("by_rule", at={"lr": lr}))
        assert spec.verdict.at == (("lr", lr),)
    assert _refusal(lambda: ExperimentSpec("t", BASE, axes, verdict=VerdictSpec(
        "by_rule", at={"lr": 2e-3}))) == (
        "verdict", "at: lr=0.002 is not one of the axis's values [0.001, 0.003, 0.01]")
