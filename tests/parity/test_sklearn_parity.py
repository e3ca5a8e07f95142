"""scikit-learn models converted by skl2onnx: onnxexec against onnxruntime.

The models are trained and converted by models/sklearn_models.py (seeded) into a
temporary folder once per session. Labels must be equal, scores and probabilities
within rtol 1e-4 / atol 1e-5; ZipMap outputs are compared key by key.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from onnxexec import InferenceSession

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RTOL, ATOL = 1e-4, 1e-5
_MISSING = [m for m in ("sklearn", "skl2onnx") if importlib.util.find_spec(m) is None]

sys.path.insert(0, str(REPO / "models"))
try:
    import sklearn_models

    NAMES = sorted(sklearn_models.MODELS)
finally:
    sys.path.pop(0)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    if _MISSING:
        pytest.skip(
            f"sklearn parity needs scikit-learn and skl2onnx; not installed: {_MISSING} "
            "(pip install scikit-learn skl2onnx)"
        )
    root = tmp_path_factory.mktemp("sklearn_models")
    return root, sklearn_models.build(root)


def _feeds(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k].astype(object) if z[k].dtype.kind == "U" else z[k] for k in z.files}


def _compare(name: str, ref: Any, out: Any) -> float:
    """Assert equality (labels) or closeness (scores); return the max abs difference."""
    if isinstance(ref, list):
        assert isinstance(out, list) and len(out) == len(ref), f"{name}: sequence length differs"
        diffs = [0.0]
        for i, (r, o) in enumerate(zip(ref, out, strict=True)):
            assert isinstance(o, dict) and set(o) == set(r), f"{name}[{i}]: map keys differ"
            for k in r:
                np.testing.assert_allclose(
                    o[k], r[k], rtol=RTOL, atol=ATOL, err_msg=f"{name}[{i}][{k!r}]"
                )
                diffs.append(abs(float(o[k]) - float(r[k])))
        return max(diffs)
    ref, out = np.asarray(ref), np.asarray(out)
    assert out.shape == ref.shape, f"{name}: shape {out.shape} != {ref.shape}"
    if ref.dtype.kind in "OUiub":
        assert out.dtype.kind == ref.dtype.kind or ref.dtype.kind in "OU", (
            f"{name}: dtype {out.dtype} != {ref.dtype}"
        )
        np.testing.assert_array_equal(out, ref, err_msg=name)
        return 0.0
    assert out.dtype == ref.dtype, f"{name}: dtype {out.dtype} != {ref.dtype}"
    np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL, err_msg=name)
    return float(np.abs(out.astype(np.float64) - ref).max(initial=0.0))


@pytest.mark.parametrize("model_name", NAMES)
def test_sklearn_model_matches_onnxruntime(model_name, built, ort, parity_report):
    root, manifest = built
    entry = manifest[model_name]
    if "error" in entry:
        pytest.fail(f"{model_name}: conversion failed: {entry['error']}")
    path = root / entry["file"]
    feeds = _feeds(root / entry["inputs"])
    ref_sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in ref_sess.get_outputs()]
    ref = ref_sess.run(None, feeds)
    out = InferenceSession(str(path)).run(None, feeds)
    assert len(out) == len(ref)
    worst = max(
        _compare(f"{model_name}:{n}", r, o) for n, r, o in zip(names, ref, out, strict=True)
    )
    parity_report(f"sklearn {model_name}", max_abs=worst, ops=len(entry["ops"]))
