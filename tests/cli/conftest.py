"""Tiny random transformers model folders for the probe-model and audit-model CLI tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

WORDS = ("the a of to and why is are attention head heads scale scaled score scores query key "
         "keys softmax width variance trained model one").split()


def save_tiny_model(folder: Path, arch: str, layers: int = 2, heads: int = 4, positions: int = 64,
                    gpt2_init: float = 0.3, config: object = None, **extra) -> Path:
    """A tiny random model folder (BERT, GPT-2, T5, LongT5 or a decoder config like llama; with
    arch "config", the model of the transformers ``config`` given, any architecture) with a
    word-level tokenizer, as save_pretrained writes it (large initial weights: the logits vary,
    so every head can be audited)."""
    transformers = pytest.importorskip("transformers")
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    vocab = {w: i for i, w in enumerate(specials + list(WORDS) + list(".,?"))}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    torch.manual_seed(0)
    if arch == "config":  # (its vocabulary must hold the tokenizer's: len(WORDS) + 7 ids)
        net = transformers.AutoModel.from_config(config)
    elif arch == "bert":
        tk.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
        net = transformers.BertModel(transformers.BertConfig(
            vocab_size=len(vocab), hidden_size=32, num_hidden_layers=layers,
            num_attention_heads=heads, intermediate_size=64, max_position_embeddings=positions,
            initializer_range=0.3))
    elif arch == "gpt2":
        net = transformers.GPT2Model(transformers.GPT2Config(
            vocab_size=len(vocab), n_embd=32, n_layer=layers, n_head=heads, n_positions=positions,
            bos_token_id=0, eos_token_id=0, initializer_range=gpt2_init, **extra))
    elif arch == "t5":
        net = transformers.T5Model(transformers.T5Config(
            vocab_size=len(vocab), d_model=32, d_kv=32 // heads, d_ff=64, num_layers=layers,
            num_heads=heads, decoder_start_token_id=0, pad_token_id=0, initializer_factor=2.0,
            **extra))
    elif arch == "longt5":  # local attention in the encoder: computed inline
        net = transformers.LongT5Model(transformers.LongT5Config(
            vocab_size=len(vocab), d_model=32, d_kv=32 // heads, d_ff=64, num_layers=layers,
            num_heads=heads, decoder_start_token_id=0, pad_token_id=0, initializer_factor=2.0,
            encoder_attention_type="local", local_radius=4, **extra))
    else:  # any decoder config with the usual names (llama, qwen2, mistral, ...)
        cfg = transformers.AutoConfig.for_model(
            arch, vocab_size=len(vocab), hidden_size=32, num_hidden_layers=layers,
            num_attention_heads=heads, intermediate_size=64, max_position_embeddings=positions,
            initializer_range=gpt2_init, **extra)
        net = transformers.AutoModel.from_config(cfg)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]",
                                               pad_token="[PAD]")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # save_pretrained's bar would land in the tests' stderr
    net.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def save_tiny() -> Callable[..., Path]:
    return save_tiny_model
