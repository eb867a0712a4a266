"""muP (param = mup) against Microsoft's reference (the ``mup`` package) and against the paper's
Table 3 written out here; param = sp leaves the training loop exactly as it was."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from torch.nn import functional as F  # noqa: E402

from engine.errors import ConfigError  # noqa: E402
from engine.training.config import TrainingConfig  # noqa: E402
from engine.training.model import AttentionModel  # noqa: E402
from engine.training.numerics import training_numerics  # noqa: E402
from engine.training.parametrization import _plan, parameter_plan  # noqa: E402
from engine.training.tasks import make_batch, stream_seed  # noqa: E402
from engine.training.trainer import Trainer  # noqa: E402

#: the width axis d_model (heads fixed, d_k grows) and the axis d_k (d_model fixed)
AXES = {
    "d_model": dict(task="recall", d_model=128, heads=2, layers=2, mlp=True, base_width=32,
                    width_axis="d_model", classes=16, pairs=4),
    "d_k": dict(task="retrieval", d_model=48, heads=2, d_k=96, layers=1, mlp=False,
                base_width=24, width_axis="d_k"),
}
HIDDEN = ("attn.w_q.weight", "attn.w_k.weight", "attn.w_v.weight", "attn.w_o.weight",
          "mlp.fc.weight", "mlp.proj.weight")


@pytest.fixture(autouse=True)
def _fresh_plans():
    """``parameter_plan`` caches its plans: each test computes its own, so a test run in a
    process that computed them before (mutmut forks its mutants' runs from one that ran the
    tests clean) still runs the code it checks instead of reading the cache."""
    _plan.cache_clear()
    yield
    _plan.cache_clear()


def _cfg(axis: str, **kw) -> TrainingConfig:
    return TrainingConfig(**{**AXES[axis], "param": "mup", "device": "cpu", "batch": 8,
                             "probe_size": 8, "steps": 3, "lr": 0.01, **kw})


def _lrs(opt, model) -> dict[str, tuple[float, float]]:
    """Parameter name -> (learning rate, weight decay) of the group holding it."""
    names = {id(p): n for n, p in model.named_parameters()}
    return {names[id(p)]: (g["lr"], g["weight_decay"]) for g in opt.param_groups
            for p in g["params"]}


# -- param = sp: today's loop, bit for bit ------------------------------------------------------------
def _reference_sp_weights(cfg: TrainingConfig) -> dict[str, torch.Tensor]:
    """The training loop as it was before muP existed: one Adam over model.parameters()."""
    model = AttentionModel(cfg, cfg.scalings[0], cfg.in_features, cfg.vocab)
    model.init_weights(torch.Generator().manual_seed(stream_seed(cfg.seed, 0)))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(stream_seed(cfg.seed, 1))
    with training_numerics():
        for s in range(cfg.steps):
            b = make_batch(cfg, cfg.batch, gen)
            loss = F.cross_entropy(model(b.inputs, b.readout, b.mask), b.targets)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            for g in opt.param_groups:
                g["lr"] = cfg.lr * cfg.lr_factor(s)
            opt.step()
    return model.state_dict()


@pytest.mark.parametrize("kw", [dict(), dict(warmup=2, decay="cosine", task="recall", layers=2,
                                              mlp=True, d_model=32, heads=2)])
def test_sp_trains_exactly_as_the_plain_loop(kw):
    cfg = TrainingConfig(**{"d_model": 32, "scalings": ("sqrt",), "steps": 6, "batch": 8,
                            "probe_size": 4, "device": "cpu", "lr": 0.01, "base_width": 8,
                            "attn_mult": 3.0, **kw})  # (the muP fields are ignored under sp)
    trainer = Trainer(cfg, observe=False)
    for _ in trainer.iterate():
        pass
    ref = _reference_sp_weights(cfg)
    got = trainer.runs[0].model.state_dict()
    assert set(got) == set(ref)
    for name in ref:
        assert torch.equal(got[name], ref[name]), name
    assert len(trainer.runs[0].opt.param_groups) == 1
    assert not trainer.runs[0].model.head._forward_pre_hooks


# -- against the mup package ---------------------------------------------------------------------
def _readouts(cfg: TrainingConfig) -> list[str]:
    """The layers mup requires to be MuReadout: fan_in a width, fan_out not (its
    ``assert_hidden_size_inf`` refuses any other such nn.Linear)."""
    names = ["head"]
    if cfg.width_axis == "d_k":
        names += [f"blocks.{i}.attn.w_o" for i in range(cfg.layers)]
    return names


def _mup_model(cfg: TrainingConfig, rule: str, init: bool):
    """Our model with its readout-like layers swapped for ``mup.MuReadout`` (the classifier with
    mup's readout_zero_init), SP-initialized like ours, W_Q zeroed as muP recommends."""
    import mup

    model = AttentionModel(cfg, rule, cfg.in_features, cfg.vocab)
    if init:
        model.init_weights(torch.Generator().manual_seed(stream_seed(cfg.seed, 0)))
    for name in _readouts(cfg):
        parent_name, _, leaf = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        old = getattr(parent, leaf)
        new = mup.MuReadout(old.in_features, old.out_features, bias=old.bias is not None,
                            readout_zero_init=name == "head")
        if name != "head":
            with torch.no_grad():
                new.weight.copy_(old.weight)
        setattr(parent, leaf, new)
    if init:
        with torch.no_grad():
            for blk in model.blocks:
                blk.attn.w_q.weight.zero_()
    return model


def _mup_reference(cfg: TrainingConfig, rule: str, optimizer: str):
    import mup

    model = _mup_model(cfg, rule, init=True)
    base = _mup_model(cfg.at_width(cfg.base_width), rule, init=False)
    other = cfg.base_width * 2
    delta = _mup_model(cfg.at_width(other), rule, init=False)
    mup.set_base_shapes(model, base, delta=delta)  # (rescales MuReadout weights; do_assert)
    make = mup.MuAdamW if optimizer == "adamw" else mup.MuAdam if optimizer == "adam" \
        else mup.MuSGD
    opt = make(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    return model, opt


@pytest.mark.parametrize("axis", ["d_model", "d_k"])
@pytest.mark.parametrize("optimizer", ["adam", "adamw", "sgd"])
def test_init_and_learning_rates_equal_the_mup_package(axis, optimizer):
    pytest.importorskip("mup")
    wd = 0.0 if optimizer == "adam" else 0.01
    cfg = _cfg(axis, scalings=("sqrt",), optimizer="sgd" if optimizer == "sgd" else "adam",
               weight_decay=wd)
    trainer = Trainer(cfg, observe=False)
    ours, our_opt = trainer.runs[0].model, trainer.runs[0].opt
    ref, ref_opt = _mup_reference(cfg, "sqrt", optimizer)
    got, want = ours.state_dict(), ref.state_dict()
    assert set(got) == set(want)
    for name in want:  # the same init, value for value
        assert torch.equal(got[name], want[name]), name
    ours_lr, ref_lr = _lrs(our_opt, ours), _lrs(ref_opt, ref)
    assert set(ours_lr) == set(ref_lr)
    for name, (lr, decay) in ref_lr.items():
        assert ours_lr[name][0] == pytest.approx(lr, rel=1e-12), name
        assert ours_lr[name][1] == pytest.approx(decay, rel=1e-12), name
    # (the check has something to tell apart: per-group lrs, or W_O rescaled on the d_k axis)
    assert len({lr for lr, _ in ref_lr.values()}) > 1 or (axis == "d_k" and optimizer != "sgd")
    # the same forward pass: MuReadout's input / width_mult is our hook (the sqrt rule has no
    # attention multiplier, which the package leaves to the model)
    with torch.no_grad():
        for m in (ours, ref):  # a readout that is not zero, so the multiplier shows
            m.head.weight.copy_(torch.linspace(-1, 1, m.head.weight.numel()).view_as(m.head.weight))
    b = trainer.probe
    torch.testing.assert_close(ours(b.inputs, b.readout, b.mask), ref(b.inputs, b.readout, b.mask),
                               rtol=1e-5, atol=1e-7)


# -- against the paper's Table 3, written out ----------------------------------------------------
def _table3_adam_lr(name: str, axis: str, lr: float, m: float) -> float:
    """muP with Adam (Yang et al. 2022, Table 3, relative to the base width): hidden weights
    lr / m; input weights, biases and norms lr; output weights lr / m *effectively*, which
    MuReadout's form keeps as lr on W with the forward's 1 / m (checked on W / m below)."""
    if axis == "d_model" and name.endswith(HIDDEN):
        return lr / m
    return lr


@pytest.mark.parametrize("axis", ["d_model", "d_k"])
def test_learning_rates_and_init_follow_table_3(axis):
    cfg = _cfg(axis, scalings=("dk",))
    m = cfg.width / cfg.base_width  # 4 on both axes
    trainer = Trainer(cfg, observe=False)
    model, opt = trainer.runs[0].model, trainer.runs[0].opt
    trainer.advance()  # the schedule sets each group's lr
    lrs = _lrs(opt, model)
    for name, (lr, _) in lrs.items():
        assert lr == pytest.approx(_table3_adam_lr(name, axis, cfg.lr, m), rel=1e-12), name
    sd = {k: v for k, v in Trainer(cfg, observe=False).runs[0].model.state_dict().items()}
    # zero init: the readout and W_Q
    assert not sd["head.weight"].any() and not sd["head.bias"].any()
    assert all(not sd[f"blocks.{i}.attn.w_q.weight"].any() for i in range(cfg.layers))
    # hidden and input weights: variance 1/fan_in (qk_init = 1) whatever the width
    w_k = sd["blocks.0.attn.w_k.weight"]
    assert w_k.var().item() == pytest.approx(1 / cfg.d_model, rel=0.1)
    if axis == "d_k":  # W_O is an output weight: effective W_O / m has variance 1 / fan_in^2
        w_o, fan_in = sd["blocks.0.attn.w_o.weight"], cfg.heads * cfg.head_dim  # (x base)
        base_fan_in = fan_in / m
        assert (w_o / m).var().item() == pytest.approx(base_fan_in / fan_in**2, rel=0.1)
        assert lrs["blocks.0.attn.w_o.weight"][0] / m == pytest.approx(cfg.lr * base_fan_in
                                                                       / fan_in)


#: what mup 1.0.0's optimizers do to the weight decay, written out per parameter (no ``mup``
#: needed): MuAdam/MuAdamW multiply a hidden (both dimensions grow) matrix's decay by its width
#: multiplier m = 4; MuSGD divides a vector-like parameter's (one dimension grows) by m and
#: multiplies a hidden one's by fanin_mult / fanout_mult (1 here); fixed ones keep it
WD_SCALE = {
    ("d_model", "adam"): lambda name: 4.0 if name.endswith(HIDDEN) else 1.0,
    ("d_model", "sgd"): lambda name: 1.0 if name.endswith(HIDDEN) or name == "head.bias"
    else 0.25,
    ("d_k", "adam"): lambda name: 1.0,  # nothing grows in both dimensions on this axis
    ("d_k", "sgd"): lambda name: 0.25 if ".attn.w_" in name else 1.0,  # W_Q, W_K, W_V, W_O
}


@pytest.mark.parametrize("axis", ["d_model", "d_k"])
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_weight_decay_follows_the_mup_rules_written_out(axis, optimizer):
    """The decay each optimizer group really uses (AdamW or SGD), against the rule above, at
    width 4x the base; under sp every group keeps the configured decay."""
    cfg = _cfg(axis, scalings=("sqrt",), optimizer=optimizer, weight_decay=0.1)
    assert cfg.width / cfg.base_width == 4
    trainer = Trainer(cfg, observe=False)
    model, opt = trainer.runs[0].model, trainer.runs[0].opt
    assert type(opt).__name__ == ("AdamW" if optimizer == "adam" else "SGD")
    decays = _lrs(opt, model)
    rule = WD_SCALE[(axis, optimizer)]
    assert len(decays) == len(list(model.parameters()))
    for name, (_, decay) in decays.items():
        assert decay == pytest.approx(0.1 * rule(name), rel=1e-12), name
    assert len({d for _, d in decays.values()}) > 1 or (axis, optimizer) == ("d_k", "adam")
    sp = Trainer(cfg.replace(param="sp"), observe=False).runs[0]
    assert {g["weight_decay"] for g in sp.opt.param_groups} == {0.1}


#: muP with SGD (Yang et al. 2022, Table 3, relative to the base width m = width / base): input
#: weights, biases and norms (one dimension grows: fan_out) lr x m; hidden weights lr x
#: fan_out_mult / fan_in_mult (1: both grow alike here); output weights lr / m *effectively*,
#: which in MuReadout's form (forward x 1/m) is lr x m on W: W / m moves by (lr_W / m^2) x the
#: gradient of W / m. A bias or weight of which no dimension grows (the classifier's bias, every
#: parameter but attention's on the d_k axis) keeps lr.
def _table3_sgd_lr(name: str, axis: str, lr: float, m: float) -> float:
    if axis == "d_model":
        return lr if name.endswith(HIDDEN) or name == "head.bias" else lr * m
    return lr * m if ".attn.w_" in name else lr  # W_Q, W_K, W_V input-like, W_O output


@pytest.mark.parametrize("axis", ["d_model", "d_k"])
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("m", [2, 4])
def test_a_step_of_weight_decay_shrinks_every_weight_as_at_the_base_width(axis, optimizer, m):
    """muP's rule for the decay, by hand and without ``mup``: torch's decay is coupled to the
    learning rate (AdamW: p <- p (1 - lr wd); SGD: p <- p - lr (g + wd p)), so a weight whose
    learning rate muP scales by s must have its decay scaled by 1 / s for a step to shrink it by
    the same lr x wd at every width (what mup's MuAdam, MuAdamW and MuSGD do). Checked on the
    optimizer's real step with zero gradients (only the decay moves a weight), every parameter
    set to 1, at m = 2 and 4 times the base width; the learning rates themselves from Table 3."""
    cfg = _cfg(axis, scalings=("sqrt",), optimizer=optimizer, weight_decay=0.1, lr=0.01)
    cfg = cfg.at_width(cfg.base_width * m)
    run = Trainer(cfg, observe=False).runs[0]
    model, opt = run.model, run.opt
    table = _table3_adam_lr if optimizer == "adam" else _table3_sgd_lr
    lrs = _lrs(opt, model)
    assert len(lrs) == len(list(model.parameters()))
    for name, (lr, _) in lrs.items():
        assert lr == pytest.approx(table(name, axis, cfg.lr, m), rel=1e-12), name
    # (something to tell apart: lr and lr x m^+-1; Adam on the d_k axis has no hidden matrix)
    assert len({lr for lr, _ in lrs.values()}) == (1 if (axis, optimizer) == ("d_k", "adam") else 2)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(1.0)
            p.grad = torch.zeros_like(p)
    opt.step()
    for name, p in model.named_parameters():  # 1 - lr wd = 0.999 in float32: 1.3e-5 relative
        shrink = 1.0 - p.detach().double()
        assert shrink.min().item() == shrink.max().item(), name
        assert shrink[(0,) * p.dim()].item() == pytest.approx(0.01 * 0.1, rel=1e-4), name


def test_hidden_matrices_whose_dimensions_grow_apart_follow_fan_out_over_fan_in():
    """A matrix whose fan_out grows x4 and fan_in x2 (no such layer in this model; the general
    rule, written out): SGD lr x fan_out_mult / fan_in_mult = 2 and decay x 1/2; Adam lr x
    1 / fan_in_mult = 1/2 and decay x 2; init unchanged. A readout-like one (fan_in x4 only)
    starts x sqrt(4) = 2 and takes SGD's lr x 4 (its width multiplier), Adam's x 1."""
    from engine.training.parametrization import _scaling

    sgd = _scaling("w", (64, 16), (16, 8), True, False, "sgd")
    adam = _scaling("w", (64, 16), (16, 8), True, False, "adam")
    assert (sgd.kind, sgd.lr_scale, sgd.wd_scale, sgd.init_scale) == ("hidden", 2.0, 0.5, 1.0)
    assert (adam.kind, adam.lr_scale, adam.wd_scale, adam.init_scale) == ("hidden", 0.5, 2.0, 1.0)
    assert (sgd.fanout_mult, sgd.fanin_mult, sgd.width_mult) == (4.0, 2.0, 2.0)
    out_sgd = _scaling("o", (10, 32), (None, 8), True, False, "sgd")
    out_adam = _scaling("o", (10, 32), (None, 8), True, False, "adam")
    assert (out_sgd.kind, out_sgd.lr_scale, out_sgd.wd_scale, out_sgd.init_scale) == \
        ("readout", 4.0, 0.25, 2.0)
    assert (out_adam.kind, out_adam.lr_scale, out_adam.wd_scale) == ("readout", 1.0, 1.0)
    # the same shape as a parameter that is not a Linear's weight: vector-like, init kept
    vec = _scaling("e", (10, 32), (None, 8), False, False, "sgd")
    assert (vec.kind, vec.lr_scale, vec.init_scale) == ("vector", 4.0, 1.0)
    # an input-like Linear weight (fan_out grows): vector-like, its width multiplier is fan_out's
    inp = _scaling("i", (32, 10), (8, None), True, False, "sgd")
    assert (inp.kind, inp.lr_scale, inp.width_mult, inp.init_scale) == ("vector", 4.0, 4.0, 1.0)
    assert _scaling("z", (32, 10), (8, None), True, True, "sgd").init_scale == 0.0
    fixed = _scaling("f", (5,), (None,), False, False, "sgd")
    assert (fixed.kind, fixed.lr_scale, fixed.wd_scale, fixed.width_mult) == ("fixed", 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="3-d: more than 2 dimensions grow"):
        _scaling("3-d", (4, 4, 4), (2, 2, 2), False, False, "adam")


@pytest.mark.parametrize("axis", ["d_model", "d_k"])
@pytest.mark.parametrize("narrower", [False, True])
def test_forward_multipliers_follow_the_paper(axis, narrower):
    """Readout output x base/width (on the d_model axis), W_O's x base/width (on the d_k axis),
    and the dk rule's logits = sqrt(d_k at the base width) * q.k / d_k; at 4x the base width and
    at half of it (``narrower``: the readout's input x 2)."""
    cfg = _cfg(axis, scalings=("dk",))
    if narrower:
        cfg = cfg.replace(base_width=2 * cfg.width)
    m = cfg.width / cfg.base_width
    trainer = Trainer(cfg, observe=False)
    model = trainer.runs[0].model
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
    b = trainer.probe
    capture = []
    with torch.no_grad():
        out = model(b.inputs, b.readout, b.mask, capture)
        x = model.embed_inputs(b.inputs)
        blk = model.blocks[0]
        h = blk.ln1(x)
        split = lambda y: y.view(*y.shape[:2], cfg.heads, cfg.head_dim).transpose(1, 2)  # noqa: E731
        q, k = split(F.linear(h, blk.attn.w_q.weight)), split(F.linear(h, blk.attn.w_k.weight))
        base_dk = cfg.base_width // cfg.heads if axis == "d_model" else cfg.base_width
        want = math.sqrt(base_dk) * (q @ k.transpose(-1, -2)) / cfg.head_dim
        torch.testing.assert_close(capture[0].logits, want, rtol=1e-5, atol=1e-6)
        last = model.ln_f(_replay(model, cfg, b, m, axis))
        picked = last[torch.arange(last.shape[0]), b.readout]
        mult = 1 / m if axis == "d_model" else 1.0
        torch.testing.assert_close(out, F.linear(picked * mult, model.head.weight,
                                                 model.head.bias), rtol=1e-5, atol=1e-6)


def _replay(model, cfg, b, m, axis):
    """The residual stream computed without hooks: q x attn_mult, W_O's input x 1/m on d_k."""
    from engine.training.model import attend

    x = model.embed_inputs(b.inputs)
    base_dk = cfg.base_width // cfg.heads if axis == "d_model" else cfg.base_width
    for blk in model.blocks:
        h = blk.ln1(x)
        a = blk.attn
        split = lambda y: y.view(*y.shape[:2], cfg.heads, cfg.head_dim).transpose(1, 2)  # noqa: E731
        q = split(F.linear(h, a.w_q.weight)) * math.sqrt(base_dk)
        k, v = split(F.linear(h, a.w_k.weight)), split(F.linear(h, a.w_v.weight))
        o, _, _ = attend(q, k, v, "dk", b.mask)
        o = o.transpose(1, 2).reshape(*x.shape[:2], -1)
        x = x + F.linear(o * (1 / m if axis == "d_k" else 1.0), a.w_o.weight)
        if blk.mlp is not None:
            x = x + blk.mlp(blk.ln2(x))
    return x


def test_at_the_base_width_the_dk_rule_equals_sqrt():
    """attn_mult's default: sqrt(d_k at the base width), so the muP logits equal q.k/sqrt(d_k)
    there; every multiplier is 1 and only the zero inits differ from sp."""
    cfg = _cfg("d_model", d_model=32, scalings=("sqrt", "dk"))
    trainer = Trainer(cfg, observe=False)
    with torch.no_grad():
        for run in trainer.runs:
            for blk in run.model.blocks:
                blk.attn.w_q.weight.copy_(blk.attn.w_k.weight)
    b = trainer.probe
    logits = []
    for run in trainer.runs:
        cap = []
        with torch.no_grad():
            run.model(b.inputs, b.readout, b.mask, cap)
        logits.append(cap[0].logits)
    torch.testing.assert_close(logits[0], logits[1], rtol=1e-6, atol=1e-6)
    plan = parameter_plan(cfg, "dk")
    assert {sc.lr_scale for sc in plan.values()} == {1.0}


def test_a_base_width_at_either_end_of_the_range_has_a_plan():
    """The second width that tells growing dimensions from fixed ones must be a valid model at
    both ends: base_width = heads on the d_model axis (one below would be d_model 0), and
    base_width = 4096 (D_MODEL_MAX) on the d_k axis (one above is refused)."""
    cfg = _cfg("d_model", d_model=32, base_width=2, layers=1, mlp=False)
    plan = parameter_plan(cfg, "sqrt")
    assert plan["blocks.0.attn.w_k.weight"].base_shape == (2, 2)
    assert plan["blocks.0.attn.w_k.weight"].lr_scale == 2 / 32  # Adam: 1 / fanin_mult
    assert plan["head.weight"].base_shape == (None, 2)
    cfg = _cfg("d_k", d_k=1024, base_width=4096)
    plan = parameter_plan(cfg.replace(optimizer="sgd"), "sqrt")
    assert plan["blocks.0.attn.w_q.weight"].base_shape == (2 * 4096, None)
    assert plan["blocks.0.attn.w_q.weight"].lr_scale == 1024 / 4096  # SGD: width_mult
    assert plan["blocks.0.attn.w_o.weight"].base_shape == (None, 2 * 4096)
    assert plan["embed.weight"].base_shape == (None, None)


def test_a_base_width_just_under_the_memory_limit_has_a_plan():
    """Bug fixed: the second width was one step above the base, so a base width whose model is
    valid but one step short of the memory limit (d_model 1662: 3 rules x 33.3 million
    parameters; 1664 is over 100 million) was refused as "no valid model"."""
    cfg = TrainingConfig(task="recall", d_model=32, heads=2, layers=1, mlp=True, classes=16,
                         pairs=4, scalings=("sqrt", "dk", "none"), param="mup",
                         width_axis="d_model", base_width=1662, device="cpu")
    cfg.at_width(1662)  # valid
    with pytest.raises(ConfigError):
        cfg.at_width(1664)
    plan = parameter_plan(cfg, "sqrt")
    assert plan["blocks.0.attn.w_k.weight"].base_shape == (1662, 1662)
    assert plan["blocks.0.mlp.fc.weight"].base_shape == (4 * 1662, 1662)
    assert plan["blocks.0.attn.w_k.weight"].lr_scale == 1662 / 32


#: base widths whose model is valid but whose width twice as large (or 2 above) is not: the
#: second width must not be base + heads on the d_k axis (32 -> 64 refused), nor on the d_model
#: axis with d_k fixed, nor base + 2 (2 -> 4 refused with 64 heads, 4 layers, 8 rules)
EDGE_BASES = [
    dict(width_axis="d_k", d_model=4096, heads=32, d_k=16, base_width=32,
         scalings=("sqrt", "dk", "none")),
    dict(width_axis="d_model", d_model=16, heads=32, d_k=4096, base_width=32,
         scalings=("sqrt", "dk", "none")),
    dict(width_axis="d_k", d_model=4096, heads=64, d_k=1, base_width=2, layers=4,
         scalings=("none", "sqrt", "dk", "temperature", "cosine", "qknorm", "logn", "ssmax")),
]


@pytest.mark.parametrize("kw", EDGE_BASES)
def test_a_base_width_whose_double_is_over_the_memory_limit_has_a_plan(kw):
    cfg = TrainingConfig(**{"task": "retrieval", "mlp": False, "layers": 1, "param": "mup",
                            "device": "cpu", "batch": 1, "probe_size": 1, "items_min": 4,
                            "items_max": 4, **kw})
    base = kw["base_width"]
    with pytest.raises(ConfigError):
        cfg.at_width(2 * base)
    plan = parameter_plan(cfg, "sqrt")
    w_k = plan["blocks.0.attn.w_k.weight"]
    assert w_k.base_shape == ((kw["heads"] * base, None) if kw["width_axis"] == "d_k"
                              else (None, base))


def test_a_base_width_that_gives_no_valid_model_is_refused_by_name():
    """base_width 4096 with d_model growing: 200 million parameters at the base width, more
    than the memory limit; the refusal names base_width and says why."""
    cfg = _cfg("d_model", d_model=32, layers=1, mlp=True, base_width=4096)
    with pytest.raises(ConfigError) as err:
        parameter_plan(cfg, "sqrt")
    assert err.value.field == "base_width"
    assert err.value.message.startswith("4096 gives no valid model of this shape (d_model: ")
    assert "parameters" in err.value.message


def test_the_zero_initialized_parameters_are_the_readout_and_every_w_q():
    from engine.training.parametrization import zero_init_names

    assert zero_init_names(_cfg("d_model", layers=2)) == {
        "head.weight", "head.bias", "blocks.0.attn.w_q.weight", "blocks.1.attn.w_q.weight"}
    plan = parameter_plan(_cfg("d_model", layers=2), "sqrt")
    assert all(sc.name == name for name, sc in plan.items())
    assert {n for n, sc in plan.items() if sc.init_scale == 0.0} == zero_init_names(
        _cfg("d_model", layers=2))


def test_the_readout_hook_scales_only_the_input():
    """A forward pre-hook gets every positional argument; only the first is scaled."""
    from engine.training.parametrization import _ScaleInput

    x = torch.ones(3)
    out = _ScaleInput(0.5)(None, (x, "second", 3))
    assert torch.equal(out[0], torch.full((3,), 0.5)) and out[1:] == ("second", 3)


def test_evaluation_at_other_lengths_sees_the_multipliers():
    """The streamed forward pass (evaluation lengths) goes through the same hooks."""
    cfg = _cfg("d_model", scalings=("dk",), eval_lengths=(8,), task="recall",
               positions="sinusoidal", classes=16, pairs=4)
    model = Trainer(cfg, observe=False).runs[0].model
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    b = make_batch(cfg, 4, torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(b.inputs, b.readout, b.mask)
        streamed, _ = model.forward_streamed(b.inputs, b.readout, None, rows=3, causal=True)
    torch.testing.assert_close(full, streamed, rtol=1e-5, atol=1e-6)


def test_mup_learns():
    cfg = _cfg("d_model", task="retrieval", d_model=64, base_width=16, layers=1, mlp=False,
               scalings=("dk",), steps=120, lr=0.01, batch=32, log_every=40)
    trainer = Trainer(cfg)
    for _ in trainer.iterate():
        pass
    snap = trainer.snapshot()
    assert snap.final("accuracy", "dk") > 0.8
    assert snap.scalars["loss"][-1, 0] < 0.5 * snap.scalars["loss"][0, 0]


@pytest.mark.parametrize("kw,field", [
    (dict(param="muP"), "param"),
    (dict(width_axis="heads"), "width_axis"),
    (dict(base_width=33), "base_width"),  # not a multiple of heads = 2
    (dict(base_width=-1), "base_width"),
    (dict(attn_mult=-1.0), "attn_mult"),
])
def test_bad_mup_fields_are_named(kw, field):
    with pytest.raises(ConfigError) as err:
        _cfg("d_model", **kw)
    assert err.value.field == field
