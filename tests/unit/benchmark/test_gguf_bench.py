"""onnxexec/benchmark/gguf_bench.py and the .gguf branch of `onnxexec bench`, on a tiny
GGUF (no llama.cpp needed: --vs none)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from onnxexec.benchmark.gguf_bench import (
    EngineRun,
    GGUFBenchResult,
    bench_gguf,
    format_result,
    prompt_ids,
    to_json,
)
from onnxexec.cli.main import cli
from tests.unit.llm._tiny import write_tiny_gguf


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_gguf(tmp_path_factory.mktemp("g") / "tiny.gguf", "llama", wtype="Q8_0")


def test_prompt_ids_length_and_determinism(tiny):
    from onnxexec.llm.tokenizer import load_tokenizer

    tok = load_tokenizer(tiny)
    a, b = prompt_ids(tok, 37), prompt_ids(tok, 37)
    assert a == b and len(a) == 37
    assert prompt_ids(tok, 5) == a[:5]


def test_bench_gguf_without_anchor(tiny):
    r = bench_gguf(str(tiny), prompt_len=12, n_decode=4, threads=1, vs=None, rounds=1, memory=False)
    (e,) = r.engines
    assert e.name == "onnxexec" and len(e.greedy_ids) == 4
    assert e.prefill_tok_s[0] > 0 and e.decode_tok_s[0] > 0
    ops = {row[0] for row in r.profile}
    assert {"AttnBlock", "FFNBlock"} <= ops  # the fused decoder graph
    assert r.step_wall_ms > 0 and r.step_ops_ms > 0
    text = "\n".join(format_result(r))
    assert "decode tok/s" in text and "executor overhead" in text
    d = json.loads(to_json(r))
    assert d["engines"][0]["decode_tok_s_median"] == pytest.approx(e.decode_tok_s[0])


def test_ratios_and_agreement_formatting():
    a = EngineRun("onnxexec", 1.0, [100.0, 120.0], [50.0], [10.0], [1, 2, 3])
    b = EngineRun("llama.cpp", 0.1, [200.0], [40.0], [5.0], [1, 2, 4])
    r = GGUFBenchResult("m.gguf", 2, 128, 3, [a, b], greedy_equal=2, greedy_prefix=2)
    assert r.ratio("prefill_tok_s") == pytest.approx(110.0 / 200.0)
    assert r.ratio("decode_tok_s") == pytest.approx(1.25)
    text = "\n".join(format_result(r))
    assert "prefill 0.55x" in text and "decode 1.25x" in text and "2/3 equal" in text


def test_cli_dispatches_gguf(tiny):
    res = CliRunner().invoke(
        cli,
        [
            "bench",
            str(tiny),
            "--vs",
            "none",
            "--no-memory",
            "--rounds",
            "1",
            "--prompt-len",
            "8",
            "-n",
            "3",
            "--threads",
            "1",
            "--json",
        ],
        obj={},
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.output.strip().splitlines()[-1])
    assert d["prompt_len"] == 8 and d["n_decode"] == 3 and len(d["engines"]) == 1


def test_unknown_anchor_is_an_error(tiny):
    from onnxexec.errors import OnnxExecError

    with pytest.raises(OnnxExecError, match="unknown anchor"):
        bench_gguf(str(tiny), vs="onnxruntime", memory=False)
