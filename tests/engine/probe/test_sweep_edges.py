"""The sweep's classification, table and command line on stubs (no model is built): each class's
words, the order of its checks, the token ids and their wrap at a small vocabulary, the table's
text, the markers, the one-line messages at their limits (expected text written by hand)."""

from __future__ import annotations

import sys
import types
import warnings

import numpy as np
import pytest

from engine.errors import Cancelled, ConfigError
from engine.probe import sweep as sw

torch = pytest.importorskip("torch")

# -- the one-line messages --------------------------------------------------------------------


def test_one_line_collapses_whitespace_and_cuts_at_its_limit():
    assert sw._one_line(ValueError("a \n b\t c")) == "a b c"
    assert sw._one_line(KeyError()) == "KeyError"  # no text: the exception's name
    assert sw._one_line(ValueError("x" * 200)) == "x" * 200
    assert sw._one_line(ValueError("x" * 201)) == "x" * 200 + "…"
    assert sw._msg(ValueError("y" * 300)) == "y" * 300
    assert sw._msg(ValueError("y" * 301)) == "y" * 300 + "…"


# -- the summary and the table ----------------------------------------------------------------

def test_summary_of_every_class_and_of_no_text_model():
    rows = [sw.SweepRow("a", sw.AS_DECLARED), sw.SweepRow("b", sw.AS_DECLARED),
            sw.SweepRow("c", sw.FAILED), sw.SweepRow("d", sw.NOT_BUILT),
            sw.SweepRow("e", sw.NOT_BUILT), sw.SweepRow("f", sw.NOT_BUILT),
            sw.SweepRow("g", sw.REFUSED), sw.SweepRow("h", sw.DIFFERS),
            sw.SweepRow("v", sw.NOT_TEXT), sw.SweepRow("w", sw.NOT_TEXT)]
    # 3 of 8 audited: 37.5 % printed as 38 %
    assert sw.summary(rows) == (
        "8 text model types of 10 registered: 2 as declared, 1 differs, 1 refused, "
        "1 audit failed, 3 not built; audited 3 of 8 (38 %); 2 not text")
    assert sw.summary([sw.SweepRow("a", sw.DIFFERS)]).endswith("audited 1 of 1 (100 %); 0 not text")
    assert sw.summary([sw.SweepRow("v", sw.NOT_TEXT)]) == (
        "0 text model types of 1 registered: 0 as declared, 0 differs, 0 refused, "
        "0 audit failed, 0 not built; audited 0 of 0 (0 %); 1 not text")


def test_markdown_rows_escape_bars_and_explain_only_what_differs():
    assert "gpt_oss" in sw.EXPLAINED
    rows = [sw.SweepRow("gpt_oss", sw.DIFFERS, "layers 1 differ"),
            sw.SweepRow("inkling2_text", sw.AS_DECLARED, "2 attention layers"),
            sw.SweepRow("zzz", sw.DIFFERS, "a|b\nc"),
            sw.SweepRow("vit", sw.NOT_TEXT, "not text")]
    lines = sw.markdown(rows).split("\n")
    assert lines[1:4] == ["", "| model_type | class | what the audit said |", "|---|---|---|"]
    assert lines[4] == (f"| `gpt_oss` | differs | layers 1 differ (explained: "
                        f"{sw.EXPLAINED['gpt_oss']}) |")
    assert lines[5] == "| `inkling2_text` | as declared | 2 attention layers |"
    assert lines[6] == "| `zzz` | differs | a/b c |"
    assert len(lines) == 7 and lines[0].startswith("3 text model types of 4 registered")


def test_parse_reads_only_between_the_markers():
    doc = "\n".join(["| `outside` | refused | x |", sw.BEGIN, "summary",
                     "| `a` | as declared | 2 layers |", "| `b` | audit failed | y |",
                     "| `c` | Differs | upper case is no class |", "|`d` | refused | x |",
                     sw.END, "| `after` | refused | x |"])
    assert sw.parse(doc) == {"a": "as declared", "b": "audit failed"}
    # the first end marker closes the table; rows before a second begin marker count
    row = "| `{}` | refused | x |"
    doc = "\n".join([sw.BEGIN, row.format("a"), sw.BEGIN, row.format("b"), sw.END,
                     row.format("c"), sw.END])
    assert sw.parse(doc) == {"a": "refused", "b": "refused"}


def test_splice_replaces_the_table_and_refuses_a_doc_without_markers():
    doc = f"top\n{sw.BEGIN}\nold\nrows\n{sw.END}\nbottom\n"
    assert sw.splice(doc, "new \\1 table") == f"top\n{sw.BEGIN}\nnew \\1 table\n{sw.END}\nbottom\n"
    with pytest.raises(ValueError, match=r"sweep-table:begin .* not found"):
        sw.splice(f"{sw.BEGIN} only", "t")


# -- the generator --------------------------------------------------------------------------

def test_the_sweep_checks_cancel_between_types_and_silences_warnings(monkeypatch):
    seen = []

    def one(mt):
        warnings.warn("tiny config", UserWarning, stacklevel=1)
        seen.append(mt)
        return sw.SweepRow(mt, sw.AS_DECLARED)

    monkeypatch.setattr(sw, "sweep_one", one)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r.model_type for r in sw.sweep(["a", "b"])] == ["a", "b"]
        seen.clear()
        gen = sw.sweep(["a", "b", "c"], cancelled=lambda: len(seen) >= 2)
        assert next(gen).model_type == "a" and next(gen).model_type == "b"
        with pytest.raises(Cancelled):
            next(gen)
    assert seen == ["a", "b"]


def test_sweep_one_times_the_classification(monkeypatch):
    clock = iter([10.0, 12.5])
    monkeypatch.setattr(sw.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(sw, "_classify", lambda mt: (sw.REFUSED, f"why {mt}"))
    assert sw.sweep_one("m") == sw.SweepRow("m", sw.REFUSED, "why m", 2.5)


def test_model_type_lists_are_sorted(monkeypatch):
    every = sw.all_model_types()
    assert every == sorted(every) and "bert" in every and "vit" in every
    monkeypatch.setattr(sw, "is_text", lambda mt: mt in ("vit", "bert", "albert"))
    assert sw.text_model_types() == ["albert", "bert", "vit"]


# -- _classify on stubs ---------------------------------------------------------------------

class _Proj(torch.nn.Linear):
    def __init__(self):
        super().__init__(2, 2)


class SelfAttnBlock(torch.nn.Module):  # named like attention, no q/k projections (RWKV)
    def __init__(self):
        super().__init__()
        self.mix = torch.nn.Linear(2, 2)


class QKAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj, self.k_proj = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)


class _Net(torch.nn.Module):
    def __init__(self, *children, languages=None):
        super().__init__()
        self.body = torch.nn.ModuleList(children)
        self.config = types.SimpleNamespace()
        if languages is not None:
            self.config.languages = languages


def _net_from(module_name, monkeypatch, *children, defines=False, **kw):
    """A net whose class lives in a module of its own (that defines an attention class or not)."""
    mod = types.ModuleType(module_name)
    cls = type("Net", (_Net,), {"__module__": module_name})
    mod.Net = cls
    if defines:
        mod.LocalAttention = type("LocalAttention", (), {})
    monkeypatch.setitem(sys.modules, module_name, mod)
    return cls(*children, **kw)


@pytest.fixture
def stubs(monkeypatch):
    """_classify's collaborators replaced: is_text, tiny_model, build and _audit."""
    import engine.probe.shrink as shrink

    state = {"text": True, "tiny": None, "net": None, "audit": (sw.AS_DECLARED, "2 layers"),
             "seed": None}

    def tiny_model(mt):
        if isinstance(state["tiny"], Exception):
            raise state["tiny"]
        return types.SimpleNamespace(config="cfg")

    def build(cfg):
        state["seed"] = torch.initial_seed()
        if isinstance(state["net"], Exception):
            raise state["net"]
        return state["net"]

    monkeypatch.setattr(sw, "is_text", lambda mt: state["text"])
    monkeypatch.setattr(shrink, "tiny_model", tiny_model)
    monkeypatch.setattr(shrink, "build", build)
    monkeypatch.setattr(sw, "_audit", lambda mt, net: state["audit"] if mt == "x" else (
        sw.FAILED, f"audited as {mt!r}"))
    torch.manual_seed(123)
    yield state
    torch.manual_seed(0)


def test_classify_not_text_and_not_built(stubs, monkeypatch):
    stubs["text"] = False
    assert sw._classify("x") == (sw.NOT_TEXT, "no causal, masked or seq2seq LM task, or reads "
                                              "images/audio")
    stubs["text"] = True
    stubs["tiny"] = ConfigError("model_type", "over the budget")
    assert sw._classify("x") == (sw.NOT_BUILT, "over the budget")
    stubs["tiny"] = None
    stubs["net"] = RuntimeError("shape\n mismatch")
    assert sw._classify("x") == (sw.NOT_BUILT, "does not build: shape mismatch")
    assert stubs["seed"] == sw.SEED


def test_classify_passes_the_audit_through_and_sets_a_language(stubs, monkeypatch):
    calls = []
    net = _net_from("fake_xmod", monkeypatch, QKAttention(), languages=["de_DE", "fr_XX"])
    net.set_default_language = calls.append
    stubs["net"] = net
    assert sw._classify("x") == (sw.AS_DECLARED, "2 layers")
    assert calls == ["de_DE"]
    net2 = _net_from("fake_xmod2", monkeypatch, QKAttention())
    net2.set_default_language = calls.append
    stubs["net"] = net2
    stubs["audit"] = (sw.DIFFERS, "layer 1")
    assert sw._classify("x") == (sw.DIFFERS, "layer 1")
    assert calls == ["de_DE", "en_XX"]


@pytest.mark.parametrize("klass", [sw.REFUSED, sw.FAILED])
def test_classify_a_model_without_attention(stubs, monkeypatch, klass):
    stubs["audit"] = (klass, "no sites")
    # no module named attention: refused as having none, unless its modeling file defines one
    stubs["net"] = _net_from("fake_ssm", monkeypatch, _Proj())
    assert sw._classify("x") == (sw.REFUSED, "no attention")
    stubs["net"] = _net_from("fake_hybrid", monkeypatch, _Proj(), defines=True)
    assert sw._classify("x") == (sw.NOT_BUILT, "the tiny model keeps none of its attention layers")
    stubs["net"] = _net_from("fake_attn", monkeypatch, _Proj())
    sys.modules["fake_attn"].CrossAttnBlock = type("CrossAttnBlock", (), {})  # "Attn" alone
    assert sw._classify("x") == (sw.NOT_BUILT, "the tiny model keeps none of its attention layers")
    sys.modules["fake_attn"].CrossAttnBlock = "Attention, not a class"
    assert sw._classify("x") == (sw.REFUSED, "no attention")


def test_classify_attention_without_query_and_key(stubs, monkeypatch):
    stubs["net"] = _net_from("fake_rwkv", monkeypatch, SelfAttnBlock())
    stubs["audit"] = (sw.FAILED, "no sites")
    assert sw._classify("x") == (sw.REFUSED, "no softmax attention (no query and key projections)")
    stubs["audit"] = (sw.FAILED, "no attention sites found")  # the audit's own word stays
    assert sw._classify("x") == (sw.FAILED, "no attention sites found")
    stubs["audit"] = (sw.REFUSED, "outside the interface")  # refused stays refused
    assert sw._classify("x") == (sw.REFUSED, "outside the interface")
    stubs["net"] = _net_from("fake_qk", monkeypatch, QKAttention())
    stubs["audit"] = (sw.FAILED, "no sites")  # q and k exist: a gap of the audit
    assert sw._classify("x") == (sw.FAILED, "no sites")


def test_named_attention_reads_class_names():
    for cls_name in ("Attention", "Attn", "SelfAttn"):
        mod = type(f"My{cls_name}X", (torch.nn.Module,), {})()
        assert sw._named_attention(torch.nn.Sequential(mod))
    assert not sw._named_attention(torch.nn.Sequential(torch.nn.Linear(1, 1)))


# -- _audit on stubs ------------------------------------------------------------------------

def _ids():
    """The documented draw: 24 integers in [5, 100) from default_rng(3)."""
    return [int(i) for i in np.random.default_rng(3).integers(5, 100, size=24)]


class _Site:
    def __init__(self, mismatch=""):
        self.mismatch = mismatch


class _Result:
    def __init__(self, n, m, differ=(), unknown=(), mismatch="x2 too large"):
        self.n_layers, self.n_attention = n, m
        self._differ, self._unknown = list(differ), list(unknown)
        self.sites = [_Site(f"{mismatch} at {i}" if i in differ else "") for i in range(n)]

    def mismatched_layers(self):
        return self._differ

    def unknown_layers(self):
        return self._unknown


@pytest.fixture
def audit_stubs(monkeypatch):
    import engine.probe.audit as audit
    import engine.probe.loader as loader

    state = {"result": _Result(2, 2), "ids": None, "sharpen": None, "raise": None}

    def audit_ids(loaded, ids):
        state["ids"] = ids
        if state["raise"] is not None:
            raise state["raise"]
        return state["result"]

    monkeypatch.setattr(loader, "info_from_config", lambda cfg, mt: ("info", mt))
    monkeypatch.setattr(loader, "wrap_model", lambda net, info: ("loaded", info))
    monkeypatch.setattr(sw, "sharpen", lambda loaded, std, seed: state.update(
        sharpen=(loaded, std, seed)))
    monkeypatch.setattr(audit, "audit_ids", audit_ids)
    return state


_NOCFG = types.SimpleNamespace(config="cfg")


class _Emb(torch.nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, 2)
        self.config = "cfg"

    def get_input_embeddings(self):
        return self.emb


def test_audit_reads_the_documented_ids_after_sharpening(audit_stubs):
    net = _Emb(1000)
    assert sw._audit("llama", net) == (sw.AS_DECLARED, "2 attention layers")
    assert audit_stubs["ids"] == _ids()
    assert audit_stubs["sharpen"] == (("loaded", ("info", "llama")), 0.3, 1)
    assert sw._vocab(net) == 1000 and sw._vocab(object()) is None


def test_audit_wraps_the_ids_at_a_small_vocabulary(audit_stubs):
    ids = _ids()
    top = max(ids)
    sw._audit("x", _Emb(top + 1))  # every id fits
    assert audit_stubs["ids"] == ids
    sw._audit("x", _Emb(top))  # the largest does not: every id wrapped into [5, vocab)
    wrapped = audit_stubs["ids"]
    assert wrapped == [i if i < top else 5 + (i - 5) % (top - 5) for i in ids]
    sw._audit("x", _Emb(64))  # ESM C
    assert audit_stubs["ids"] == [5 + (i - 5) % 59 for i in ids]
    assert min(audit_stubs["ids"]) >= 5 and max(audit_stubs["ids"]) <= 63


def test_audit_words_of_each_result(audit_stubs):
    audit_stubs["result"] = _Result(2, 3)
    assert sw._audit("x", _NOCFG) == (sw.AS_DECLARED, "2 of 3 attention layers")
    audit_stubs["result"] = _Result(3, 3, unknown=[0, 2])
    assert sw._audit("x", _NOCFG) == (sw.AS_DECLARED, "3 attention layers; declared unknown in 2")
    audit_stubs["result"] = _Result(4, 4, differ=[1, 3], unknown=[0])
    assert sw._audit("x", _NOCFG) == (
        sw.DIFFERS, "4 attention layers; layers 1, 3 differ: x2 too large at 1")


def test_audit_refusals_and_failures(audit_stubs):
    cases = [
        (ConfigError("model", "it computes attention outside transformers' attention interface"),
         (sw.REFUSED, "attention outside the interface, no adapter")),
        (ConfigError("model", "Foo has no softmax attention: a linear recurrence; there is no "
                              "site"),
         (sw.REFUSED, "no softmax attention: a linear recurrence")),
        (ConfigError("model", "Foo has no softmax attention: a has no softmax attention: b; "
                              "there is no q; there is no k"),
         (sw.REFUSED, "no softmax attention: a has no softmax attention: b")),
        (ConfigError("model", "has no softmax attention"),
         (sw.REFUSED, "no softmax attention (no query and key projections)")),
        (ConfigError("tokens", "too  few\ntokens"), (sw.FAILED, "tokens: too few tokens")),
        (IndexError("out of\nrange"), (sw.FAILED, "IndexError: out of range")),
    ]
    for exc, want in cases:
        audit_stubs["raise"] = exc
        assert sw._audit("x", _NOCFG) == want


# -- sharpen --------------------------------------------------------------------------------

class RMSNormLike(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3, 3))


class _Site4(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3, 3))  # the module's own: kept
        self.q = torch.nn.Linear(3, 4, bias=True)
        self.k = torch.nn.Linear(4, 3)
        self.norm = RMSNormLike()
        self.emb = torch.nn.Embedding(5, 3)
        self.ln = torch.nn.LayerNorm(3)


def test_sharpen_redraws_the_projections_only_in_order():
    site = _Site4()
    keep = {n: p.detach().clone() for n, p in site.named_parameters()}
    sw.sharpen(types.SimpleNamespace(tap=types.SimpleNamespace(modules=lambda: [site])), 0.5, 7)
    gen = torch.Generator().manual_seed(7)
    want_q = torch.randn((4, 3), generator=gen) * 0.5
    want_k = torch.randn((3, 4), generator=gen) * 0.5
    assert torch.equal(site.q.weight, want_q) and torch.equal(site.k.weight, want_k)
    for name in ("weight", "q.bias", "k.bias", "norm.weight", "emb.weight", "ln.weight"):
        assert torch.equal(dict(site.named_parameters())[name], keep[name]), name


# -- the command line -----------------------------------------------------------------------

def test_main_prints_or_writes_the_table(monkeypatch, tmp_path, capsys):
    rows = {"a": sw.SweepRow("a", sw.AS_DECLARED, "2 attention layers", 1.25),
            "b": sw.SweepRow("b", sw.NOT_BUILT, "too big", 0.5)}
    monkeypatch.setattr(sw, "sweep_one", lambda mt: rows[mt])
    monkeypatch.setattr(sw, "all_model_types", lambda: ["b", "a"])
    assert sw.main(["--only", "a"]) == 0
    out, err = capsys.readouterr()
    assert out == sw.markdown([rows["a"]]) + "\n"
    assert err == f"{'a':32s} as declared     1.25s 2 attention layers\n"
    doc = tmp_path / "arch.md"
    doc.write_text(f"head\n{sw.BEGIN}\nold\n{sw.END}\ntail\n", encoding="utf-8")
    assert sw.main(["--write", str(doc)]) == 0  # every type, in the listed order
    out, err = capsys.readouterr()
    assert out == ""
    assert doc.read_text(encoding="utf-8") == (
        f"head\n{sw.BEGIN}\n{sw.markdown([rows['b'], rows['a']])}\n{sw.END}\ntail\n")
    assert err.splitlines()[0] == f"{'b':32s} not built       0.50s too big"


def test_main_help_names_its_options(capsys):
    with pytest.raises(SystemExit) as done:
        sw.main(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("Sweep every transformers model type through the audit; print or write "
            "docs/architectures.md's table") in text
    assert "--write FILE splice the table into FILE" in text
    assert "--only [ONLY ...] these model types only (default: all)" in text


def test_main_sweeps_several_types_given(monkeypatch, capsys):
    monkeypatch.setattr(sw, "sweep_one", lambda mt: sw.SweepRow(mt, sw.REFUSED, "r"))
    assert sw.main(["--only", "b", "a"]) == 0
    out = capsys.readouterr().out
    assert out.split("\n")[4:6] == ["| `b` | refused | r |", "| `a` | refused | r |"]
