"""The coord check's settings, the training config of each point, the measurement of one tiny
model (checked against hooks of the test's own), the run's progress and cancel flag (points
stubbed), slopes.csv's row and the figures' titles and series. About 1 s (one tiny model)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")

import engine.training.coord_check as cc
from engine.errors import ConfigError
from engine.training.config import TrainingConfig

TINY = TrainingConfig(task="retrieval", d_model=16, heads=2, layers=2, mlp=True,
                      scalings=("sqrt",), batch=4, probe_size=4, items_min=1, items_max=4,
                      device="cpu")


def test_the_defaults_and_each_points_config():
    cfg = cc.CoordCheckConfig()
    assert (cfg.params, cfg.widths, cfg.width_axis, cfg.steps, cfg.seeds, cfg.lr, cfg.scaling,
            cfg.base_width) == (("sp", "mup"), (64, 128, 256, 512, 1024), "d_model", 3, 3, 0.01,
                                "", 0)
    base = cfg.base
    assert (base.task, base.d_model, base.heads, base.layers, base.mlp, base.scalings, base.batch,
            base.probe_size, base.device) == ("retrieval", 64, 2, 2, True, ("sqrt",), 16, 16, "cpu")
    cfg = cc.CoordCheckConfig(params="mup", widths=(64, 32), steps=2, lr=0.003, base=TINY)
    assert cfg.params == ("mup",) and cfg.widths == (32, 64)  # (sorted)
    t = cfg.point_config("mup", 64, 5)
    assert (t.param, t.width_axis, t.seed, t.lr, t.scalings, t.steps, t.warmup, t.decay,
            t.log_every, t.optimizer, t.base_width, t.d_model, t.d_k) == (
        "mup", "d_model", 5, 0.003, ("dk",), 2, 0, "none", 2, "adam", 32, 64, 0)
    assert cfg.points() == [("mup", 32, 0), ("mup", 32, 1), ("mup", 32, 2), ("mup", 64, 0),
                            ("mup", 64, 1), ("mup", 64, 2)]


def test_a_dk_axis_steps_zero_one_rule_and_a_base_width():
    cfg = cc.CoordCheckConfig(params=("sp", "mup"), widths=(8, 16), width_axis="d_k", steps=0,
                              seeds=1, scaling="none", base_width=16, base=TINY)
    t = cfg.point_config("sp", 8, 0)
    assert (t.d_model, t.d_k, t.steps, t.log_every, t.scalings, t.base_width) == (
        16, 8, 1, 1, ("none",), 16)
    assert cfg.rule("sp") == cfg.rule("mup") == "none"
    own = cc.CoordCheckConfig(widths=(8, 16), seeds=1, base=TINY)
    assert (own.rule("sp"), own.rule("mup")) == ("sqrt", "dk")


@pytest.mark.parametrize("kw, field, says", [
    (dict(params=()), "param", "needs one or more of sp, mup, each once"),
    (dict(params=("sp", "sp")), "param", "needs one or more of sp, mup, each once"),
    (dict(params=("xx",)), "param", None),
    (dict(widths=(16,)), "widths", "needs 2 to 16 different widths (a slope), got [16]"),
    (dict(widths=(16, 16)), "widths", "needs 2 to 16 different widths (a slope), got [16, 16]"),
    (dict(widths=tuple(range(16, 33))), "widths", None),
    (dict(widths=(0, 16)), "widths", None),
    (dict(steps=-1), "steps", None), (dict(steps=101), "steps", None),
    (dict(seeds=0), "seeds", None), (dict(seeds=101), "seeds", None),
    (dict(lr=0.0), "lr", None), (dict(lr=100.5), "lr", None),
    (dict(base_width=-1), "base_width", None),
    (dict(scaling="bad"), "scaling", None),
])
def test_bad_settings_are_refused_naming_the_field(kw, field, says):
    with pytest.raises(ConfigError) as err:
        cc.CoordCheckConfig(**{"base": TINY, "widths": (16, 32), **kw})
    assert err.value.field == field
    if says:
        assert err.value.message == says


def test_the_edges_of_the_settings_are_accepted():
    cfg = cc.CoordCheckConfig(widths=tuple(range(16, 48, 2)), steps=100, seeds=100, lr=100.0,
                              base=TINY)
    assert (len(cfg.widths), cfg.steps, cfg.seeds, cfg.lr) == (16, 100, 100, 100.0)
    assert cc.CoordCheckConfig(widths=(16, 32), steps=0, seeds=1, base=TINY).steps == 0


def test_a_width_whose_model_cannot_be_built_is_named():
    with pytest.raises(ConfigError) as err:  # 2 heads do not divide d_model 15
        cc.CoordCheckConfig(params=("sp",), widths=(16, 15), base=TINY)
    assert err.value.field == "widths"
    assert err.value.message.startswith("width 15 (sp): ")


def test_a_config_round_trips_through_a_dict():
    cfg = cc.CoordCheckConfig(params=("sp",), widths=(16, 32), steps=1, seeds=2, base=TINY)
    data = cfg.to_dict()
    assert (data["base"] == TINY.to_dict() and data["widths"] == [16, 32]) or \
        data["widths"] == (16, 32)
    back = cc.CoordCheckConfig.from_dict(data)
    assert back == cfg and isinstance(back.base, TrainingConfig)
    assert data["base"] == TINY.to_dict()  # (the dict given is not changed)
    direct = cc.CoordCheckConfig(params=("sp",), widths=(16, 32), base=TINY.to_dict())
    assert direct.base == TINY


def _mean_abs(t, mask=None) -> float:
    a = t.detach().double().abs()
    return float(a[mask.expand_as(a)].mean()) if mask is not None else float(a.mean())


def test_measure_is_the_mean_abs_of_each_layers_output():
    """Against forward hooks of the test's own on the same tiny model and batch: the first
    block's input, each attention and MLP output, the attention logits over the visible keys
    only, the readout's logits."""
    import torch

    from engine.training.model import AttentionCapture
    from engine.training.trainer import Trainer

    tr = Trainer(TINY, observe=False)
    model, batch = tr.runs[0].model, tr.probe
    model.train()
    got = cc.measure(model, batch)
    assert not model.training  # (eval: no dropout in what is measured)
    seen: dict[str, torch.Tensor] = {}
    hooks = [model.blocks[0].register_forward_pre_hook(
        lambda _m, a: seen.__setitem__("embed", a[0]))]
    for i, blk in enumerate(model.blocks):
        hooks.append(blk.attn.register_forward_hook(
            lambda _m, _a, y, i=i: seen.__setitem__(f"attn{i}", y)))
        hooks.append(blk.mlp.register_forward_hook(
            lambda _m, _a, y, i=i: seen.__setitem__(f"mlp{i}", y)))
    cap: list[AttentionCapture] = []
    with torch.no_grad():
        out = model(batch.inputs, batch.readout, batch.mask, cap)
    for h in hooks:
        h.remove()
    want = [("embed", "embedding", _mean_abs(seen["embed"])),
            ("blocks.0", "attention output", _mean_abs(seen["attn0"])),
            ("blocks.0", "MLP output", _mean_abs(seen["mlp0"])),
            ("blocks.1", "attention output", _mean_abs(seen["attn1"])),
            ("blocks.1", "MLP output", _mean_abs(seen["mlp1"])),
            ("blocks.0", "attention logits", _mean_abs(cap[0].logits, cap[0].mask)),
            ("blocks.1", "attention logits", _mean_abs(cap[1].logits, cap[1].mask)),
            ("head", "readout", _mean_abs(out))]
    assert [g[:2] for g in got] == [w[:2] for w in want]
    assert [g[2] for g in got] == pytest.approx([w[2] for w in want], rel=1e-12)
    masked = float(cap[0].logits.double().abs().mean())
    assert not cap[0].mask.all() and got[5][2] != pytest.approx(masked, rel=1e-6)
    # the hooks are gone: another forward pass records nothing more
    with torch.no_grad():
        model(batch.inputs, batch.readout, batch.mask, None)
    assert len(got) == 8 and all(len(m._forward_hooks) == 0 for m in model.modules())
    assert all(len(m._forward_pre_hooks) == 0 for m in model.modules())


def test_point_rows_measure_each_step_and_stop_at_a_cancel(monkeypatch):
    cfg = cc.CoordCheckConfig(params=("sp",), widths=(16, 32), steps=2, seeds=1, base=TINY)
    from engine.training.trainer import Trainer

    calls, observed = [], []
    monkeypatch.setattr(cc, "measure", lambda model, batch: calls.append((model, batch)) or [
        ("head", "readout", float(len(calls)))])
    real = Trainer.__init__

    def init(self, tcfg, observe=True, *args, **kw):
        observed.append(observe)
        real(self, tcfg, observe, *args, **kw)
    monkeypatch.setattr(Trainer, "__init__", init)
    rows = cc.point_rows(cfg, "sp", 32, 4)
    assert observed == [False]  # (no statistics: only the activations are measured)
    model, batch = calls[0]
    assert batch.inputs.shape[0] == TINY.probe_size and model.blocks[0].attn is not None
    assert rows == [{"param": "sp", "scaling": "sqrt", "width": 32, "seed": 4, "step": s,
                     "layer": "head", "kind": "readout", "mean_abs": float(s + 1)}
                    for s in range(3)]
    flags = iter([False, True])
    assert [r["step"] for r in cc.point_rows(cfg, "sp", 16, 0, lambda: next(flags))] == [0]


def test_point_rows_advance_once_between_measures(monkeypatch):
    from engine.training.trainer import Trainer

    cfg = cc.CoordCheckConfig(params=("sp",), widths=(16, 32), steps=2, seeds=1, base=TINY)
    log = []
    real = Trainer.advance
    monkeypatch.setattr(Trainer, "advance", lambda self, *a: log.append("step") or real(self, *a))
    monkeypatch.setattr(cc, "measure", lambda m, b: log.append("measure") or [])
    cc.point_rows(cfg, "sp", 16, 0)
    assert log == ["measure", "step", "measure", "step", "measure"]


def test_the_run_yields_after_each_point_and_stops_when_cancelled(monkeypatch):
    cfg = cc.CoordCheckConfig(params=("sp", "mup"), widths=(16, 32), steps=1, seeds=1, base=TINY)
    seen = []

    calls = []

    def rows(c, param, width, seed, cancelled):
        calls.append(c)
        seen.append((param, width, seed, cancelled))
        return [{"param": param, "width": width}]
    monkeypatch.setattr(cc, "point_rows", rows)
    got = list(cc.run_coord_check(cfg))
    assert [(g.done, g.total, len(g.rows), g.finished) for g in got] == [
        (1, 4, 1, False), (2, 4, 2, False), (3, 4, 3, False), (4, 4, 4, True)]
    assert got[-1].rows == ({"param": "sp", "width": 16}, {"param": "sp", "width": 32},
                            {"param": "mup", "width": 16}, {"param": "mup", "width": 32})
    assert got[0].config is cfg and seen[0] == ("sp", 16, 0, None)
    assert all(c is cfg for c in calls)
    flags = iter([False, False, True])

    def flag():
        return next(flags)
    seen.clear()
    got = list(cc.run_coord_check(cfg, flag))
    assert len(got) == 2 and seen[0][3] is flag


def test_a_slopes_row_leaves_a_missing_slope_empty():
    s = cc.Slope("sp", "sqrt", "readout", 2, 0.25, 0.5, 3)
    assert s.row() == {"param": "sp", "scaling": "sqrt", "kind": "readout", "step": 2,
                       "slope": 0.25, "se": 0.5, "seeds": 3}
    row = cc.Slope("mup", "dk", "readout", 0, math.nan, math.inf, 0).row()
    assert (row["slope"], row["se"], row["seeds"], row["step"]) == ("", "", 0, 0)


def _rows(cfg):
    out = []
    for param in cfg.params:
        for w in cfg.widths:
            for step in range(cfg.steps + 1):
                for kind in cc.KINDS:
                    v = 0.0 if kind == "readout" and step == 0 else w / 16 * (step + 1)
                    out.append({"param": param, "scaling": cfg.rule(param), "width": w,
                                "seed": 0, "step": step, "layer": "l", "kind": kind,
                                "mean_abs": v})
    return out


def test_the_figures_one_per_param_a_series_per_kind_and_step():
    cfg = cc.CoordCheckConfig(params=("sp", "mup"), widths=(16, 32), steps=1, seeds=1,
                              base=TINY)
    figs = cc.figure_data(cfg, _rows(cfg))
    assert [f.id for f in figs] == ["coord_sp", "coord_mup"]
    sp = figs[0]
    assert sp.title == "Coord check, sp (sqrt attention, base width 16)"
    assert figs[1].title == "Coord check, mup (dk attention, base width 16)"
    assert (sp.kind, sp.x_label, sp.y_label, sp.x_log, sp.y_log, sp.error) == (
        "vs_axis", "width (d_model)", "mean |activation|", True, True,
        "mean ± 1 standard error over seeds")
    labels = [s.name for s in sp.series]  # the readout is 0 at step 0: no series
    assert labels == [f"{k}, step {s}" for k in cc.KINDS for s in (0, 1)
                      if (k, s) != ("readout", 0)]
    first = sp.series[2]  # attention logits, step 0
    assert (first.rule, first.colour, first.x, first.y) == (
        "attention logits", "#56B4E9", (16.0, 32.0), (1.0, 2.0))
    assert {s.rule: s.colour for s in sp.series} == cc.KIND_COLOURS
    cfg2 = cc.CoordCheckConfig(params=("sp",), widths=(8, 16), width_axis="d_k", steps=0,
                               seeds=1, base_width=16, base=TINY)
    (fig,) = cc.figure_data(cfg2, [])  # (no rows yet: every series, empty)
    assert fig.x_label == "width (head width d_k)" and len(fig.series) == 5
    assert fig.title.endswith("base width 16)") and fig.series[0].x == ()


def test_settings_are_stored_as_checked():
    """Integers given as 2.0 or NumPy integers are stored as int, a learning rate of 1 as
    1.0; a d_model axis resets the base's own d_k; width 1 is a width (on the d_k axis)."""
    import numpy as np

    cfg = cc.CoordCheckConfig(widths=(16, 32), steps=np.int64(2), seeds=2.0, lr=1,
                              base_width=16.0, base=TINY.replace(d_k=4))
    assert [(v, type(v)) for v in (cfg.steps, cfg.seeds, cfg.lr, cfg.base_width)] == [
        (2, int), (2, int), (1.0, float), (16, int)]
    assert cfg.point_config("sp", 32, 0).d_k == 0
    assert cc.CoordCheckConfig(widths=(1, 2), width_axis="d_k", base=TINY).widths == (1, 2)


@pytest.mark.parametrize("data", ["x", [("params", "sp")], None])
def test_a_config_from_something_not_a_dict_is_refused(data):
    with pytest.raises(ConfigError):
        cc.CoordCheckConfig.from_dict(data)
