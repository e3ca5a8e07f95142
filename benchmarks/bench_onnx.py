"""onnxexec vs onnxruntime on the benchmark model set (issue #5).

    python benchmarks/bench_onnx.py [--models bert gpt2 llama vit resnet mobilenetv2
        mobilenetv2_hf upsample_head sklearn] [--exporters torchscript dynamo nhwc]
        [--sklearn-batch 1 1000] [--model-dir DIR] [--quick] [--runs N]
        [--threads 2] [--level 99] [--no-memory] [--json FILE] [--optimum-dir DIR]

Builds missing models with models/build_models.py (random weights; --quick: the tiny
sizes) and models/sklearn_models.py, then for each model creates both sessions
(2 threads, batch 1), runs them interleaved (onnxexec.benchmark.onnx_bench) and prints
median latencies, the latency ratio onnxexec / onnxruntime, the session-creation and
peak-RSS ratios, and how far the outputs are from onnxruntime's (max abs difference,
and that over the largest reference magnitude). The last line is the geometric mean
of the latency ratios and the worst model. Machines are noisy: runs are interleaved
and medians reported; rerun a suspicious row with --models NAME --runs 50.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NETS = (
    "bert", "gpt2", "llama", "vit", "resnet", "mobilenetv2", "mobilenetv2_hf", "upsample_head"
)  # fmt: skip
EXPORTERS = ("torchscript", "dynamo", "nhwc")
# nhwc: the TorchScript export rewritten tf2onnx-style (models/_onnx_export.py to_nhwc),
# made for the CNNs only
NHWC_NETS = ("resnet", "mobilenetv2", "mobilenetv2_hf", "upsample_head")


@dataclass
class Row:
    model: str
    exporter: str
    ort_ms: float
    ours_ms: float
    ratio: float
    create_ratio: float
    rss_ratio: float
    max_abs_diff: float
    rel_diff: float
    cpu_ratio: float = float("nan")
    error: str = ""


def _build_nets(out: Path, names: list[str], exporters: list[str], quick: bool) -> None:
    missing = [
        f"{n}:{e}"
        for n in names
        for e in exporters
        if not (out / f"{n}_{e}.onnx").exists() and (e != "nhwc" or n in NHWC_NETS)
    ]
    if not missing:
        return
    cmd = [
        sys.executable,
        str(ROOT / "models" / "build_models.py"),
        str(out),
        "--size",
        "tiny" if quick else "full",
        "--only",
        *missing,
    ]
    print("building:", " ".join(missing), flush=True)
    subprocess.run(cmd, check=False)


def _build_sklearn(out: Path) -> list[Path]:
    if not (out / "manifest.json").exists():
        print("building scikit-learn models", flush=True)
        subprocess.run(
            [sys.executable, str(ROOT / "models" / "sklearn_models.py"), str(out)], check=False
        )
    return sorted(out.glob("*.onnx"))


def _reference_scale(model: Path) -> float:
    """Largest |value| among the torch reference outputs beside the model (else 1)."""
    ref = model.with_name(model.stem + ".outputs.npz")
    if not ref.exists():
        return 1.0
    with np.load(ref) as z:
        peak = max((float(np.max(np.abs(z[k]))) for k in z.files if z[k].size), default=1.0)
    return peak or 1.0


def cpu_ratio(model: Path, feed: dict, runs: int, level: int) -> float:
    """onnxexec / onnxruntime process CPU time per run, both on one thread, interleaved.

    CPU time does not count the time a busy machine keeps a runnable process waiting,
    so this ratio is far steadier than wall-clock latency on shared machines; it
    measures the kernels, not the threading.
    """
    import time

    import onnxruntime as ort

    import onnxexec

    ours = onnxexec.InferenceSession(
        str(model), onnxexec.SessionOptions(intra_op_num_threads=1, graph_optimization_level=level)
    )
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    ref = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    spent = [0.0, 0.0]
    for _ in range(2):
        ours.run(None, feed)
        ref.run(None, feed)
    for _ in range(runs):
        for i, s in enumerate((ours, ref)):
            t = time.process_time()
            s.run(None, feed)
            spent[i] += time.process_time() - t
    return spent[0] / spent[1]


def batched(feed_path: Path, batch: int) -> Path:
    """The sidecar rows repeated / cut to `batch` rows (written beside it, once)."""
    out = feed_path.with_name(feed_path.name.replace(".inputs.npz", f".b{batch}.inputs.npz"))
    if not out.exists():
        with np.load(feed_path, allow_pickle=False) as z:
            np.savez(out, **{k: np.resize(z[k], (batch, *z[k].shape[1:])) for k in z.files})
    return out


def bench_one(
    model: Path, name: str, exporter: str, args: argparse.Namespace, batch: int | None = None
) -> Row:
    from onnxexec.benchmark.onnx_bench import bench_onnx

    feed_path = model.with_name(model.stem + ".inputs.npz")
    if batch is not None:
        feed_path = batched(feed_path, batch)
    with np.load(feed_path, allow_pickle=False) as z:
        feed = {k: z[k] for k in z.files}
    try:
        r = bench_onnx(
            str(model),
            feed,
            threads=args.threads,
            runs=args.runs,
            warmup=args.warmup,
            memory=not args.no_memory,
            feed_path=str(feed_path),
            level=args.level,
        )
    except Exception as e:  # one broken model must not hide the others
        nan = float("nan")
        return Row(
            name, exporter, nan, nan, nan, nan, nan, nan, nan, error=f"{type(e).__name__}: {e}"
        )
    ours, ort = r.engines
    diff = max(r.max_abs_diff.values(), default=0.0)
    cpu = cpu_ratio(model, feed, max(3, args.runs // 2), args.level) if args.cpu else float("nan")
    return Row(
        name,
        exporter,
        ort.median_ms,
        ours.median_ms,
        r.ratio(),
        ours.create_s / ort.create_s,
        ours.peak_rss_mb / ort.peak_rss_mb,
        diff,
        diff / _reference_scale(model),
        cpu,
    )


HEAD = (
    f"{'model':<24}{'exporter':<13}{'ort ms':>9}{'ours ms':>9}{'ratio':>7}"
    f"{'create':>8}{'RSS':>6}{'max|diff|':>11}{'rel':>9}{'cpu1':>7}"
)


def format_row(r: Row) -> str:
    if r.error:
        return f"{r.model:<24}{r.exporter:<13} FAILED: {r.error[:120]}"
    return (
        f"{r.model:<24}{r.exporter:<13}{r.ort_ms:>9.2f}{r.ours_ms:>9.2f}{r.ratio:>7.2f}"
        f"{r.create_ratio:>8.2f}{r.rss_ratio:>6.2f}{r.max_abs_diff:>11.2e}"
        f"{r.rel_diff:>9.1e}{r.cpu_ratio:>7.2f}"
    )


def _geomean(rows: list[Row], key: str) -> tuple[float, Row] | None:
    ok = [r for r in rows if not r.error and getattr(r, key) == getattr(r, key)]
    if not ok:
        return None
    gm = math.exp(sum(math.log(getattr(r, key)) for r in ok) / len(ok))
    return gm, max(ok, key=lambda r: getattr(r, key))


def print_table(rows: list[Row]) -> None:
    print(HEAD)
    print("-" * len(HEAD))
    for r in rows:
        print(format_row(r))
    groups = [
        ("all", rows),
        ("networks", [r for r in rows if r.exporter != "skl2onnx"]),
        ("scikit-learn", [r for r in rows if r.exporter == "skl2onnx"]),
    ]
    for label, group in groups:
        for key, what in (("ratio", "latency"), ("cpu_ratio", "1-thread CPU-time")):
            res = _geomean(group, key)
            if res is not None and group:
                gm, worst = res
                print(
                    f"{label}: geometric mean {what} ratio {gm:.3f} over {len(group)} "
                    f"models; worst {worst.model}/{worst.exporter} {getattr(worst, key):.2f}"
                )


def optimum_rows(optimum_dir: Path | None, args: argparse.Namespace) -> list[Row]:
    """Rows for the optimum exports (models/build_optimum.py, run with its own venv:
    optimum-onnx needs transformers<4.58). Absent directory: one row saying why."""
    if optimum_dir is None:
        return []
    paths = sorted(optimum_dir.glob("*_optimum.onnx"))
    if not paths:
        why = f"no *_optimum.onnx in {optimum_dir}; see benchmarks/RESULTS.md (optimum exports)"
        return [Row("optimum", "optimum", *(float("nan"),) * 7, error=f"skipped: {why}")]
    rows = []
    for path in paths:
        rows.append(bench_one(path, path.stem.removesuffix("_optimum"), "optimum", args))
        print(format_row(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--models",
        nargs="+",
        default=[*NETS, "sklearn"],
        help="networks and/or 'sklearn' (default: all)",
    )
    p.add_argument("--exporters", nargs="+", default=list(EXPORTERS), choices=EXPORTERS)
    p.add_argument(
        "--sklearn-batch",
        nargs="+",
        type=int,
        default=[],
        help="rows per scikit-learn call (default: the 25 sidecar rows); e.g. 1 1000",
    )
    p.add_argument("--model-dir", type=Path, default=ROOT / "benchmarks" / ".models")
    p.add_argument("--quick", action="store_true", help="tiny models, few runs")
    p.add_argument("--runs", type=int, default=None)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--level", type=int, default=99, help="onnxexec graph optimization level")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-RSS processes")
    p.add_argument(
        "--cpu",
        action="store_true",
        help="also the 1-thread CPU-time ratio (steady on busy machines)",
    )
    p.add_argument("--json", type=Path, help="also write the rows as JSON")
    p.add_argument(
        "--optimum-dir",
        type=Path,
        help="also bench the *_optimum.onnx exports there (models/build_optimum.py)",
    )
    args = p.parse_args(argv)
    args.runs = args.runs or (5 if args.quick else 20)
    size_dir = args.model_dir / ("tiny" if args.quick else "full")
    nets = [m for m in args.models if m in NETS]
    unknown = set(args.models) - set(NETS) - {"sklearn"}
    if unknown:
        p.error(f"unknown models {sorted(unknown)}; choose from {[*NETS, 'sklearn']}")
    rows: list[Row] = []
    print(HEAD, flush=True)
    if nets:
        size_dir.mkdir(parents=True, exist_ok=True)
        _build_nets(size_dir, nets, args.exporters, args.quick)
        for name in nets:
            for exp in args.exporters:
                if exp == "nhwc" and name not in NHWC_NETS:
                    continue
                path = size_dir / f"{name}_{exp}.onnx"
                if not path.exists():
                    rows.append(Row(name, exp, *(float("nan"),) * 7, error="not built"))
                    continue
                rows.append(bench_one(path, name, exp, args))
                print(format_row(rows[-1]), flush=True)
    rows += optimum_rows(args.optimum_dir, args)
    if "sklearn" in args.models:
        for path in _build_sklearn(args.model_dir / "sklearn"):
            for b in args.sklearn_batch or [None]:
                label = path.stem if b is None else f"{path.stem}@{b}"
                rows.append(bench_one(path, label, "skl2onnx", args, b))
                print(format_row(rows[-1]), flush=True)
    print()
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
