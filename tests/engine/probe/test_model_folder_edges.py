"""A model folder's checks at their edges: each size limit from both sides, the sizes' sections in
order, the layer and width cross-checks, every dtype's bytes in a safetensors header, the header
length and data offsets exactly at the file's end, the memory estimate by hand, the library
files' limits. Small files written here; nothing is built, no torch."""

from __future__ import annotations

import io
import json
import os
import struct
from pathlib import Path

import pytest

import engine.probe.model_folder as mf
from engine.errors import ConfigError, FileFormatError

#: bytes per element, from the safetensors format's dtypes
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
               "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}


@pytest.fixture(autouse=True)
def _no_memory_check(monkeypatch):
    monkeypatch.setattr(mf, "available_bytes", lambda: None)


def _st(folder: Path, tensors: dict[str, list[int]], name: str = "model.safetensors",
        dtype: str = "F32", extra: dict | None = None, pad: int = 0) -> Path:
    header, offset = {}, 0
    for tname, shape in tensors.items():
        n = DTYPE_BYTES[dtype] * (int(__import__("math").prod(shape)))
        header[tname] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    header.update(extra or {})
    raw = json.dumps(header).encode()
    path = folder / name
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset + pad))
    return path


def _dir(tmp_path: Path, cfg, tensors=None, sub: str = "m") -> Path:
    folder = tmp_path / sub
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    _st(folder, tensors if tensors is not None else {"x.weight": [2, 2]})
    return folder


def _refused(folder: Path, **kw) -> str:
    with pytest.raises(FileFormatError) as err:
        mf.inspect_model_dir(folder, **kw)
    assert err.value.option == "model" and "\n" not in str(err.value)
    return str(err.value)


GPT2 = {"model_type": "gpt2", "n_layer": 3, "n_head": 4, "n_embd": 64}


# -- what the config says -------------------------------------------------------------------

def test_the_info_read_from_a_config(tmp_path):
    folder = _dir(tmp_path, {**GPT2, "model_type": " gpt2 ", "architectures": ["GPT2Model"],
                             "_name_or_path": "  org/tiny  "})
    info = mf.inspect_model_dir(folder)
    assert (info.path, info.name, info.model_type, info.architectures) == (
        folder, "org/tiny", "gpt2", ("GPT2Model",))
    assert (info.n_layers, info.n_heads, info.d_model, info.max_positions, info.head_dim,
            info.n_params, info.d_k) == (3, 4, 64, 512, None, 4, 16)
    assert mf.inspect_model_dir(folder, name="mine").name == "mine"
    other = _dir(tmp_path, {**GPT2, "_name_or_path": "   "}, sub="the-folder")
    assert mf.inspect_model_dir(other).name == "the-folder"
    plain = _dir(tmp_path, GPT2, sub="plain")
    assert mf.inspect_model_dir(plain).architectures == ()
    no_heads = mf.ModelInfo(folder, "n", "t", (), 2, None, 64, 512)
    assert no_heads.d_k is None
    assert mf.ModelInfo(folder, "n", "t", (), 2, 4, None, 512).d_k is None
    assert mf.ModelInfo(folder, "n", "t", (), 2, 4, 64, 512, head_dim=32).d_k == 32


def test_config_refusals_word_for_word(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError) as err:
        mf.inspect_model_dir(empty)
    assert err.value.message == f"{str(empty)!r} is not a Hugging Face model folder (no config.json)"
    cfg = str(tmp_path / "a" / "config.json")
    assert _refused(_dir(tmp_path, [1, 2], sub="a")) == (
        f"{cfg}: top level: must be a JSON object, not a list of 2 items")
    cfg = str(tmp_path / "b" / "config.json")
    assert _refused(_dir(tmp_path, {**GPT2, "model_type": "  "}, sub="b")) == (
        f"{cfg}: model_type: must be a non-empty string, got '  '")
    cfg = str(tmp_path / "c" / "config.json")
    assert _refused(_dir(tmp_path, {**GPT2, "auto_map": {}}, sub="c")) == (
        f"{cfg}: auto_map: this model needs Python code of its own (trust_remote_code); "
        "the lab runs no code from a model folder")
    cfg = str(tmp_path / "d" / "config.json")
    assert _refused(_dir(tmp_path, {**GPT2, "n_head": 5}, sub="d")) == (
        f"{cfg}: n_head: 5 heads do not divide the width 64")


@pytest.mark.parametrize("key, what, hi", [
    ("n_layer", "layers", 1_000), ("n_head", "heads", 4_096), ("n_embd", "width", 131_072),
    ("head_dim", "head_dim", 4_096), ("n_positions", "positions", 10_000_000),
    ("vocab_size", "vocab", 10_000_000)])
def test_each_size_limit_from_both_sides(tmp_path, key, what, hi):
    base = {"model_type": "x", "n_layer": 2, "n_head": 4, "n_embd": 4096, "head_dim": 8}
    info = mf.inspect_model_dir(_dir(tmp_path, {**base, key: hi}, sub="ok"))
    assert {"n_layer": info.n_layers, "n_head": info.n_heads, "n_embd": info.d_model,
            "head_dim": info.head_dim, "n_positions": info.max_positions}.get(key, hi) == hi
    msg = _refused(_dir(tmp_path, {**base, key: hi + 1}, sub="bad"))
    assert msg.endswith(f": {key}: {hi + 1} is out of range 1 to {hi:,}"), msg


def test_no_limit_spelled_0_or_minus_1_takes_the_default(tmp_path):
    for i, v in enumerate((0, -1)):
        info = mf.inspect_model_dir(_dir(tmp_path, {**GPT2, "n_positions": v, "vocab_size": v},
                                         sub=f"m{i}"))
        assert info.max_positions == 512
    msg = _refused(_dir(tmp_path, {**GPT2, "n_layer": 0}, sub="zero"))
    assert msg.endswith("n_layer: 0 is out of range 1 to 1,000")
    # a whole float is refused: transformers would reach range() with it
    msg = _refused(_dir(tmp_path, {**GPT2, "n_positions": 64.0}, sub="float"))
    assert "n_positions" in msg and "whole number from 1 to 10,000,000" in msg


def test_a_required_size_missing_names_its_other_spellings():
    with pytest.raises(FileFormatError) as err:
        mf._size(("f.json", "", {}), "layers", ("a", "b", "c"))
    assert str(err.value) == ("f.json: a: required, but missing (the number of layers; also "
                              "read as b, c)")
    with pytest.raises(FileFormatError) as err:
        mf._size(("f.json", "text_config", {}), "vocab", ("v",))
    assert str(err.value) == "f.json: text_config.v: required, but missing (the number of vocab)"
    assert mf._size(("f", "", {}), "vocab", ("v",), optional=True) is None
    assert mf._size(("f", "", {"b": 7, "c": 9}), "layers", ("a", "b", "c")) == 7
    assert mf._key(("f", "s", {"b": 1, "c": 2}), ("a", "b", "c")) == "s.b"
    assert mf._key(("f", "", {}), ("a", "b")) == "a"


def test_the_sizes_section_in_order(tmp_path):
    sec = {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16}
    both = {"model_type": "x", "text_config": {**sec, "hidden_size": 32},
            "encoder": {**sec, "num_attention_heads": 4}}
    info = mf.inspect_model_dir(_dir(tmp_path, both, sub="both"))
    assert (info.n_heads, info.d_model) == (2, 32)  # text_config first
    skip = {"model_type": "x", "text_config": None, "encoder": {**sec, "num_attention_heads": 4}}
    assert mf.inspect_model_dir(_dir(tmp_path, skip, sub="skip")).n_heads == 4
    top = {"model_type": "x", "hidden_size": 8, "text_config": sec}  # one top-level size: top
    info = mf.inspect_model_dir(_dir(tmp_path, top, sub="top"))
    assert (info.n_layers, info.d_model) == (None, 8)
    dec = {"model_type": "x", "decoder": {**sec, "num_attention_heads": "x"}}
    assert "decoder.num_attention_heads" in _refused(_dir(tmp_path, dec, sub="dec"))


def test_head_dim_keys(tmp_path):
    info = mf.inspect_model_dir(_dir(tmp_path, {**GPT2, "head_dim": None, "d_kv": 16}, sub="a"))
    assert info.head_dim == 16
    info = mf.inspect_model_dir(_dir(tmp_path, {**GPT2, "head_dim": 32, "d_kv": 8}, sub="b"))
    assert info.head_dim == 32 and info.d_k == 32
    # a head width given: heads need not divide the width
    assert mf.inspect_model_dir(_dir(tmp_path, {**GPT2, "n_head": 5, "d_kv": 8}, sub="c")).n_heads == 5
    msg = _refused(_dir(tmp_path, {**GPT2, "d_kv": 0}, sub="d"))
    assert msg.endswith("d_kv: 0 is out of range 1 to 4,096")


# -- against the weights --------------------------------------------------------------------

def test_layers_counted_in_the_weights_from_both_sides(tmp_path):
    names = {"model.layers.4.q.weight": [1], "blocks.2.y": [1], "h.1.z": [2], "enc.layer.3": [1],
             "xlayers.9.a": [1], "layers9.b": [1], "block.x.c": [1]}
    n, layers, widths = mf._weights(_dir(tmp_path, {}, names, sub="w"))
    assert (n, layers, widths) == (8, 5, set())
    bart = {"model_type": "bart", "encoder_layers": 3, "decoder_layers": 5, "d_model": 8,
            "encoder_attention_heads": 2}
    ok = _dir(tmp_path, bart, {f"decoder.layers.{i}.w": [1] for i in range(5)}, sub="ok")
    assert mf.inspect_model_dir(ok).n_layers == 3
    bad = _dir(tmp_path, bart, {f"decoder.layers.{i}.w": [1] for i in range(4)}, sub="bad")
    assert _refused(bad).endswith(": encoder_layers: 5 layers, but the weights hold 4")
    gpt = _dir(tmp_path, GPT2, {"h.0.w": [1], "h.2.w": [1]}, sub="gpt")
    assert mf.inspect_model_dir(gpt).n_params == 2
    assert _refused(_dir(tmp_path, GPT2, {"h.1.w": [1]}, sub="gpt1")).endswith(
        ": n_layer: 3 layers, but the weights hold 2")


def test_weights_of_several_files_and_of_torch(tmp_path):
    folder = _dir(tmp_path, {}, {"a.layers.0.w": [2, 3]}, sub="multi")
    _st(folder, {"a.layers.6.w": [5]}, name="model-00002.safetensors")
    assert mf._weights(folder) == (11, 7, set())
    for i, suffix in enumerate((".bin", ".pt", ".pth")):
        torch_dir = tmp_path / f"t{i}"
        torch_dir.mkdir()
        (torch_dir / f"pytorch_model{suffix}").write_bytes(b"x")
        assert mf._weights(torch_dir) == (None, None, set())
    none = tmp_path / "none"
    none.mkdir()
    with pytest.raises(ConfigError) as err:
        mf._weights(none)
    assert err.value.message == f"{str(none)!r}: no weights file (model.safetensors)"


def test_embedding_widths_against_the_config(tmp_path):
    names = {"bert.embeddings.word_embeddings.weight": [10, 48], "wte.weight": [10, 32],
             "model.embed_tokens.weight": [10, 40], "shared.weight": [10, 56],
             "gpt_neox.embed_in.weight": [10, 24], "embeddings.word_embeddings.bias": [48],
             "lm_head.weight": [10, 8]}
    assert mf._weights(_dir(tmp_path, {}, names, sub="w"))[2] == {48, 32, 40, 56, 24}
    two = {"wte.weight": [10, 48], "shared.weight": [10, 32]}
    msg = _refused(_dir(tmp_path, GPT2, two, sub="two"))
    assert msg.endswith(": n_embd: 64, but the weights' embeddings are 32 wide")
    assert mf.inspect_model_dir(_dir(tmp_path, {**GPT2, "n_embd": 48}, two, sub="fits")).d_model == 48
    for key in ("word_embed_proj_dim", "embedding_size", "input_embedding_size", "embed_dim"):
        own = _dir(tmp_path, {**GPT2, key: 32}, two, sub=key)
        assert mf.inspect_model_dir(own).d_model == 64


# -- the safetensors header ---------------------------------------------------------------

def test_every_dtype_has_its_bytes(tmp_path):
    for i, dtype in enumerate(DTYPE_BYTES):
        folder = tmp_path / f"d{i}"
        folder.mkdir()
        path = _st(folder, {"t": [3, 2]}, dtype=dtype)
        assert mf._header_tensors(path) == [("t", (3, 2))]


def test_header_length_and_offsets_at_the_files_end(tmp_path):
    # a header filling the file exactly (no tensor data) is read; one byte longer is not
    raw = json.dumps({"__metadata__": {"format": "pt"}}).encode()
    path = tmp_path / "a.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    assert mf._header_tensors(path) == []
    path.write_bytes(struct.pack("<Q", len(raw) + 1) + raw)
    size = 8 + len(raw)
    with pytest.raises(FileFormatError) as err:
        mf._header_tensors(path)
    assert str(err.value) == (f"{path}: header length {len(raw) + 1:,} does not fit the file "
                              f"({size:,} bytes)")
    path.write_bytes(struct.pack("<Q", 1) + b"{")  # length 1 of 9 bytes: fits, then bad JSON
    with pytest.raises(FileFormatError) as err:
        mf._header_tensors(path)
    assert str(err.value).startswith(f"{path}: header")
    path.write_bytes(b"\x01\x00\x00\x00\x00\x00\x00")
    with pytest.raises(FileFormatError) as err:
        mf._header_tensors(path)
    assert str(err.value) == f"{path}: too short for a safetensors file"


def test_header_length_limit(tmp_path, monkeypatch):
    raw = json.dumps({}).encode()
    path = tmp_path / "a.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(100))
    monkeypatch.setattr(mf, "HEADER_MAX_BYTES", len(raw))
    assert mf._header_tensors(path) == []
    monkeypatch.setattr(mf, "HEADER_MAX_BYTES", len(raw) - 1)
    with pytest.raises(FileFormatError, match="does not fit the file"):
        mf._header_tensors(path)


@pytest.mark.parametrize("offsets, ok", [
    ([0, 24], True), ([8, 32], True), ([9, 33], False), ([0, 23], False), ([24, 0], False),
    ([8, 31], False)])
def test_data_offsets_inside_the_data(tmp_path, offsets, ok):
    """A float32 tensor of 6 values (24 bytes) in 32 bytes of data."""
    header = {"t": {"dtype": "F32", "shape": [2, 3], "data_offsets": offsets}}
    raw = json.dumps(header).encode()
    path = tmp_path / "a.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(32))
    if ok:
        assert mf._header_tensors(path) == [("t", (2, 3))]
    else:
        with pytest.raises(FileFormatError) as err:
            mf._header_tensors(path)
        assert str(err.value) == (f"{path}: header.t: data offsets {offsets} do not match its "
                                  "shape or the file (truncated?)")


def test_a_header_that_is_no_object_or_a_bad_entry(tmp_path):
    path = tmp_path / "a.safetensors"
    raw = b"[1, 2]"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(FileFormatError) as err:
        mf._header_tensors(path)
    assert str(err.value) == f"{path}: header: must be a JSON object, not a list of 2 items"
    raw = json.dumps({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}}).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(8))
    with pytest.raises(FileFormatError) as err:
        mf._header_tensors(path)
    assert str(err.value).startswith(f"{path}: header.t.data_offsets: ")
    raw = b'{"t": {"a": {"b": {"c": {"d": 1}}}}}'  # deeper than the header's 4 levels
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(FileFormatError) as err:
        mf._header_tensors(path)
    assert str(err.value).startswith(f"{path}: header") and "nested" in str(err.value)


# -- memory -------------------------------------------------------------------------------

def test_the_memory_estimate_by_hand(tmp_path):
    counted = mf.ModelInfo(tmp_path, "n", "t", (), 2, 4, 8, 512, n_params=1000)
    # 1000 x 4 bytes x 1.2 + 2 layers x 4 arrays x 4 heads x 10^2 x 4 bytes + 200 MB
    assert mf.estimate_bytes(counted, 2, 100, 10) == 4800 + 12_800 + 200_000_000
    guessed = mf.ModelInfo(tmp_path, "n", "t", (), 2, None, 8, 512)
    # (2 x 12 x 64 + 100 x 8) params x 4.8 = 11,212.8; one head: 3,200
    assert mf.estimate_bytes(guessed, 2, 100, 10) == 200_014_412
    nothing = mf.ModelInfo(tmp_path, "n", "t", (), None, None, None, 512)
    assert mf.estimate_bytes(nothing, 0, 100, 10) == 200_000_000


def test_the_memory_check_from_both_sides(tmp_path, monkeypatch):
    info = mf.ModelInfo(tmp_path, "n", "t", (), 2, 4, 8, 512)
    monkeypatch.setattr(mf, "estimate_bytes", lambda *a: 1_800_000_000)
    monkeypatch.setattr(mf, "available_bytes", lambda: 2_000_000_000)
    mf.check_memory(info, 2, 10, 77, "f.json")  # exactly 90 %
    monkeypatch.setattr(mf, "available_bytes", lambda: 1_999_999_000)
    with pytest.raises(FileFormatError) as err:
        mf.check_memory(info, 2, 10, 77, "f.json")
    assert str(err.value) == ("f.json: the model needs about 1.8 GB to load and audit 77 "
                              "tokens; 2.0 GB are available")
    monkeypatch.setattr(mf, "available_bytes", lambda: None)
    mf.check_memory(info, 2, 10, 77, "f.json")


def test_the_memory_check_reads_the_folders_sizes(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(mf, "check_memory", lambda *a: seen.append(a))
    cfg = {"model_type": "t5", "num_layers": 2, "num_decoder_layers": 3, "d_model": 8,
           "num_heads": 2, "vocab_size": 99}
    folder = _dir(tmp_path, cfg, {f"decoder.block.{i}.w": [1] for i in range(3)})
    info = mf.inspect_model_dir(folder, tokens=33)
    assert seen == [(info, 3, 99, 33, str(folder / "config.json"))]
    seen.clear()
    mf.inspect_model_dir(_dir(tmp_path, {"model_type": "t"}, sub="bare"))
    assert seen[0][1:4] == (0, 0, 512)


def test_available_bytes_from_meminfo_or_pages(monkeypatch):
    text = {"now": "MemTotal: 9 kB\nMemAvailable:   2048 kB\n"}

    def fake_open(path, encoding=None):
        assert path == "/proc/meminfo" and encoding == "ascii"
        if text["now"] is None:
            raise OSError("no /proc")
        return io.StringIO(text["now"])

    monkeypatch.undo()  # the real function
    monkeypatch.setattr(mf, "open", fake_open, raising=False)
    pages = {"SC_AVPHYS_PAGES": 10, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])
    assert mf.available_bytes() == 2048 * 1024
    for fallback in ("MemTotal: 9 kB\n", "MemAvailable: lots kB\n", "MemAvailable:\n", None):
        text["now"] = fallback
        assert mf.available_bytes() == 40_960

    def broken(name):
        raise ValueError(name)

    monkeypatch.setattr(os, "sysconf", broken)
    assert mf.available_bytes() is None


# -- the files a library reads whole ----------------------------------------------------------

#: the most megabytes of each file a library reads whole (the module's table, written out)
LIMITS = {name: mb * 1_000_000 for names, mb in (
    (("tokenizer.json",), 100),
    (("tokenizer_config.json", "added_tokens.json"), 16),
    (("vocab.json", "vocab.txt", "merges.txt", "bpe.codes", "cl100k.tiktoken"), 32),
    (("special_tokens_map.json", "generation_config.json", "chat_template.json",
      "chat_template.jinja", "preprocessor_config.json", "processor_config.json"), 4),
    (("model.safetensors.index.json", "pytorch_model.bin.index.json", "spiece.model",
      "x.SPM"), 64)) for name in names}


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        fh.truncate(size)


@pytest.mark.parametrize("name", LIMITS)
def test_each_library_file_limit_from_both_sides(tmp_path, name):
    limit = LIMITS[name]
    _sparse(tmp_path / name, limit)
    mf.check_library_files(tmp_path)
    _sparse(tmp_path / name, limit + 1)
    with pytest.raises(FileFormatError) as err:
        mf.check_library_files(tmp_path)
    assert err.value.file == str(tmp_path / name) and err.value.option == "model"
    suffix = Path(name).suffix
    kind = f"{suffix} vocabulary" if suffix.lower() in (".model", ".spm", ".tiktoken") else name
    assert f"more than the {limit:,} any {kind} needs" in str(err.value)


def test_a_folder_that_cannot_be_listed(tmp_path):
    not_dir = tmp_path / "file"
    not_dir.write_text("x")
    with pytest.raises(ConfigError) as err:
        mf.check_library_files(not_dir)
    assert err.value.field == "model"
    assert err.value.message == f"cannot list {str(not_dir)!r}: Not a directory"


# -- what the first run left (fields, spellings, sizes of 1) ------------------------------------

def test_refusals_name_the_model_option_and_the_file(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError) as err:
        mf.inspect_model_dir(empty)
    assert err.value.field == "model"
    with pytest.raises(ConfigError) as err:
        mf._weights(empty)
    assert err.value.field == "model"
    folder = _dir(tmp_path, GPT2, {"h.0.w": [1]})
    with pytest.raises(FileFormatError) as err:
        mf.inspect_model_dir(folder)
    assert err.value.file == str(folder / "config.json")  # the layers' refusal
    folder = _dir(tmp_path, {**GPT2, "n_embd": 48}, {"wte.weight": [10, 32]}, sub="w")
    with pytest.raises(FileFormatError) as err:
        mf.inspect_model_dir(folder)
    assert err.value.file == str(folder / "config.json")  # the widths' refusal
    st = tmp_path / "d" / "model.safetensors"
    st.mkdir(parents=True)  # a folder where the weights should be
    with pytest.raises(FileFormatError) as err:
        mf._header_tensors(st)
    assert err.value.option == "model" and err.value.where == ""


def test_positions_spellings_sizes_of_1_and_names(tmp_path):
    for i, key in enumerate(("max_position_embeddings", "n_positions", "max_seq_len", "n_ctx")):
        info = mf.inspect_model_dir(_dir(tmp_path, {**GPT2, key: 77}, sub=f"p{i}"))
        assert info.max_positions == 77, key
    info = mf.inspect_model_dir(_dir(tmp_path, {**GPT2, "n_positions": 1, "n_layer": 1,
                                                "_name_or_path": None}, {"h.0.w": [1]}, sub="one"))
    assert (info.max_positions, info.n_layers, info.name) == (1, 1, "one")
    assert mf._weights(tmp_path / "one")[1] == 1  # layer 0 alone is one layer
    msg = _refused(_dir(tmp_path, {"model_type": "x", "text_config": {"num_hidden_layers": 0}},
                        sub="sec"))
    assert msg.endswith(": text_config.num_hidden_layers: 0 is out of range 1 to 1,000")
    msg = _refused(_dir(tmp_path, {"model_type": "x", "vocab_size": "a"}, sub="top"))
    assert "config.json: vocab_size: " in msg
    with pytest.raises(FileFormatError) as err:
        mf._size(("f.json", "", {}), "layers", ("a", "b"))
    assert str(err.value).endswith("(the number of layers; also read as b)")


def test_a_config_over_its_size_is_refused_as_the_models_config(tmp_path):
    folder = tmp_path / "big"
    folder.mkdir()
    _sparse(folder / "config.json", 4_000_001)
    msg = _refused(folder)
    assert "4,000,001 bytes, more than the 4,000,000 any model's config.json needs" in msg


def test_header_edges_the_first_run_left(tmp_path):
    path = tmp_path / "a.safetensors"
    # metadata first, then a tensor: the tensor is read; an empty tensor at the data's end
    raw = json.dumps({"__metadata__": {"f": "pt"}, "e": {"dtype": "F32", "shape": [0],
                                                          "data_offsets": [4, 4]},
                      "t": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]}}).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(4))
    assert mf._header_tensors(path) == [("e", (0,)), ("t", (4,))]
    # a length with the top bit set is a huge unsigned number, not a negative one
    path.write_bytes(struct.pack("<Q", 2**63 + 5) + raw)
    with pytest.raises(FileFormatError) as err:
        mf._header_tensors(path)
    assert f"header length {2**63 + 5:,} does not fit" in str(err.value)
    assert err.value.where == ""
    path.write_bytes(b"\x01\x00")
    with pytest.raises(FileFormatError) as err:
        mf._header_tensors(path)
    assert err.value.where == ""
    raw = b'{"t": {"a": {"b": {"c": {"d": 1}}}}}'
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(FileFormatError) as err:
        mf._header_tensors(path)
    assert err.value.where == "header.t.a.b.c" and err.value.problem == "nested more than 4 levels deep"


def test_a_weights_file_that_cannot_be_read(tmp_path):
    class Broken(type(tmp_path)):
        def open(self, *a, **k):
            raise OSError(5, "Input/output error")

    path = tmp_path / "a.safetensors"
    path.write_bytes(bytes(16))
    with pytest.raises(FileFormatError) as err:
        mf._header_tensors(Broken(path))
    assert str(err.value) == f"{path}: cannot read: Input/output error"
    assert err.value.where == "" and err.value.option == "model"


def test_the_memory_check_passes_its_sizes_and_rounds_gb(tmp_path, monkeypatch):
    info = mf.ModelInfo(tmp_path, "n", "t", (), 2, 4, 8, 512)
    seen = []
    monkeypatch.setattr(mf, "estimate_bytes", lambda *a: seen.append(a) or 1_050_000_000)
    monkeypatch.setattr(mf, "available_bytes", lambda: 1_050_000_000)
    with pytest.raises(FileFormatError) as err:
        mf.check_memory(info, 3, 99, 64, "f.json")
    assert seen == [(info, 3, 99, 64)] and err.value.where == ""
    assert str(err.value) == ("f.json: the model needs about 1.1 GB to load and audit 64 tokens; "
                              "1.1 GB are available")
