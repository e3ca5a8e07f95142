"""onnxruntime-genai model builder output (models/build_genai.py): every op it emits runs
with parity vs onnxruntime, and `GenaiModel` greedy tokens equal onnxruntime-genai's
Generator (the oracle). Models are built once into a per-session cache (~50 s cold)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
og = pytest.importorskip("onnxruntime_genai", reason="needs onnxruntime-genai (builder + oracle)")
pytest.importorskip("tokenizers", reason="genai folders use the tokenizers package")
pytest.importorskip("transformers", reason="the builder's input is a transformers folder")

ROOT = Path(__file__).resolve().parents[2]
MODELS = [("llama", "fp32"), ("llama", "int4"), ("qwen2", "fp32"), ("qwen2", "int4")]


@pytest.fixture(scope="session")
def genai_models(tmp_path_factory: pytest.TempPathFactory) -> dict:
    spec = importlib.util.spec_from_file_location("build_genai", ROOT / "models/build_genai.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["build_genai"] = mod
    spec.loader.exec_module(mod)
    cache = os.environ.get("ONNXEXEC_GENAI_CACHE")
    out = Path(cache) if cache else tmp_path_factory.mktemp("genai")
    return mod.build(out)


def _feeds(ids: np.ndarray, past: list[np.ndarray], total: int) -> dict:
    f = {"input_ids": ids, "attention_mask": np.ones((1, total), np.int64)}
    for layer in range(2):
        f[f"past_key_values.{layer}.key"] = past[2 * layer]
        f[f"past_key_values.{layer}.value"] = past[2 * layer + 1]
    return f


@pytest.mark.parametrize(("arch", "precision"), MODELS)
def test_builder_graph_matches_onnxruntime(genai_models, arch: str, precision: str) -> None:
    import onnxexec

    path = str(genai_models[(arch, precision)] / "model.onnx")
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ours = onnxexec.InferenceSession(path)
    rng = np.random.default_rng(0)
    past = [np.zeros((1, 2, 0, 32), np.float32) for _ in range(4)]
    # Prefill 7 tokens, then one decode step on the returned cache (both GQA paths).
    for ids, total in ((rng.integers(0, 2048, (1, 7)), 7), (np.array([[5]]), 8)):
        f = _feeds(ids.astype(np.int64), past, total)
        want = ref.run(None, f)
        got = ours.run(None, f)
        for name, w, g in zip([o.name for o in ref.get_outputs()], want, got, strict=True):
            assert g.shape == w.shape, name
            if precision == "fp32":
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=name)
            else:
                # The builder's int4 MatMulNBits have accuracy_level 4: onnxruntime
                # quantizes A per block to int8 (MLAS CompInt8), so a float rounding
                # difference can move one A value by a quantization step and the
                # change propagates through later layers; bound it relative to scale.
                err = np.abs(g.astype(np.float64) - w)
                assert err.max() <= 0.025 * np.abs(w).max(), (name, err.max())
                assert err.mean() <= 4e-3 * np.abs(w).max(), (name, err.mean())
        past = want[1:]


PROMPT = "The quick brown fox jumps over the lazy dog"


def _oracle(folder: Path, n_new: int) -> tuple[list[int], list[int]]:
    """(prompt ids, greedy new tokens) from onnxruntime_genai.Generator."""
    model = og.Model(str(folder))
    ids = list(og.Tokenizer(model).encode(PROMPT))
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(ids) + n_new)
    gen = og.Generator(model, params)
    gen.append_tokens(ids)
    while not gen.is_done():
        gen.generate_next_token()
    return ids, list(gen.get_sequence(0))[len(ids) :]


@pytest.mark.parametrize(("arch", "precision"), MODELS)
def test_greedy_tokens_match_onnxruntime_genai(genai_models, arch: str, precision: str) -> None:
    from onnxexec.llm.genai import GenaiModel

    folder = genai_models[(arch, precision)]
    ids, want = _oracle(folder, 24)
    ours = GenaiModel(folder, threads=2)
    assert ours.encode(PROMPT) == ids
    res = ours.generate(PROMPT, 24)
    assert res.tokens == want


def test_cli_generate_on_genai_folder(genai_models) -> None:
    from click.testing import CliRunner

    from onnxexec.cli.main import cli

    folder = genai_models[("qwen2", "int4")]
    _, want = _oracle(folder, 8)
    args = ["generate", str(folder), "-p", PROMPT, "-n", "8", "--json", "--threads", "2"]
    r = CliRunner().invoke(cli, args, obj={})
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.splitlines()[0])["tokens"] == want


def test_genai_folder_errors(tmp_path: Path) -> None:
    from onnxexec.errors import ModelLoadError
    from onnxexec.llm.genai import GenaiModel, is_genai_folder

    (tmp_path / "genai_config.json").write_text('{"model": {}}')
    assert is_genai_folder(tmp_path)
    with pytest.raises(ModelLoadError, match=r"genai_config\.json"):
        GenaiModel(tmp_path)


def test_genai_profile_names_the_decoder_ops(genai_models, tmp_path: Path) -> None:
    """profile_prefix turns the session's profiler on (benchmarks/bench_genai.py
    --profile reads it): one model_run per step, node events named by op type."""
    from onnxexec.llm.genai import GenaiModel

    folder = genai_models[("llama", "int4")]
    ours = GenaiModel(folder, threads=1, profile_prefix=str(tmp_path / "p"))
    res = ours.generate(PROMPT, 3)
    events = json.loads(Path(ours.session.end_profiling()).read_text())
    runs = [e for e in events if e["cat"] == "Session" and e["name"] == "model_run"]
    assert len(runs) == len(res.tokens)  # the prefill, then a step per later token
    ops = {e["args"]["op_name"] for e in events if e["cat"] == "Node"}
    assert {"MatMulNBits", "GroupQueryAttention"} <= ops
