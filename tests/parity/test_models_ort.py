"""Model-level parity: onnxexec.InferenceSession against onnxruntime on torch exports.

Every tiny model of models/build_models.py (BERT, GPT-2, Llama with grouped-query
attention, ViT, ResNet with BatchNorm, MobileNetV2), from both torch exporters, runs
on its seeded sidecar inputs and on inputs with another batch / sequence length (the
exports declare symbolic "batch"/"seq" axes). Outputs must agree with onnxruntime
within rtol 1e-4, atol 1e-5. Also: `onnxexec run` on the same files, an unchanged
onnxruntime-style script, opset-23 exports with fused Attention ops (against torch),
and the README's sample model.

Models are built once per session (see conftest.py; ONNXEXEC_PARITY_MODELS=DIR keeps
them between runs).
"""

from __future__ import annotations

import importlib.util
import runpy
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import onnxexec

pytestmark = pytest.mark.slow

MODELS = ("bert", "gpt2", "llama", "vit", "resnet", "mobilenetv2")
EXPORTERS = ("torchscript", "dynamo")
RTOL, ATOL = 1e-4, 1e-5
SCRIPT = Path(__file__).with_name("ort_style_script.py")
REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "models" / "sample" / "mlp.onnx"

_SESSIONS: dict[tuple[str, str], Any] = {}


def _session(kind: str, path: Path, ort: ModuleType) -> Any:
    """One session per (runtime, model) for the whole test session."""
    key = (kind, str(path))
    if key not in _SESSIONS:
        if kind == "onnxruntime":
            sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        else:
            sess = onnxexec.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        _SESSIONS[key] = sess
    return _SESSIONS[key]


def assert_outputs_close(names: list[str], got: list[Any], want: list[Any], label: str) -> float:
    """Same count, dtype and shape; values within RTOL/ATOL. Returns the max abs diff."""
    assert len(got) == len(want), f"{label}: {len(got)} outputs, onnxruntime gives {len(want)}"
    worst = 0.0
    for name, g, w in zip(names, got, want, strict=True):
        assert isinstance(g, np.ndarray), f"{label}:{name}: got {type(g).__name__}"
        assert g.dtype == w.dtype, f"{label}:{name}: dtype {g.dtype}, onnxruntime {w.dtype}"
        assert g.shape == w.shape, f"{label}:{name}: shape {g.shape}, onnxruntime {w.shape}"
        if g.size and g.dtype.kind in "biuf":
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))))
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"{label}:{name}")
    return worst


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("model_name", MODELS)
def test_io_metadata_matches(model_name: str, exporter: str, tiny_models, ort) -> None:
    m = tiny_models.get(model_name, exporter)
    ref = _session("onnxruntime", m.path, ort)
    sess = _session("onnxexec", m.path, ort)

    def describe(args: list[Any]) -> list[tuple[str, str, list]]:
        return [(a.name, a.type, list(a.shape)) for a in args]

    assert describe(sess.get_inputs()) == describe(ref.get_inputs())
    assert describe(sess.get_outputs()) == describe(ref.get_outputs())


@pytest.mark.parametrize("feeds", ["inputs", "alt_inputs"])
@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("model_name", MODELS)
def test_matches_onnxruntime(
    model_name: str, exporter: str, feeds: str, tiny_models, ort, parity_report
) -> None:
    m = tiny_models.get(model_name, exporter)
    feed = getattr(m, feeds)
    ref = _session("onnxruntime", m.path, ort)
    names = [o.name for o in ref.get_outputs()]
    want = ref.run(None, feed)
    got = _session("onnxexec", m.path, ort).run(None, feed)
    shapes = {k: list(v.shape) for k, v in feed.items()}
    label = f"{m.path.name} {shapes}"
    worst = assert_outputs_close(names, got, want, label)
    parity_report(
        f"{model_name}/{exporter}/{feeds}",
        max_abs_diff=worst,
        max_abs_ref=float(max(np.abs(w).max() for w in want)),
        max_abs_ort_vs_torch=m.info.get("ort_vs_torch_max_abs", float("nan")),
    )


@pytest.mark.parametrize("feeds", ["inputs", "alt_inputs"])
@pytest.mark.parametrize("exporter", ["dynamo@23"])
@pytest.mark.parametrize("model_name", ["bert", "llama"])
def test_fused_attention_exports_match_torch(
    model_name: str, exporter: str, feeds: str, tiny_models, ort, parity_report
) -> None:
    """Opset-23 dynamo exports: Attention (llama: with GQA), RotaryEmbedding, RMSNormalization.

    The reference is torch's own output: onnxruntime 1.32 rejects the llama export
    (its RotaryEmbedding wants cos_cache batch == input batch; the exporter passes a
    batch-1 cache), so it is compared with onnxruntime only where onnxruntime runs it.
    """
    m = tiny_models.get(model_name, exporter)
    feed, want = getattr(m, feeds), getattr(m, feeds.replace("inputs", "outputs"))
    names = list(want)
    got = _session("onnxexec", m.path, ort).run(names, feed)
    worst = assert_outputs_close(names, got, [want[n] for n in names], f"{m.path.name} vs torch")
    row = {"max_abs_diff_vs_torch": worst}
    if "verify_error" not in m.info:
        ref = _session("onnxruntime", m.path, ort).run(names, feed)
        row["max_abs_diff"] = assert_outputs_close(names, got, ref, f"{m.path.name}")
    parity_report(f"{model_name}/{exporter}/{feeds}", **row)


def _run_script(
    module: ModuleType, model: Path, out: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, np.ndarray]:
    """Run ort_style_script.py unchanged, with `import onnxruntime` resolving to `module`."""
    with monkeypatch.context() as mp:
        mp.setitem(sys.modules, "onnxruntime", module)
        mp.setattr(sys, "argv", [str(SCRIPT), str(model), str(out)])
        runpy.run_path(str(SCRIPT), run_name="__main__")
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize(
    ("model_name", "exporter"),
    [("bert", "torchscript"), ("llama", "dynamo"), ("resnet", "torchscript"), ("vit", "dynamo")],
)
def test_ort_style_script_runs_unchanged(
    model_name: str,
    exporter: str,
    tiny_models,
    ort,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = tiny_models.get(model_name, exporter)
    want = _run_script(ort, m.path, tmp_path / "ort.npz", monkeypatch)
    got = _run_script(onnxexec, m.path, tmp_path / "onnxexec.npz", monkeypatch)
    assert list(got) == list(want)
    names = list(want)
    assert_outputs_close(names, [got[n] for n in names], [want[n] for n in names], SCRIPT.name)


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("model_name", MODELS)
def test_cli_run_matches_onnxruntime(
    model_name: str, exporter: str, tiny_models, ort, tmp_path: Path
) -> None:
    """`onnxexec run MODEL --inputs X.npz -o OUT.npz` saves what onnxruntime computes."""
    from click.testing import CliRunner

    from onnxexec.cli.main import cli

    m = tiny_models.get(model_name, exporter)
    sidecar = m.path.with_name(m.info["inputs"])
    out = tmp_path / "out.npz"
    result = CliRunner().invoke(cli, ["run", str(m.path), "--inputs", str(sidecar), "-o", str(out)])
    assert result.exit_code == 0, result.output
    ref = _session("onnxruntime", m.path, ort)
    names = [o.name for o in ref.get_outputs()]
    with np.load(out) as z:
        got = [z[n] for n in names]
    assert_outputs_close(names, got, ref.run(None, m.inputs), f"onnxexec run {m.path.name}")


def test_sample_mlp_is_reproducible_and_matches_onnxruntime(ort, tmp_path: Path) -> None:
    """models/sample/mlp.onnx is exactly what models/build_sample.py builds, and runs."""
    spec = importlib.util.spec_from_file_location(
        "build_sample", SAMPLE.parents[1] / "build_sample.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fresh = tmp_path / "mlp.onnx"
    mod.main([str(fresh)])
    assert fresh.read_bytes() == SAMPLE.read_bytes(), "rebuild models/sample/mlp.onnx"
    x = np.random.default_rng(0).standard_normal((5, 16)).astype(np.float32)
    want = ort.InferenceSession(str(SAMPLE), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = onnxexec.InferenceSession(str(SAMPLE)).run(None, {"x": x})
    assert_outputs_close(["y"], got, want, SAMPLE.name)
