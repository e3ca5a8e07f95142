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
        "add = r.resolve('', 'Add', 14)\n"  # indexed: imports ops.math alone
        "conv_after_add = 'onnxexec.ops.conv' in sys.modules\n"
        "none = r.resolve('', 'NoSuchOp', 14)\n"  # not indexed: full load
        "print(json.dumps({'h': h.fn.__module__, 'mods': mods, 'onnx': 'onnx' in sys.modules,\n"
        "  'add': [add.fn.__module__, add.since], 'conv_after_add': conv_after_add,\n"
        "  'none': none is None, 'conv': 'onnxexec.ops.conv' in sys.modules}))\n"
    )
    assert res["h"] == "onnxexec.ops.llm_fused"
    assert not res["onnx"]
    assert set(res["mods"]) <= {
        "onnxexec.ops.registry",
        "onnxexec.ops._families",
        "onnxexec.ops.llm",
        "onnxexec.ops.llm_fused",
        "onnxexec.ops.llm_decode",
        "onnxexec.ops.contention",  # llm_decode's check for cores held by other processes
    }
    assert res["add"] == ["onnxexec.ops.math", 7]  # the newest Add at opset 14
    assert not res["conv_after_add"]
    assert res["none"] and res["conv"]  # the miss loaded every family


def test_family_index_is_current():
    # regenerate: open("onnxexec/ops/_families.py", "w").write(family_index_source())
    text = (ROOT / "onnxexec" / "ops" / "_families.py").read_text()
    assert text == registry.family_index_source()


def test_indexed_lookups_match_full_load_in_a_fresh_process():
    res = _fresh(
        "import json\n"
        "from onnxexec.ops import registry as r\n"
        "from onnxexec.ops._families import FAMILIES\n"
        "keys = [(d, o) for d, ops in FAMILIES.items() for o in ops]\n"
        "lazy = {f'{d}:{o}:{v}': getattr(r.resolve(d, o, v), 'qualname', None)\n"
        "        for d, o in keys for v in (1, 7, 13, 25)}\n"
        "r._ensure_loaded()\n"
        "full = {f'{d}:{o}:{v}': getattr(r.resolve(d, o, v), 'qualname', None)\n"
        "        for d, o in keys for v in (1, 7, 13, 25)}\n"
        "print(json.dumps({'same': lazy == full, 'n': len(lazy)}))\n"
    )
    assert res["same"] and res["n"] > 900


def test_sklearn_session_imports_only_its_families(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node(
        "Scaler", ["x"], ["y"], domain="ai.onnx.ml", offset=[1.0, 2.0], scale=[0.5, 2.0]
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]
    )
    path = tmp_path / "scaler.onnx"
    onnx.save(model, path)
    res = _fresh(
        "import json, sys\n"
        "import numpy as np\n"
        "import onnxexec\n"
        f"s = onnxexec.InferenceSession({str(path)!r})\n"
        "(y,) = s.run(None, {'x': np.array([[3.0, 4.0]], np.float32)})\n"
        "print(json.dumps({'y': y.tolist(),\n"
        "  'ops': sorted(m for m in sys.modules if m.startswith('onnxexec.ops.'))}))\n"
    )
    assert res["y"] == [[1.0, 4.0]]
    assert "onnxexec.ops.conv" not in res["ops"]
    assert "onnxexec.ops.ml_transforms" in res["ops"]


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
        "from onnxexec.llm.generation import generate\n"
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
