"""Reading a GGUF file's attention keys, on small files written here with the gguf package (a few
keys and one tensor each): the keys read, the ones left out, the head width's fallback, and each
refusal in one line naming its field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.errors import ConfigError
from engine.probe.port import gguf_meta, gguf_write
from engine.probe.port.gguf_meta import GGUF_HINT, GgufMeta, first_int, read_gguf

gguf = pytest.importorskip("gguf")


def _write(path: Path, arch: str = "llama", tensors=None, **keys) -> Path:
    w = gguf.GGUFWriter(str(path), arch)
    for key, v in keys.items():
        k = key if key.startswith("general") else f"{arch}.{key.replace('__', '.')}"
        if isinstance(v, list):
            w.add_array(k, v)
        else:  # a string, uint32 or float32 as the port's own writer stores them
            gguf_write._add(w, k, v, gguf)
    for name, (a, qtype) in (tensors or {"token_embd.weight": (np.ones((2, 32), np.float32),
                                                               None)}).items():
        if qtype is None:
            w.add_tensor(name, a)
        else:
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_the_attention_keys_are_read_and_nothing_else(tmp_path) -> None:
    q8 = gguf.GGMLQuantizationType.Q8_0
    path = _write(tmp_path / "a.gguf", "qwen2", tensors={
        "blk.0.attn_q.weight": (np.ones((2, 32), np.float32), q8),
        "token_embd.weight": (np.ones((2, 4), np.float32), None)},
        block_count=2, embedding_length=64, attention__head_count=[4, 4],
        attention__key_length=16, attention__scale=0.5, rope__scaling__type="yarn",
        rope__scaling__factor=4.0, rope__scaling__original_context_length=32,
        feed_forward_length=128, attention__layer_norm_rms_epsilon=1e-6)
    meta = read_gguf(path)
    assert meta.path == path and meta.arch == "qwen2"
    assert meta.values == {"block_count": 2, "embedding_length": 64,
                           "attention.head_count": [4, 4], "attention.key_length": 16,
                           "attention.scale": 0.5, "rope.scaling.type": "yarn",
                           "rope.scaling.factor": 4.0, "rope.scaling.original_context_length": 32}
    assert meta.tensor_types == {"blk.0.attn_q.weight": "Q8_0", "token_embd.weight": "F32"}
    assert (meta.n_heads, meta.n_kv_heads, meta.key_length) == (4, None, 16)


def test_every_attention_key_is_read_under_its_architecture(tmp_path) -> None:
    keys = {k.replace(".", "__"): i + 1 for i, k in enumerate(gguf_meta.ATTENTION_KEYS)}
    meta = read_gguf(_write(tmp_path / "a.gguf", "gemma2", **keys))
    assert meta.values == {k: i + 1 for i, k in enumerate(gguf_meta.ATTENTION_KEYS)}
    assert len(gguf_meta.ATTENTION_KEYS) == 17
    # another architecture's keys are not this file's
    other = read_gguf(_write(tmp_path / "b.gguf", "llama", **{"general.x": 1}))
    assert other.values == {}


def test_a_home_relative_path_is_expanded(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    _write(tmp_path / "h.gguf", block_count=3)
    meta = read_gguf("~/h.gguf")
    assert meta.path == tmp_path / "h.gguf" and meta.get("block_count") == 3


def test_refusals_name_the_field_in_one_line(tmp_path, monkeypatch) -> None:
    missing = tmp_path / "none.gguf"
    with pytest.raises(ConfigError) as err:
        read_gguf(missing, "port")
    assert (err.value.field, err.value.message) == ("port", f"{str(missing)!r} is not a file")
    with pytest.raises(ConfigError) as err:
        read_gguf(tmp_path)
    assert err.value.field == "gguf" and "is not a file" in err.value.message
    text = tmp_path / "t.gguf"
    text.write_text("not a gguf file at all")
    with pytest.raises(ConfigError) as err:
        read_gguf(text, "port")
    assert err.value.field == "port"
    assert err.value.message.startswith(f"{str(text)!r} is not a GGUF file (")
    assert "\n" not in str(err.value)


class _Reader:
    """A stand-in for gguf.GGUFReader: raises ``error`` or has ``fields`` (name -> value, or an
    exception its contents() raises)."""

    error: Exception | None = None
    fields: dict = {}

    def __init__(self, path, mode):
        assert mode == "r"
        if self.error is not None:
            raise self.error
        self.tensors = []

    def get_field(self, key):
        if key not in self.fields:
            return None
        v = self.fields[key]

        class F:
            def contents(self):
                if isinstance(v, Exception):
                    raise v
                return v
        return F()


def _with_reader(monkeypatch, error=None, fields=None):
    reader = type("R", (_Reader,), {"error": error, "fields": fields or {}})
    monkeypatch.setattr(gguf, "GGUFReader", reader)


def test_the_reader_s_error_is_its_first_line_cut(tmp_path, monkeypatch) -> None:
    path = tmp_path / "x.gguf"
    path.write_bytes(b"x")
    _with_reader(monkeypatch, ValueError("  " + "e" * 300 + "\nsecond line"))
    with pytest.raises(ConfigError) as err:
        read_gguf(path)
    assert err.value.message == f"{str(path)!r} is not a GGUF file ({'e' * 200})"
    _with_reader(monkeypatch, KeyError())
    with pytest.raises(ConfigError) as err:
        read_gguf(path)
    assert err.value.message == f"{str(path)!r} is not a GGUF file (KeyError)"


def test_no_architecture_and_unreadable_values(tmp_path, monkeypatch) -> None:
    path = tmp_path / "x.gguf"
    path.write_bytes(b"x")
    for arch in (None, "", 3):
        fields = {} if arch is None else {"general.architecture": arch}
        _with_reader(monkeypatch, fields=fields)
        with pytest.raises(ConfigError) as err:
            read_gguf(path, "port")
        assert (err.value.field, err.value.message) == (
            "port", f"{str(path)!r} has no general.architecture")
    _with_reader(monkeypatch, fields={"general.architecture": "llama", "llama.block_count": 2,
                                      "llama.attention.head_count": ValueError("bad"),
                                      "llama.attention.key_length": 0})
    meta = read_gguf(path)
    # a value that cannot be read is left out; a value 0 is kept
    assert meta.values == {"block_count": 2, "attention.key_length": 0}
    _with_reader(monkeypatch, fields={"general.architecture": ValueError("bad")})
    with pytest.raises(ConfigError, match=r"has no general\.architecture"):
        read_gguf(path)


def test_without_the_gguf_package_the_refusal_names_the_extra(tmp_path, monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(ConfigError) as err:
        read_gguf(tmp_path / "x.gguf", "port")
    assert (err.value.field, err.value.message) == (
        "port", f"reading a GGUF file needs the optional 'deploy' extra: {GGUF_HINT}")
    assert GGUF_HINT == 'pip install "attention-scaling-lab[deploy]"'


def _meta(**values) -> GgufMeta:
    return GgufMeta(Path("x.gguf"), "llama", {k.replace("__", "."): v for k, v in values.items()}, {})


def test_head_counts_and_width() -> None:
    m = _meta(attention__head_count=[8, 8], attention__head_count_kv=2, embedding_length=256)
    assert (m.n_heads, m.n_kv_heads, m.key_length) == (8, 2, 32)  # 256 / 8
    assert m.get("absent") is None and m.get("absent", 5) == 5
    assert _meta(attention__key_length=48, embedding_length=256,
                 attention__head_count=8).key_length == 48
    # key_length 0 falls back to embedding_length / head_count (a floor)
    assert _meta(attention__key_length=0, embedding_length=100,
                 attention__head_count=8).key_length == 12
    assert _meta(embedding_length=256).key_length is None
    assert _meta(attention__head_count=8).key_length is None
    assert _meta(embedding_length=256, attention__head_count=0).key_length is None


@pytest.mark.parametrize("value, expected", [
    (4, 4), (4.0, 4), (4.9, 4), ([6, 8], 6), ((7,), 7), ([], None), (None, None), (True, None),
    ("4", None), ([True], None)])
def test_first_int(value, expected) -> None:
    assert first_int(value) == expected
