"""compare_backends on the toy model of toy_attention.py (milliseconds to build, no transformers
model): a backend that ignores the soft-cap or scales one layer's logits is flagged in exactly
that layer with the difference the toy's own eager code gives by hand, later layers inherit it
unflagged, the tolerance follows the largest logit recomputed from the Linear weights, and every
reason a backend is not compared is reported (docs/testing.md, mutation testing)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from engine.probe.backends import (  # noqa: E402
    COLUMNS,
    REL_TOL,
    BackendReport,
    BackendSite,
    _rel,
    candidate_backends,
    compare_backends,
    site_tolerance,
)
from engine.probe.capture import prepare  # noqa: E402
from engine.probe.tap import IMPLEMENTATION  # noqa: E402
from tests.engine.probe.toy_attention import HEADS, D, Toy, eager_attention_forward  # noqa: E402

IDS = [3, 1, 4, 1, 5]
EPS32 = float(np.finfo(np.float32).eps)
FAKE = "lab_test_backend"


def _loaded(net: Toy):
    tap = prepare(net, "toy")
    return SimpleNamespace(model=net, tap=tap, sites=tap.sites, n_sites=len(tap.sites),
                           info=SimpleNamespace(model_type="toy"))


@pytest.fixture
def fake_backend():
    """Registers FAKE as an attention function; yields a dict whose "fn" it calls."""
    from transformers import AttentionInterface

    box = {"fn": eager_attention_forward}
    AttentionInterface.register(FAKE, lambda *a, **k: box["fn"](*a, **k))
    yield box
    AttentionInterface._global_mapping.pop(FAKE, None)


def _site_io(net: Toy) -> list[tuple[np.ndarray, np.ndarray]]:
    """(input, output) of each attention call of a plain eager pass of ``net`` (float64)."""
    got = []
    for m in (net.a, net.shared, net.cross):
        m.register_forward_hook(lambda mod, args, out: got.append(
            (mod, args[0].double().numpy(), out.double().numpy())))
    with torch.no_grad():
        net(torch.tensor([IDS]))
    return [(x, o) for _m, x, o in got]


def _max_logit(net: Toy) -> list[float]:
    """Per site, the largest |scaling q.k| from the Linear weights and the sites' inputs."""
    io = _site_io(Toy())
    e = net.embed.weight.detach().double().numpy()[IDS]
    out = []
    for (x, _o), mod, src, s in zip(io, (net.a, net.shared, net.shared, net.cross),
                                    (None, None, None, e), (0.25, D**-0.5, D**-0.5, 0.5)):
        src = x[0] if src is None else src
        q = (x[0] @ mod.q_proj.weight.double().numpy().T).reshape(-1, HEADS, D)
        k = (src @ mod.k_proj.weight.double().numpy().T).reshape(-1, HEADS, D)
        out.append(float(np.abs(np.einsum("ihd,jhd->hij", q, k)).max()) * s)
    return out


def test_a_backend_that_ignores_the_soft_cap_is_flagged_in_that_layer_only(fake_backend) -> None:
    def no_cap(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
               softcap=None, **kw):
        return eager_attention_forward(module, query, key, value, attention_mask, dropout,
                                       scaling)

    fake_backend["fn"] = no_cap
    loaded = _loaded(Toy())
    rep = compare_backends(loaded, IDS, [FAKE])
    assert rep.compared == (FAKE,) and rep.unavailable == {}
    assert [(s.backend, s.site) for s in rep.sites] == [(FAKE, i) for i in range(4)]
    assert [s.site for s in rep.flagged()] == [0]
    # the difference by hand: the toy's eager pass with and without its soft-cap
    capped = _site_io(Toy())
    uncapped_net = Toy(softcap=None)
    uncapped = _site_io(uncapped_net)
    for i, s in enumerate(rep.sites):
        (x0, o0), (x1, o1) = capped[i], uncapped[i]
        want_out = np.abs(o0 - o1).max() / np.abs(o0).max()
        want_in = np.abs(x0 - x1).max() / np.abs(x0).max()
        assert s.output_rel_diff == pytest.approx(want_out, rel=1e-3, abs=1e-6)
        assert s.input_rel_diff == pytest.approx(want_in, rel=1e-3, abs=1e-6)
    assert rep.sites[0].input_rel_diff == 0.0 and rep.sites[0].output_rel_diff > 100 * REL_TOL
    # later sites differ (inherited) with their input: reported, not flagged
    assert all(s.input_rel_diff > s.tolerance and not s.flagged for s in rep.sites[1:])
    # the tolerance of each site from its largest logit
    for s, m in zip(rep.sites, _max_logit(loaded.model)):
        assert s.tolerance == pytest.approx(max(REL_TOL, 64 * EPS32 * m), rel=1e-5)
    assert loaded.model.config._attn_implementation == IMPLEMENTATION
    assert rep.tolerance == REL_TOL and rep.notes == []


def test_a_backend_that_agrees_is_not_flagged_and_one_layer_scaled_is(fake_backend) -> None:
    loaded = _loaded(Toy())
    rep = compare_backends(loaded, IDS, [FAKE])
    assert rep.flagged() == [] and len(rep.sites) == 4
    assert all(s.output_rel_diff == 0.0 and s.input_rel_diff == 0.0 for s in rep.sites)

    def scaled(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kw):
        if module is loaded.model.cross:
            scaling = scaling * 1.1
        return eager_attention_forward(module, query, key, value, attention_mask, dropout,
                                       scaling, **kw)

    fake_backend["fn"] = scaled
    rep = compare_backends(loaded, IDS, [FAKE])
    assert [s.site for s in rep.flagged()] == [3]
    assert all(s.output_rel_diff == 0.0 for s in rep.sites[:3])


def test_a_shared_module_is_compared_call_by_call(fake_backend) -> None:
    """Both calls of the shared module changed: the first flagged; the second's input already
    differs, so it is reported with it and not flagged."""
    loaded = _loaded(Toy(softcap=None))

    def scaled(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kw):
        if module is loaded.model.shared:
            scaling = (scaling or query.shape[-1] ** -0.5) * 1.2
        return eager_attention_forward(module, query, key, value, attention_mask, dropout,
                                       scaling, **kw)

    fake_backend["fn"] = scaled
    rep = compare_backends(loaded, IDS, [FAKE])
    assert [s.site for s in rep.flagged()] == [1]
    assert rep.sites[0].output_rel_diff == 0.0
    assert rep.sites[2].input_rel_diff > 0 and rep.sites[2].output_rel_diff > 0


def test_why_a_backend_is_not_compared(fake_backend) -> None:
    net = Toy()
    loaded = _loaded(net)
    # the model says it does not support it
    net._supports_sdpa = False
    rep = compare_backends(loaded, IDS, ["sdpa", "flex_attention", "flash_attention_2"])
    assert rep.compared == () and rep.sites == ()
    assert rep.unavailable["sdpa"] == "toy does not support it (_supports_sdpa = False)"
    if not torch.cuda.is_available():
        for name in ("flex_attention", "flash_attention_2"):
            assert rep.unavailable[name] == ("compared on a CUDA device only (on the CPU it "
                                             "runs unfused, uncompiled)")
    del net._supports_sdpa
    net._supports_flex_attn = False
    rep = compare_backends(loaded, IDS, ["flex_attention"])
    assert rep.unavailable["flex_attention"] == \
        "toy does not support it (_supports_flex_attn = False)"
    # a backend the switch does not reach
    real = net.set_attn_implementation
    net.set_attn_implementation = lambda name: real(IMPLEMENTATION if name == FAKE else name)
    rep = compare_backends(loaded, IDS, [FAKE])
    assert rep.unavailable == {FAKE: f"toy cannot switch to {FAKE}"} and rep.sites == ()
    net.set_attn_implementation = real
    # a backend that fails: its first line, and the capture back in place
    fake_backend["fn"] = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no kernel\nmore"))
    rep = compare_backends(loaded, IDS, [FAKE])
    assert rep.unavailable == {FAKE: "no kernel"} and rep.compared == ()
    fake_backend["fn"] = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("x" * 300))
    assert compare_backends(loaded, IDS, [FAKE]).unavailable[FAKE] == "x" * 200
    fake_backend["fn"] = lambda *a, **k: (_ for _ in ()).throw(RuntimeError())
    assert compare_backends(loaded, IDS, [FAKE]).unavailable[FAKE] == "RuntimeError"
    assert net.config._attn_implementation == IMPLEMENTATION
    # an architecture reported by an adapter: nothing compared, whatever the backend
    adapted = SimpleNamespace(**{**loaded.__dict__, "sites": [
        SimpleNamespace(**{**s.__dict__, "adapter": "x" if i == 1 else None})
        for i, s in enumerate(loaded.sites)]})
    rep = compare_backends(adapted, IDS, [FAKE])
    assert rep.unavailable == {FAKE: "this architecture computes attention outside the "
                                     "interface"}


def test_the_default_candidates_are_the_registered_ones_but_ours(fake_backend) -> None:
    from transformers import AttentionInterface

    names = candidate_backends()
    assert "sdpa" in names and FAKE in names
    assert not any(n.startswith(IMPLEMENTATION) or n.startswith("paged") for n in names)
    AttentionInterface.register(IMPLEMENTATION + "_x", eager_attention_forward)
    try:
        assert IMPLEMENTATION + "_x" not in candidate_backends()
    finally:
        AttentionInterface._global_mapping.pop(IMPLEMENTATION + "_x", None)
    rep = compare_backends(_loaded(Toy()), IDS)  # every candidate: ours agrees
    assert FAKE in rep.compared and all(not s.flagged for s in rep.sites if s.backend == FAKE)


def test_site_tolerance_and_the_relative_difference() -> None:
    edge = REL_TOL / (64 * EPS32)  # the logit where rounding outgrows REL_TOL (about 13)
    assert site_tolerance(0.0) == REL_TOL
    assert site_tolerance(0.5 * edge) == REL_TOL
    assert site_tolerance(2 * edge) == pytest.approx(2 * REL_TOL, rel=1e-12)
    assert site_tolerance(1000.0) == pytest.approx(64 * EPS32 * 1000, rel=1e-12)
    a = np.array([[1.0, -4.0], [2.0, 0.0]])
    b = np.array([[1.5, -4.0], [2.0, 0.25]])
    assert _rel(a, b) == 0.5 / 4.0
    assert _rel(b, a) == 0.5 / 4.0
    assert _rel(a, a[:1]) == float("inf")
    assert _rel(np.zeros(3), np.full(3, 1e-31)) == pytest.approx(0.1)


def test_the_report_rows_and_the_flagged_sites() -> None:
    sites = (BackendSite("sdpa", 0, 1e-7, 0.0, 1e-4, False),
             BackendSite("sdpa", 1, 0.2, 0.0, 1e-4, True),
             BackendSite("sdpa", 2, 0.3, 0.1, 1e-4, False))
    rep = BackendReport(("sdpa",), {"flex_attention": "CUDA only"}, sites)
    assert rep.flagged() == [sites[1]]
    rows = rep.rows(["block 0", "block 1"])
    assert [r["block"] for r in rows] == ["block 0", "block 1", ""]
    assert rows[1] == {"backend": "sdpa", "layer": 1, "block": "block 1", "output_rel_diff": 0.2,
                       "input_rel_diff": 0.0, "tolerance_rel": 1e-4, "flagged": True}
    assert all(tuple(r) == COLUMNS for r in rows)
    assert [r["block"] for r in rep.rows()] == ["", "", ""]


def test_the_largest_logit_per_site_reads_grouped_keys_and_the_scaling() -> None:
    """_max_logits on calls written by hand: 4 query heads over 2 key heads at scaling 0.5, a
    call without scaling (1/sqrt(d)), a site that never ran (0)."""
    import contextlib

    from engine.probe.backends import _max_logits
    from engine.probe.tap import SiteCall

    rng = np.random.default_rng(0)
    q0, k0 = rng.normal(0, 1, (1, 4, 3, 2)), rng.normal(0, 1, (1, 2, 3, 2))
    q1, k1 = rng.normal(0, 1, (1, 2, 3, 4)), rng.normal(0, 1, (1, 2, 3, 4))
    calls = [SiteCall(0, None, torch.from_numpy(q0), torch.from_numpy(k0), None, None, None,
                      None, {"scaling": -0.5}),
             SiteCall(1, None, torch.from_numpy(q1), torch.from_numpy(k1), None, None, None,
                      None, {"scaling": None})]

    class Tap_:
        @contextlib.contextmanager
        def active(self, observe):
            for c in calls:
                observe(c)
            yield

    class Net:
        config = SimpleNamespace()

        def forward(self, input_ids, attention_mask=None):
            pass

        def __call__(self, **kw):
            return None

    got = _max_logits(SimpleNamespace(tap=Tap_(), model=Net(), n_sites=3), [1, 2, 3])
    want0 = max(abs(q0[0, h, i] @ k0[0, h // 2, j]) for h in range(4) for i in range(3)
                for j in range(3)) * 0.5
    want1 = max(abs(q1[0, h, i] @ k1[0, h, j]) for h in range(2) for i in range(3)
                for j in range(3)) * 4**-0.5
    assert got == pytest.approx([want0, want1, 0.0], rel=1e-12)
    assert got[2] == 0.0
