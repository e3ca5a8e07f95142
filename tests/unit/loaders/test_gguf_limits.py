"""GGUF reader limits (issue 20): each test is a malformed file that used to end in a
raw exception, a hang or a wrong tensor, built byte by byte with `struct`."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from onnxexec.errors import GGUFError, ModelLoadError
from onnxexec.loaders.gguf_reader import MAX_ARRAY_DEPTH, read_gguf


def _gstr(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _file(tmp_path: Path, header: bytes, n_tensors: int, n_kv: int, tail: bytes = b"") -> Path:
    p = tmp_path / "x.gguf"
    p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + header + tail)
    return p


def test_gguf_error_is_a_model_load_error_and_a_value_error() -> None:
    assert issubclass(GGUFError, ModelLoadError) and issubclass(GGUFError, ValueError)


def test_dims_whose_int64_product_wraps_to_zero_bytes(tmp_path: Path) -> None:
    # ne = [2^32, 2^32]: numpy's int64 product is 2^64 mod 2^64 = 0 bytes, which
    # used to pass the extent check and give an empty "(4294967296, 4294967296)" tensor
    info = _gstr("w") + struct.pack("<I", 2) + struct.pack("<QQ", 1 << 32, 1 << 32)
    info += struct.pack("<IQ", 0, 0)
    p = _file(tmp_path, info, 1, 0, bytes(64))
    end = 96 + 4 * 2**64  # data starts at 65 rounded up to 32; F32 = 4 bytes a value
    with pytest.raises(GGUFError, match=f"tensor 'w' needs bytes 96\\.\\.{end} "):
        read_gguf(p)


def test_nested_metadata_arrays_stop_at_the_depth_limit(tmp_path: Path) -> None:
    # 20000 arrays each holding one array: a RecursionError before the limit existed
    depth = 20000
    kv = _gstr("deep") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * depth
    kv += struct.pack("<IQ", 4, 0)
    with pytest.raises(GGUFError, match=f"'deep': arrays nested deeper than {MAX_ARRAY_DEPTH}"):
        read_gguf(_file(tmp_path, kv, 0, 1))


def test_nesting_within_the_limit_is_read(tmp_path: Path) -> None:
    kv = _gstr("ok") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * (MAX_ARRAY_DEPTH - 1)
    kv += struct.pack("<IQ", 4, 1) + struct.pack("<I", 7)
    md = read_gguf(_file(tmp_path, kv, 0, 1)).metadata
    expect: object = [7]
    for _ in range(MAX_ARRAY_DEPTH - 1):
        expect = [expect]
    assert md["ok"] == expect


@pytest.mark.parametrize(
    ("n_tensors", "n_kv"), [(0, (1 << 64) - 1), ((1 << 63), 0), (10**6, 10**6)]
)
def test_counts_the_file_cannot_hold_fail_before_any_loop(
    tmp_path: Path, n_tensors: int, n_kv: int
) -> None:
    t0 = time.perf_counter()
    with pytest.raises(GGUFError, match="header claims"):
        read_gguf(_file(tmp_path, b"", n_tensors, n_kv, bytes(1000)))
    assert time.perf_counter() - t0 < 1.0


def test_string_longer_than_the_file(tmp_path: Path) -> None:
    kv = struct.pack("<Q", (1 << 63) + 5) + b"key"
    with pytest.raises(GGUFError, match="truncated GGUF file: metadata key #0 needs"):
        read_gguf(_file(tmp_path, kv, 0, 1, bytes(16)))


def test_numeric_array_longer_than_the_file(tmp_path: Path) -> None:
    kv = _gstr("a") + struct.pack("<I", 9) + struct.pack("<IQ", 12, 1 << 61)
    with pytest.raises(GGUFError, match="truncated GGUF file: metadata 'a' needs"):
        read_gguf(_file(tmp_path, kv, 0, 1, bytes(16)))
