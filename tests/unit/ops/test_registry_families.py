"""registry.load_families: the GGUF path resolves its ops without importing every op
family (issue #6's start-up time), and gets the same handlers a full load gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from onnxexec.ops import registry

ROOT = Path(__file__).resolve().parents[3]


def _fresh(code: str, *args: str) -> dict:
    """Run `code` in a new interpreter (nothing imported yet); it prints one JSON line."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_no_op_is_split_across_families():
    # load_families relies on it: a family registers every version of its ops
    registry._ensure_loaded()
    for key, hs in registry._REGISTRY.items():
        assert len({h.fn.__module__ for h in hs}) == 1, key


def test_family_lookup_imports_only_that_family():
    res = _fresh(
        "import json, sys\n"
        "from onnxexec.ops import registry as r\n"
        "r.load_families('llm', 'llm_fused')\n"
        "h = r.resolve('onnxexec', 'AttnBlock', 1)\n"
        "mods = sorted(m for m in sys.modules if m.startswith('onnxexec.ops.'))\n"
        "add = r.resolve('', 'Add', 14)\n"  # not in the families: full load
        "print(json.dumps({'h': h.fn.__module__, 'mods': mods, 'onnx': 'onnx' in sys.modules,\n"
        "  'add': [add.fn.__module__, add.since], 'conv': 'onnxexec.ops.conv' in sys.modules}))\n"
    )
    assert res["h"] == "onnxexec.ops.llm_fused"
    assert not res["onnx"]
    assert set(res["mods"]) <= {
        "onnxexec.ops.registry",
        "onnxexec.ops.llm",
        "onnxexec.ops.llm_fused",
        "onnxexec.ops.llm_decode",
    }
    assert res["add"][1] <= 14
    assert res["conv"]  # the miss loaded every family


def test_family_lookup_matches_full_load():
    registry.load_families("llm", "llm_fused")
    registry._ensure_loaded()
    for domain, op_type in sorted(registry._family_keys):
        for opset in (1, 21):
            h = registry.resolve(domain, op_type, opset)
            full = None
            for cand in registry._REGISTRY[(domain, op_type)]:
                if cand.since <= opset:
                    full = cand
            assert h is full


def test_gguf_generate_imports_no_onnx_and_no_onnx_op_family(tmp_path):
    from tests.unit.llm._tiny import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "m.gguf", "llama", wtype="Q8_0")
    code = (
        "import json, sys\n"
        "from onnxexec.ops import registry\n"
        "if sys.argv[-1] == 'full': registry._ensure_loaded()\n"
        "from onnxexec.llm.model import LLM\n"
        "from onnxexec.llm.generate import generate\n"
        "from onnxexec.llm.sampler import SamplingParams\n"
        f"llm = LLM({str(path)!r}, n_ctx=32, threads=1)\n"
        "r = generate(llm, 'the cat', max_tokens=4, params=SamplingParams(temperature=0))\n"
        "print(json.dumps({'onnx': 'onnx' in sys.modules, 'tokens': r.tokens,\n"
        "  'families': sorted(m for m in sys.modules if m.startswith('onnxexec.ops.'))}))\n"
    )
    lean = _fresh(code, "lean")
    full = _fresh(code, "full")
    assert not lean["onnx"]
    assert "onnxexec.ops.conv" not in lean["families"]
    assert "onnxexec.ops.math" not in lean["families"]
    assert "onnxexec.ops.conv" in full["families"]
    assert len(lean["tokens"]) == 4 and lean["tokens"] == full["tokens"]
