"""benchmark/onnx_bench._create: alternating creation rounds, more of them when both
engines create in under 50 ms (a sub-millisecond hiccup would otherwise decide the
creation ratio), the last sessions kept."""

from __future__ import annotations

import time

from onnxexec.benchmark import onnx_bench


def _maker(seconds: float, made: list[str], name: str):
    def make() -> str:
        time.sleep(seconds)
        made.append(name)
        return f"{name}-{len(made)}"

    return make


def test_fast_creations_take_more_rounds():
    made: list[str] = []
    sessions, times = onnx_bench._create({"a": _maker(0, made, "a"), "b": _maker(0, made, "b")})
    assert len(times["a"]) == len(times["b"]) == onnx_bench.CREATE_ROUNDS_FAST
    assert made[:4] == ["a", "b", "b", "a"]  # the order alternates
    assert sessions == {"a": f"a-{len(made) - 1}", "b": f"b-{len(made)}"}


def test_slow_creations_keep_the_base_rounds():
    made: list[str] = []
    _, times = onnx_bench._create({"a": _maker(0.06, made, "a"), "b": _maker(0, made, "b")})
    assert len(times["a"]) == len(times["b"]) == onnx_bench.CREATE_ROUNDS
    assert min(times["a"]) >= 0.06
