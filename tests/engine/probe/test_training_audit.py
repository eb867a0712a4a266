"""engine.probe.training_audit without training: which paths are the lab's weights, the archive
checks at their limits (written as numbers, both sides), each refusal's words, and what the
capture reads from the lab's own model (its weights against a softmax of the raw scores taken
here, a factor after the softmax measured), on untrained one-layer models (about 2 s)."""

from __future__ import annotations

import math
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.errors import ConfigError, FileFormatError  # noqa: E402
from engine.probe import training_audit as ta  # noqa: E402
from engine.training.config import TrainingConfig  # noqa: E402

CFG = TrainingConfig(d_model=16, heads=2, items_min=3, items_max=5, classes=4, key_dim=4,
                     scalings=("none", "sqrt"), steps=2, log_every=2, batch=4, probe_size=2,
                     hist_bins=20, device="cpu")


def _states(cfg: TrainingConfig = CFG) -> dict:
    from engine.training.model import AttentionModel

    out = {}
    for rule in cfg.scalings:
        torch.manual_seed(3)
        model = AttentionModel(cfg, rule, cfg.in_features, cfg.vocab)
        model.init_weights(torch.Generator().manual_seed(3))
        out[rule] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return out


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("w") / "weights.pt"
    torch.save({"config": CFG.to_dict(), "step": 7, "weights": _states()}, path)
    return path


def _refusal(path: Path) -> FileFormatError:
    with pytest.raises(FileFormatError) as info:
        ta.load_training_runs(path)
    err = info.value
    assert err.file == str(path) and err.option == "model" and "\n" not in str(err)
    return err


# -- which paths are the lab's weights ------------------------------------------------------------


def test_training_weights_path(tmp_path: Path, monkeypatch) -> None:
    assert ta.training_weights_path(None) is None
    pt = tmp_path / "run.pt"
    pt.write_bytes(b"x")
    assert ta.training_weights_path(str(pt)) == pt
    other = tmp_path / "run.bin"
    other.write_bytes(b"x")
    assert ta.training_weights_path(str(other)) is None
    assert ta.training_weights_path(str(tmp_path / "absent.pt")) is None
    folder = tmp_path / "out"
    folder.mkdir()
    assert ta.training_weights_path(str(folder)) is None  # no weights.pt
    (folder / "weights.pt").write_bytes(b"x")
    assert ta.training_weights_path(str(folder)) == folder / "weights.pt"  # no config: the lab's
    cfg = folder / "config.json"
    for text, ours in (('{"d_model": 16}', True), ('{"model_type": "bert"}', False),
                       ("[1, 2]", False), ("{not json", False)):
        cfg.write_text(text, encoding="utf-8")
        assert (ta.training_weights_path(str(folder)) is not None) is ours, text
    # the lab's config.json is read up to 1,000,000 bytes: one byte more is not the lab's
    body = '{"d_model": 16, "pad": "'
    for size, ours in ((1_000_000, True), (1_000_001, False)):
        cfg.write_text(body + "x" * (size - len(body) - 2) + '"}', encoding="utf-8")
        assert cfg.stat().st_size == size
        assert (ta.training_weights_path(str(folder)) is not None) is ours, size
    monkeypatch.setenv("HOME", str(tmp_path))
    assert ta.training_weights_path("~/run.pt") == pt


# -- the archive, before anything unpickles ---------------------------------------------------------


def _zip(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


def test_a_file_that_is_not_a_zip_archive(tmp_path: Path) -> None:
    err = _refusal(_zip(tmp_path / "w.pt", {}).with_name("x.pt"))  # (absent: check_file says)
    assert "no such file" in err.problem
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a torch file")
    err = _refusal(bad)
    assert err.where == "" and err.problem.startswith(
        "not a Training lab weights file (not a torch.save archive: ")


@pytest.mark.parametrize("names", [(), ("a/other.pkl",), ("a/data.pkl", "b/data.pkl")])
def test_an_archive_without_a_single_data_pkl(tmp_path: Path, names) -> None:
    path = _zip(tmp_path / "w.pt", {n: b"x" for n in names} or {"a/x": b"x"})
    assert _refusal(path).problem == \
        "not a Training lab weights file (no single data.pkl in the archive)"


def test_the_object_part_is_read_up_to_512000_bytes(tmp_path: Path) -> None:
    """At the limit it goes on to torch.load (which refuses zeros as a pickle); one byte over,
    refused unread with both sizes."""
    at = _refusal(_zip(tmp_path / "a.pt", {"a/data.pkl": bytes(512_000)}))
    assert at.problem.startswith("not a Training lab weights file (") and "data.pkl" not in \
        at.problem.partition("(")[0]
    assert "512,000" not in at.problem
    over = _refusal(_zip(tmp_path / "b.pt", {"a/data.pkl": bytes(512_001)}))
    assert over.problem == ("its object part (data.pkl) is 512,001 bytes, more than the 512,000 "
                            "any weights.pt needs (refused unread)")


def _claim_size(path: Path, entry: int, size: int) -> None:
    """Rewrite the uncompressed size the central directory gives entry ``entry``: what the
    archive says it unpacks to (nothing is unpacked to check it)."""
    raw = bytearray(path.read_bytes())
    at = -1
    for _ in range(entry + 1):
        at = raw.index(b"PK\x01\x02", at + 1)
    raw[at + 24:at + 28] = struct.pack("<I", size)
    path.write_bytes(bytes(raw))


def test_the_archive_unpacks_to_at_most_1e9_bytes(tmp_path: Path) -> None:
    pkl = 10
    for total, refused in ((1_000_000_000, False), (1_000_000_001, True)):
        path = _zip(tmp_path / f"{total}.pt", {"a/data.pkl": bytes(pkl), "a/data/0": b"12345"})
        _claim_size(path, 1, total - pkl)
        assert sum(i.file_size for i in zipfile.ZipFile(path).infolist()) == total
        err = _refusal(path)
        if refused:
            assert err.problem == ("unpacked, 1,000,000,001 bytes, more than the 1,000,000,000 "
                                   "any weights.pt needs (refused unread)")
        else:
            assert err.problem.startswith("not a Training lab weights file (")


def test_the_file_itself_is_read_up_to_weights_file_max(tmp_path: Path, monkeypatch) -> None:
    path = _zip(tmp_path / "w.pt", {"a/data.pkl": bytes(10)})
    size = path.stat().st_size
    monkeypatch.setattr(ta, "WEIGHTS_FILE_MAX", size - 1)
    err = _refusal(path)
    assert err.problem == (f"{size:,} bytes, more than the {size - 1:,} any weights.pt needs "
                           "(refused unread)")


def test_a_foreign_pickle_is_refused_with_the_first_line_of_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "w.pt"
    torch.save({"config": CFG.to_dict(), "fn": np.ones(2)}, path)
    err = _refusal(path)
    assert err.where == "" and err.problem.startswith("not a Training lab weights file (")
    inside = err.problem[len("not a Training lab weights file ("):-1]
    assert 0 < len(inside) <= 200 and "\n" not in inside


# -- the structure and each run ---------------------------------------------------------------------


def test_a_good_file_and_its_step(saved: Path, tmp_path: Path) -> None:
    cfg, runs, step = ta.load_training_runs(saved)
    assert cfg == CFG and list(runs) == ["none", "sqrt"] and step == 7
    assert not any(m.training for m in runs.values())
    no_step = tmp_path / "w.pt"
    torch.save({"config": CFG.to_dict(), "weights": _states()}, no_step)
    assert ta.load_training_runs(no_step)[2] == 0
    # float64 tensors where the model has float32 ones load (load_state_dict converts)
    as64 = {r: {k: v.double() for k, v in s.items()} for r, s in _states().items()}
    torch.save({"config": CFG.to_dict(), "weights": as64}, no_step)
    assert set(ta.load_training_runs(no_step)[1]) == {"none", "sqrt"}


def test_at_most_64_runs(tmp_path: Path) -> None:
    path = tmp_path / "w.pt"
    for n, where in ((64, "weights.r0"), (65, "weights")):
        torch.save({"config": CFG.to_dict(), "weights": {f"r{i}": {} for i in range(n)}}, path)
        assert _refusal(path).where == where


def _with(saved_states: dict, rule: str, fn) -> dict:
    w = {r: dict(s) for r, s in saved_states.items()}
    fn(w[rule])
    return {"config": CFG.to_dict(), "weights": w}


def test_each_run_refusal_in_words(tmp_path: Path) -> None:
    states = _states()
    name = "blocks.0.attn.w_q.weight"
    assert name in states["sqrt"]
    shape = tuple(states["sqrt"][name].shape)
    cases = [
        ({"config": CFG.to_dict(), "weights": {"dk": states["sqrt"]}}, "weights.dk",
         "not one of the config's rules (none, sqrt)"),
        (_with(states, "sqrt", lambda s: s.update({"extra": torch.zeros(1)})),
         "weights.sqrt.'extra'", "not a parameter of the model the config builds"),
        (_with(states, "sqrt", lambda s: s.pop(name)), f"weights.sqrt.{name}",
         "required, but missing"),
        (_with(states, "sqrt", lambda s: s.update({name: torch.zeros(3, 3)})),
         f"weights.sqrt.{name}", f"shape (3, 3), but the config's model has {shape}"),
        (_with(states, "sqrt", lambda s: s.update({name: s[name].to(torch.int64)})),
         f"weights.sqrt.{name}", "dtype torch.int64, the model's is torch.float32"),
        (_with(states, "sqrt", lambda s: s.update({name: s[name].clone().index_fill_(
            0, torch.tensor([0]), float("inf"))})), f"weights.sqrt.{name}",
         "holds NaN or infinite values"),
    ]
    path = tmp_path / "w.pt"
    for data, where, problem in cases:
        torch.save(data, path)
        err = _refusal(path)
        assert (err.where, err.problem) == (where, problem)


# -- the capture and the audit ----------------------------------------------------------------------


def _batch(cfg: TrainingConfig, examples: int = 6):
    from engine.training.tasks import make_batch, stream_seed

    return make_batch(cfg, examples, torch.Generator().manual_seed(stream_seed(cfg.seed, 2)))


def _softmax_visible(z: np.ndarray, vis: np.ndarray) -> np.ndarray:
    e = np.where(vis, np.exp(z - np.where(vis, z, -np.inf).max(-1, keepdims=True)), 0.0)
    return e / e.sum(-1, keepdims=True)


def test_capture_reads_raw_scores_and_the_weights_the_values_see(saved: Path) -> None:
    """The sqrt run's weights are softmax(q.k / sqrt(d_k)) of the captured raw scores over the
    visible keys (none's: softmax(q.k)); a factor 0.5 put on the attention output before W_O
    (a scale after the softmax) is measured as weights summing to 0.5."""
    cfg, runs, _ = ta.load_training_runs(saved)
    batch = _batch(cfg)
    b, t = batch.inputs.shape[:2]
    for rule, scale in (("sqrt", 1 / math.sqrt(cfg.head_dim)), ("none", 1.0)):
        scores, probs, vis, fwd = ta.capture_training(cfg, runs[rule], batch)
        assert len(scores) == len(probs) == cfg.layers and fwd >= 0
        assert scores[0].shape == probs[0].shape == (cfg.heads, b * t, t)
        assert vis.shape == (b * t, t) and vis.dtype == bool
        # every query of example e sees exactly the keys the batch's mask leaves (padding hidden)
        keys = batch.mask.reshape(b, t).numpy()
        assert not keys.all()
        for e in range(b):
            assert (vis[e * t:(e + 1) * t] == keys[e]).all()
        assert scores[0].dtype == np.float64
        np.testing.assert_allclose(probs[0], _softmax_visible(scale * scores[0], vis),
                                   rtol=1e-5, atol=1e-7)
    handle = runs["sqrt"].blocks[0].attn.w_o.register_forward_pre_hook(
        lambda _m, args: (args[0] * 0.5,))
    try:
        _, probs, vis, _ = ta.capture_training(cfg, runs["sqrt"], batch)
    finally:
        handle.remove()
    rows = vis.any(-1)
    np.testing.assert_allclose(probs[0].sum(-1)[:, rows], 0.5, rtol=1e-5)
    # the hooks are gone: another capture sees the plain model
    _, probs, _, _ = ta.capture_training(cfg, runs["sqrt"], batch)
    np.testing.assert_allclose(probs[0].sum(-1)[:, rows], 1.0, rtol=1e-5)


def test_audit_training_runs_in_order_with_its_snapshots(saved: Path) -> None:
    from engine.probe.scale_fit import STANDARD, UNSCALED

    snaps = list(ta.audit_training(saved, examples=6))
    assert [(s.stage, s.fraction, s.done) for s in snaps] == [
        ("run none", 0.0, False), ("run none", 0.5, False), ("run sqrt", 0.5, False),
        ("run sqrt", 1.0, True)]
    results = [s.result for s in snaps if s.result is not None]
    none, sqrt = results
    assert (none.run, sqrt.run) == ("none", "sqrt")
    assert none.layer_verdicts == [UNSCALED] and sqrt.layer_verdicts == [STANDARD]
    assert sqrt.model_name == "Training lab (weights.pt, step 7)"
    assert sqrt.model_type == "training-lab" and sqrt.extra == {"step": 7}
    assert (sqrt.n_layers, sqrt.n_heads, sqrt.d_k, sqrt.d_model) == (1, 2, 8, 16)
    assert sqrt.causal is False and sqrt.n_tokens == _batch(CFG).inputs.shape[1]
    assert sqrt.note == "the lab's own attention code on 6 probe examples (task retrieval, seed 0)"
    assert np.isnan(sqrt.declared_scale).all() and sqrt.declared_scale.shape == (1,)
    assert sqrt.tokens == () and sqrt.inject == {}
    only = [s.result.run for s in ta.audit_training(saved, rules=("sqrt",), examples=6)
            if s.result is not None]
    assert only == ["sqrt"]
    with pytest.raises(ConfigError) as err:
        list(ta.audit_training(saved, rules=("sqrt", "dk", "x")))
    assert err.value.field == "run"
    assert err.value.message == f"no run 'dk' in {str(saved)!r}; it has none, sqrt"


def test_the_default_probe_is_16_examples(saved: Path) -> None:
    r = next(s.result for s in ta.audit_training(saved, rules=("sqrt",)) if s.result is not None)
    assert "on 16 probe examples" in r.note



# -- words and edges the first round left --------------------------------------------------------


def test_the_archive_messages_and_where_data_pkl_may_sit(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a torch file")
    assert _refusal(bad).problem == ("not a Training lab weights file (not a torch.save archive: "
                                     "File is not a zip file)")
    for name in ("data.pkl", "a/b/data.pkl"):  # top level or nested: the object part is found
        err = _refusal(_zip(tmp_path / "n.pt", {name: b"garbage"}))
        assert "no single data.pkl" not in err.problem, name


def test_torch_load_s_reason_is_its_first_line_cut_at_200(tmp_path: Path, monkeypatch) -> None:
    path = _zip(tmp_path / "g.pt", {"a/data.pkl": b"garbage"})
    try:
        torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:200]
    assert _refusal(path).problem == f"not a Training lab weights file ({first})"

    def raising(exc):
        def load(*_a, **_k):
            raise exc
        return load

    monkeypatch.setattr(torch, "load", raising(ValueError("  " + "x" * 300 + "\nsecond line")))
    assert _refusal(path).problem == f"not a Training lab weights file ({'x' * 200})"
    monkeypatch.setattr(torch, "load", raising(RuntimeError()))
    assert _refusal(path).problem == "not a Training lab weights file (RuntimeError)"


def test_more_refusals_in_words(tmp_path: Path) -> None:
    states = _states()
    name = "blocks.0.attn.w_q.weight"
    path = tmp_path / "w.pt"
    torch.save(_with(states, "sqrt", lambda s: s.update({name: "x"})), path)
    err = _refusal(path)
    assert (err.where, err.problem) == (f"weights.sqrt.{name}", "must be a tensor, got str")
    torch.save({"config": CFG.to_dict(), "weights": {}}, path)
    assert (_refusal(path).where, _refusal(path).problem) == ("weights", "holds no runs")


def test_small_values_still_measure_a_factor_of_1(saved: Path) -> None:
    """Values 1e-3 of their size: sum (W V)^2 is far below 1, and the factor the values see is
    still 1 (the clamp only guards against 0)."""
    cfg, runs, _ = ta.load_training_runs(saved)
    model = runs["sqrt"]
    with torch.no_grad():
        model.blocks[0].attn.w_v.weight.mul_(1e-3)
    batch = _batch(cfg)
    _, probs, vis, _ = ta.capture_training(cfg, model, batch)
    np.testing.assert_allclose(probs[0].sum(-1)[:, vis.any(-1)], 1.0, rtol=1e-5)


def test_an_audit_is_reproducible_timed_cancellable_and_complete(saved: Path) -> None:
    import time

    from engine.errors import Cancelled

    t0 = time.perf_counter()
    a = next(s.result for s in ta.audit_training(saved, rules=("sqrt",), examples=6)
             if s.result is not None)
    wall = time.perf_counter() - t0
    b = next(s.result for s in ta.audit_training(saved, rules=("sqrt",), examples=6)
             if s.result is not None)
    assert np.array_equal(a.grid(), b.grid())  # the probe stream, not the global RNG
    assert 0 <= a.forward_s <= wall and 0 <= a.fit_s <= wall
    assert len(a.head_fits) == len(a.layer_fits) == len(a.head_verdicts) == 1
    assert len(a.head_verdicts[0]) == 2
    # the probe batch is the trainer's probe stream (seed, tag 2)
    from engine.probe.audit import fit_layers
    from engine.training.tasks import make_batch, stream_seed

    cfg, runs, _ = ta.load_training_runs(saved)
    batch = make_batch(cfg, 6, torch.Generator().manual_seed(stream_seed(cfg.seed, 2)))
    scores, probs, vis, _ = ta.capture_training(cfg, runs["sqrt"], batch)
    _, lf, _, _ = fit_layers(scores, probs, vis, cfg.head_dim, cfg.d_model, lambda: False)
    assert lf[0].scale[0] == a.layer_fits[0].scale[0]
    with pytest.raises(Cancelled):
        list(ta.audit_training(saved, rules=("sqrt",), examples=6, cancelled=lambda: True))


def test_a_recall_run_is_causal(tmp_path: Path) -> None:
    cfg = TrainingConfig(task="recall", pairs=3, d_model=16, heads=2, classes=4,
                         scalings=("sqrt",), steps=2, log_every=2, batch=4, probe_size=2,
                         hist_bins=20, device="cpu")
    path = tmp_path / "weights.pt"
    torch.save({"config": cfg.to_dict(), "step": 1, "weights": _states(cfg)}, path)
    r = next(s.result for s in ta.audit_training(path, examples=4) if s.result is not None)
    assert r.causal is True and r.n_tokens == 7
