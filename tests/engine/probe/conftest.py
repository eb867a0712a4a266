"""Tiny randomly initialised models built from a config (no files, no downloads)."""

from __future__ import annotations

import pytest


def tiny_bert(seed: int = 0, layers: int = 2, heads: int = 4, width: int = 32, vocab: int = 64,
              positions: int = 64, init: float = 0.02):
    transformers = pytest.importorskip("transformers")
    import torch

    from engine.probe.loader import info_from_config, wrap_model

    cfg = transformers.BertConfig(
        vocab_size=vocab, hidden_size=width, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=2 * width, max_position_embeddings=positions, initializer_range=init,
        attn_implementation="eager")
    torch.manual_seed(seed)
    net = transformers.BertModel(cfg)
    return wrap_model(net, info_from_config(net.config, "tiny-bert"))


def tiny_gpt2(seed: int = 0, layers: int = 2, heads: int = 4, width: int = 32, vocab: int = 64,
              positions: int = 64, **extra):
    transformers = pytest.importorskip("transformers")
    import torch

    from engine.probe.loader import info_from_config, wrap_model

    cfg = transformers.GPT2Config(vocab_size=vocab, n_embd=width, n_layer=layers, n_head=heads,
                                  n_positions=positions, bos_token_id=0, eos_token_id=0,
                                  attn_implementation="eager", **extra)
    torch.manual_seed(seed)
    net = transformers.GPT2Model(cfg)
    return wrap_model(net, info_from_config(net.config, "tiny-gpt2"))


@pytest.fixture
def make_bert():
    """The tiny BERT builder (a fixture, so test modules need not import this conftest)."""
    return tiny_bert


@pytest.fixture
def make_gpt2():
    return tiny_gpt2


@pytest.fixture
def folder_at_write(monkeypatch):
    """folder_at_write(module, writer, folder): a list that receives ``folder``'s entry names,
    sorted, each time ``module.writer`` is called (how an export is staged while it writes)."""

    def spy_on(module, writer: str, folder) -> list[list[str]]:
        seen: list[list[str]] = []
        real = getattr(module, writer)

        def spy(*args, **kwargs):
            seen.append(sorted(p.name for p in folder.iterdir()))
            return real(*args, **kwargs)

        monkeypatch.setattr(module, writer, spy)
        return seen

    return spy_on
