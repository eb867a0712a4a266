"""The zoo's tables from hand-made audit results (no model built): one row per block with its
features, declared and measured s * sqrt(d_k), soft-cap and verdict; the injection rows; the
markers; the cache of audits; the command line. Expected text written by hand."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

from engine.probe import zoo


def _site(block, features=(), softcap=None, matches=True, known=True, source="config",
          mismatch=""):
    return types.SimpleNamespace(block=block, features=list(features), softcap=softcap,
                                 matches_declared=matches, declared_known=known,
                                 declared_source=source, mismatch=mismatch)


class _Result:
    """What table_rows reads of an audit: d_k 16 (sqrt 4)."""

    def __init__(self, sites, declared, measured, verdicts, mismatched=()):
        self.sites, self.d_k = sites, 16
        self.declared_scale = declared
        self._measured = np.asarray(measured, dtype=float)
        self.layer_verdicts = verdicts
        self._mismatched = list(mismatched)

    def layer_scale_x_sqrt_dk(self):
        return self._measured

    def mismatched_layers(self):
        return self._mismatched


def _entry(name="Demo"):
    return zoo.ZooEntry(name, "BertConfig", {})


def test_rows_per_block_in_order_with_features_caps_and_verdicts():
    sites = [
        _site("encoder", ["bidirectional", "RoPE (longer than the text)"], source="1/sqrt(d)"),
        _site("encoder", ["bidirectional", "soft-cap 50"],
              softcap=np.array([50.0, np.inf, 30.0, 70.0]), source="1/sqrt(d)"),
        _site("decoder", ["causal"], softcap=np.array([np.inf, np.inf]), known=False,
              source="unknown"),
        _site("cross", ["cross-attention"], matches=False, source="module attribute"),
    ]
    declared = [0.25, 0.25, 0.5, 0.125]
    r = _Result(sites, declared, [1.00004, 0.99996, 2.0, 0.5],
                ["as declared (config)", "as declared (config)", "declared unknown",
                 "MISMATCH: x4"])
    rows = zoo.table_rows(_entry(), r)
    assert [row["block"] for row in rows] == ["encoder", "decoder", "cross"]
    assert [row["architecture"] for row in rows] == ["Demo", "", ""]
    enc, dec, cross = rows
    assert enc["features"] == "bidirectional; RoPE (not reached); soft-cap 50"
    assert enc["declared"] == "1 (1/sqrt(d))"  # 0.25 x sqrt(16), once for both layers
    assert enc["measured"] == "1, 1"  # four significant digits
    assert enc["soft-cap"] == "50"  # the median of the finite caps (30, 50, 70)
    assert enc["verdict"] == "as declared"
    assert dec["declared"] == "unknown (unknown)" and dec["measured"] == "2"
    assert dec["soft-cap"] == "not reached"
    assert dec["verdict"] == "declared unknown: declared unknown"
    assert cross["declared"] == "0.5 (module attribute)" and cross["soft-cap"] == ""
    assert cross["verdict"] == "MISMATCH: MISMATCH: x4"
    assert cross["measured"] == "0.5"


def test_four_significant_digits_and_two_caps_sorted():
    sites = [_site("decoder", softcap=np.array([12.345])), _site("decoder",
                                                                 softcap=np.array([9.87]))]
    r = _Result(sites, [0.25, 0.3], [1.23456, 123456.0], ["as declared (x)", "as declared (y)"])
    row = zoo.table_rows(_entry(), r)[0]
    assert row["measured"] == "1.235, 1.235e+05"
    assert row["declared"] == "1, 1.2 (config)"
    assert row["soft-cap"] == "12.3, 9.87"  # sorted as text
    assert row["verdict"] == "as declared"


def test_state_and_verdict_cell():
    r = types.SimpleNamespace(sites=[_site("d"), _site("d", known=False),
                                     _site("d", matches=False)])
    assert zoo._state(r, [0]) == "as declared"
    assert zoo._state(r, [0, 1]) == "declared unknown"
    assert zoo._state(r, [0, 2]) == "MISMATCH"
    assert zoo._state(r, [1, 2]) == "MISMATCH"
    assert zoo._verdict_cell("MISMATCH", ["as declared (a)", "x2", "y"]) == "MISMATCH: x2; y"
    assert zoo._verdict_cell("as declared", ["as declared (a)"]) == "as declared"
    # only a verdict that starts with the words counts as saying nothing more
    assert zoo._verdict_cell("s", ["not as declared"]) == "s: not as declared"


def test_markdown_tables_escape_bars():
    row = {c: c.upper() for c in zoo.COLUMNS}
    row["features"] = "a|b"
    assert zoo.markdown([row]).split("\n") == [
        "| architecture | block | features | declared | measured | soft-cap | verdict |",
        "|---|---|---|---|---|---|---|",
        "| ARCHITECTURE | BLOCK | a/b | DECLARED | MEASURED | SOFT-CAP | VERDICT |"]
    inj = {"architecture": "L", "injected": "layer 1: twice", "found in": "layer 1",
           "audit says": "x|y"}
    assert zoo.markdown_inject([inj]).split("\n") == [
        "| architecture | injected | found in | audit says |", "|---|---|---|---|",
        "| L | layer 1: twice | layer 1 | x/y |"]


def test_injection_rows_say_where_the_bug_was_found():
    calls = []

    def audits(name, bugs):
        calls.append((name, bugs))
        (layer, _kind), = bugs.items()
        found = [] if name == "OPT" else [layer, layer + 1] if name == "T5" else [layer]
        sites = [_site("d", mismatch=f"m{i}") for i in range(6)]
        return types.SimpleNamespace(mismatched_layers=lambda: found, sites=sites,
                                     layer_verdicts=[f"v{i}" for i in range(6)])

    rows = zoo.inject_rows(audits)
    assert calls == [(n, {layer: k}) for n, layer, k in zoo.INJECT_DEMO]
    assert rows[0] == {"architecture": "Llama", "injected": "layer 1: twice",
                       "found in": "layer 1", "audit says": "v1; m1"}
    t5 = rows[2]
    assert t5["injected"] == "layer 3: after_softmax" and t5["found in"] == "layer 3, layer 4"
    opt = rows[6]
    assert opt["architecture"] == "OPT" and opt["found in"] == "nowhere"
    assert opt["audit says"] == "v1; m1"


def test_splice_replaces_both_tables_and_refuses_a_missing_marker():
    doc = (f"a\n{zoo.BEGIN}\nold\n{zoo.END}\nb\n{zoo.BEGIN_INJ}\nold2\n{zoo.END_INJ}\nc")
    assert zoo.splice(doc, ("T1 \\1", "T2")) == (
        f"a\n{zoo.BEGIN}\nT1 \\1\n{zoo.END}\nb\n{zoo.BEGIN_INJ}\nT2\n{zoo.END_INJ}\nc")
    with pytest.raises(ValueError) as err:
        zoo.splice(f"{zoo.BEGIN}\n{zoo.END}", ("x", "y"))
    assert str(err.value) == f"{zoo.BEGIN_INJ} ... {zoo.END_INJ} not found"
    with pytest.raises(ValueError, match="zoo-table:begin"):
        zoo.splice(f"{zoo.BEGIN_INJ}\n{zoo.END_INJ}", ("x", "y"))


def test_the_cache_audits_each_entry_and_bugs_once(monkeypatch):
    seen = []
    monkeypatch.setattr(zoo, "audit_entry", lambda e, bugs: seen.append((e.name, bugs)) or
                        (e.name, dict(bugs)))
    audits = zoo.cached_audits()
    assert audits("Llama", {}) == ("Llama", {})
    assert audits("Llama", {}) == ("Llama", {})
    assert audits("Llama", {1: "twice", 0: "none"}) == ("Llama", {1: "twice", 0: "none"})
    assert audits("Llama", {0: "none", 1: "twice"}) == ("Llama", {1: "twice", 0: "none"})
    assert audits("T5", {}) == ("T5", {})
    assert seen == [("Llama", {}), ("Llama", {1: "twice", 0: "none"}), ("T5", {})]


def test_generated_tables_and_the_command_line(monkeypatch, tmp_path, capsys):
    names = []

    def audits(name, bugs):
        return ("audit of", name, bugs)

    def fake_rows(entry, result):
        names.append(entry.name)
        assert result == ("audit of", entry.name, {})
        return [{c: f"{entry.name}" if c == "architecture" else "-" for c in zoo.COLUMNS}]

    def fake_inject(given):
        assert given is audits
        return [{"architecture": "A", "injected": "i", "found in": "f", "audit says": "s"}]

    monkeypatch.setattr(zoo, "table_rows", fake_rows)
    monkeypatch.setattr(zoo, "inject_rows", fake_inject)
    monkeypatch.setattr(zoo, "cached_audits", lambda: audits)
    t1, t2 = zoo.generated_tables(audits)
    assert names == [e.name for e in zoo.ZOO]
    assert t1.split("\n")[2] == "| BERT | - | - | - | - | - | - |"
    assert t2.split("\n")[2] == "| A | i | f | s |"
    assert zoo.main([]) == 0
    assert capsys.readouterr().out == t1 + "\n\n" + t2 + "\n"
    doc = tmp_path / "a.md"
    doc.write_text(f"x\n{zoo.BEGIN}\n{zoo.END}\n{zoo.BEGIN_INJ}\n{zoo.END_INJ}\n", "utf-8")
    assert zoo.main(["--write", str(doc)]) == 0
    assert capsys.readouterr().out == ""
    assert doc.read_text("utf-8") == (f"x\n{zoo.BEGIN}\n{t1}\n{zoo.END}\n{zoo.BEGIN_INJ}\n{t2}\n"
                                      f"{zoo.END_INJ}\n")


def test_entries_ids_and_documented_scales():
    ids = zoo.zoo_ids()
    assert ids == [int(i) for i in np.random.default_rng(3).integers(1, 64, size=24)]
    assert zoo.zoo_ids(5, seed=1) == [int(i) for i in np.random.default_rng(1).integers(1, 64, 5)]
    by = {e.name: e for e in zoo.ZOO}
    inv = by["GPT-2, scale_attn_by_inverse_layer_idx"]
    assert [inv.documented_at(i) for i in range(3)] == [1.0, 0.5, 1 / 3]
    two = zoo.ZooEntry("x", "C", {}, documented=(1.0, 2.0))
    assert (two.documented_at(0), two.documented_at(1)) == (1.0, 2.0)
    assert by["Granite"].documented_at(5) == pytest.approx(0.25 * math.sqrt(8))
    assert by["BERT"].qk_std == 0.15 and by["BERT"].note == "the 2017 rule, encoder"
    assert by["BERT"].kwargs["vocab_size"] == 64 and by["BERT"].documented == (1.0,)
    assert zoo.ZooEntry("x", "C", {}).features == {}
    assert zoo._small(a=1) == {"vocab_size": 64, "a": 1}
    assert zoo._small(vocab_size=9) == {"vocab_size": 9}


def test_audit_entry_reads_the_zoo_ids_with_its_bugs(monkeypatch):
    import engine.probe.audit as audit

    got = []
    monkeypatch.setattr(zoo, "build", lambda entry: ("built", entry.name))
    monkeypatch.setattr(audit, "audit_ids", lambda loaded, ids, bugs: got.append(
        (loaded, ids, bugs)) or "result")
    assert zoo.audit_entry(_entry("E"), {1: "twice"}) == "result"
    assert zoo.audit_entry(_entry("F")) == "result"
    assert got == [(("built", "E"), zoo.zoo_ids(), {1: "twice"}), (("built", "F"), zoo.zoo_ids(), {})]


def test_build_redraws_the_attention_projections_only():
    """The zoo's BERT, the smallest entry: q, k, v and the output projection of each site get
    std qk_std from the generator seeded seed + 1; norms and embeddings keep their init."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    entry = next(e for e in zoo.ZOO if e.name == "BERT")
    entry = zoo.ZooEntry(entry.name, entry.config, {**entry.kwargs, "num_hidden_layers": 1},
                         qk_std=0.4)
    loaded = zoo.build(entry, seed=2)
    net = loaded.model
    site = loaded.tap.modules()[0]
    gen = torch.Generator().manual_seed(3)
    linears = [m for m in site.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) >= 3
    for lin in linears:  # redrawn in module order
        assert torch.equal(lin.weight, torch.randn(lin.weight.shape, generator=gen) * 0.4)
    norms = [m for m in net.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms and all(torch.equal(n.weight, torch.ones_like(n.weight)) for n in norms)
    emb = net.embeddings.word_embeddings.weight
    assert 0.015 < float(emb.detach().std()) < 0.025  # BERT's init range 0.02, not redrawn
    assert loaded.info.name == "BERT"
    torch.manual_seed(0)  # the default seed is 0: transformers' own init under it
    plain = transformers.AutoModel.from_config(transformers.BertConfig(**entry.kwargs))
    assert torch.equal(zoo.build(entry).model.embeddings.word_embeddings.weight,
                       plain.embeddings.word_embeddings.weight)


def test_main_help_names_its_option(capsys):
    with pytest.raises(SystemExit) as done:
        zoo.main(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "] Regenerate the zoo tables of docs/architectures.md options:" in text
    assert "--write FILE splice the tables into FILE (between its markers); default: print them" \
        in text


def test_build_keeps_an_embedding_inside_an_attention_site():
    """T5's relative position bias is an Embedding inside its attention module: it keeps
    transformers' own init (the same seed, no redraw), while q gets std qk_std."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    entry = next(e for e in zoo.ZOO if e.name == "T5")
    entry = zoo.ZooEntry(entry.name, entry.config, {**entry.kwargs, "num_layers": 1,
                                                    "num_decoder_layers": 1}, qk_std=0.5)
    loaded = zoo.build(entry, seed=4)
    torch.manual_seed(4)
    plain = transformers.AutoModel.from_config(transformers.T5Config(**entry.kwargs),
                                               attn_implementation="eager")
    bias = loaded.model.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight
    want = plain.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight
    assert torch.equal(bias, want)
    q = loaded.model.encoder.block[0].layer[0].SelfAttention.q.weight
    assert 0.45 < float(q.detach().std()) < 0.55  # 1,024 draws: SE of the std 0.011
