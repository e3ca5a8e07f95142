"""Build the test/benchmark ONNX models offline, with random seeded weights.

    python models/build_models.py OUT_DIR [--only NAME[:EXPORTER[@OPSET]] ...]
        [--size tiny|full] [--exporter torchscript|dynamo|both] [--opset N] [--verify] [--force]

Writes, for every model and exporter, OUT_DIR/<stem>.onnx, stem = <name>_<exporter>
(plus _op<N> when an opset was asked for), next to seeded example inputs and the torch
module's outputs on them:
  <stem>.inputs.npz / <stem>.outputs.npz          tiny: batch 2; full: batch 1 at the
                                                  benchmark sequence length
  <stem>.alt_inputs.npz / <stem>.alt_outputs.npz  another batch / sequence length, to
                                                  exercise the symbolic "batch"/"seq" axes
OUT_DIR/manifest.json records per file: opset, node count, export time, any export
error, and with --verify the max abs difference between onnxruntime and torch.

Needs torch, transformers and (for dynamo) onnxscript; nothing is downloaded: models
are built from config objects. Models: bert, gpt2, llama (grouped-query attention),
vit, resnet (keeps BatchNormalization nodes in its TorchScript export), mobilenetv2,
mobilenetv2_hf (transformers' MobileNetV2: explicit Pad + Clip nodes), upsample_head
(convs fed by Resize). Exporter nhwc (only with --only, e.g. mobilenetv2:nhwc): the
TorchScript export rewritten tf2onnx-style, NHWC input and Transposes around each Conv.
Opset 23+ dynamo exports use the fused Attention / RotaryEmbedding / RMSNormalization
ops, e.g. `--only llama:dynamo@23`. Existing files are reused unless --force.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import onnx
from _onnx_export import (
    EXPORTERS,
    EXTRA_EXPORTERS,
    export,
    max_abs_diff_onnxruntime,
    nhwc_feeds,
    torch_outputs,
)
from _specs import EXTRA_FACTORIES, FACTORIES, ModelSpec, make_spec

MANIFEST = "manifest.json"


Job = tuple[str, str, int | None]  # (model name, exporter, opset or None = default)


def stem(name: str, exporter: str, opset: int | None) -> str:
    return f"{name}_{exporter}" + (f"_op{opset}" if opset else "")


def sidecar_feeds(spec: ModelSpec, size: str) -> tuple[dict, dict]:
    """(example inputs, alternative-shape inputs) for the sidecar files."""
    if size == "tiny":
        main = spec.feeds(2, seed=0)
        alt = spec.feeds(3, spec.seq - 5, seed=1) if spec.seq else spec.feeds(1, seed=1)
    else:
        main = spec.feeds(spec.bench_batch, seed=0)
        alt = spec.feeds(2, spec.seq // 2, seed=1) if spec.seq else spec.feeds(2, seed=1)
    return main, alt


def parse_only(items: list[str], exporters: tuple[str, ...], opset: int | None) -> list[Job]:
    """['bert', 'gpt2:dynamo', 'llama:dynamo@23'] -> (name, exporter, opset) jobs."""
    jobs: list[Job] = []
    for item in items or list(FACTORIES):
        name, _, rest = item.partition(":")
        exp, _, op = rest.partition("@")
        if name not in FACTORIES and name not in EXTRA_FACTORIES:
            known = sorted(FACTORIES | EXTRA_FACTORIES)
            raise SystemExit(f"unknown model {name!r}; choose from {known}")
        if exp and exp not in EXPORTERS + EXTRA_EXPORTERS:
            known = EXPORTERS + EXTRA_EXPORTERS
            raise SystemExit(f"unknown exporter {exp!r} in {item!r}; choose from {known}")
        if op and not op.isdigit():
            raise SystemExit(f"bad opset {op!r} in {item!r}")
        for e in (exp,) if exp else exporters:
            job = (name, e, int(op) if op else opset)
            if job not in jobs:
                jobs.append(job)
    return jobs


def _save(out: Path, file: str, arrays: dict[str, np.ndarray]) -> None:
    np.savez(out / file, **arrays)


def build_one(
    spec: ModelSpec,
    exporter: str,
    opset: int | None,
    out: Path,
    args: argparse.Namespace,
    log: dict,
) -> dict:
    s = stem(spec.name, exporter, opset)
    path = out / f"{s}.onnx"
    entry = {
        "name": spec.name,
        "exporter": exporter,
        "requested_opset": opset,
        "size": args.size,
        "seed": args.seed,
        "file": path.name,
        "input_names": list(spec.input_names),
        "output_names": list(spec.output_names),
        "dynamic": {k: {str(a): d for a, d in v.items()} for k, v in spec.dynamic.items()},
    }
    for kind in ("inputs", "outputs", "alt_inputs", "alt_outputs"):
        entry[kind] = f"{s}.{kind}.npz"
    old = log.get(path.name)
    files = ("file", "inputs", "outputs", "alt_inputs", "alt_outputs")
    if not args.force and old and not old.get("error") and old.get("seed") == args.seed:
        if all((out / entry[k]).exists() for k in files):
            return old | {"cached": True}
    main_feeds, alt_feeds = sidecar_feeds(spec, args.size)
    refs = []
    for kind, feeds in (("inputs", main_feeds), ("alt_inputs", alt_feeds)):
        _save(out, entry[kind], nhwc_feeds(feeds) if exporter == "nhwc" else feeds)
        refs.append(dict(zip(spec.output_names, torch_outputs(spec, feeds), strict=True)))
        _save(out, entry[kind.replace("inputs", "outputs")], refs[-1])
    t0 = time.perf_counter()
    try:
        export(spec, exporter, path, opset)
    except Exception as e:  # one failed export must not stop the others
        path.unlink(missing_ok=True)
        msg = f"{type(e).__name__}: {e}".strip()
        return entry | {"error": msg[:4000], "traceback": traceback.format_exc()[-4000:]}
    entry["seconds"] = round(time.perf_counter() - t0, 2)
    model = onnx.load(str(path), load_external_data=False)
    entry["opset"] = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    entry["nodes"] = len(model.graph.node)
    entry["bytes"] = path.stat().st_size
    if args.verify:
        try:
            pairs = [(main_feeds, refs[0]), (alt_feeds, refs[1])]
            if exporter == "nhwc":
                pairs = [(nhwc_feeds(f), r) for f, r in pairs]
            entry["ort_vs_torch_max_abs"] = max_abs_diff_onnxruntime(path, pairs)
        except Exception as e:  # a model onnxruntime cannot run is still worth keeping
            entry["verify_error"] = f"{type(e).__name__}: {e}"[:4000]
    return entry


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir", type=Path)
    p.add_argument(
        "--only",
        nargs="+",
        action="extend",
        default=[],
        metavar="NAME[:EXPORTER[@OPSET]]",
        help=f"models to build (default all: {list(FACTORIES)})",
    )
    p.add_argument("--size", choices=("tiny", "full"), default="tiny")
    p.add_argument("--exporter", choices=(*EXPORTERS, "both"), default="both")
    p.add_argument("--opset", type=int, default=None, help="default: the exporter's own")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verify", action="store_true", help="compare onnxruntime with torch")
    p.add_argument("--force", action="store_true", help="rebuild files that already exist")
    args = p.parse_args(argv)

    exporters = EXPORTERS if args.exporter == "both" else (args.exporter,)
    jobs = parse_only(args.only, exporters, args.opset)
    out: Path = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / MANIFEST
    log = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    if any(e.get("size", args.size) != args.size for e in log.values()):
        raise SystemExit(f"{out} holds models of another --size; use a separate OUT_DIR")

    failed = 0
    specs: dict[str, ModelSpec] = {}
    for name, exporter, opset in jobs:
        if name not in specs:
            specs[name] = make_spec(name, args.size, args.seed)
        entry = build_one(specs[name], exporter, opset, out, args, log)
        log[entry["file"]] = {k: v for k, v in entry.items() if k != "cached"}
        manifest_path.write_text(json.dumps(log, indent=1, sort_keys=True) + "\n")
        if entry.get("error"):
            failed += 1
            print(f"{entry['file']}: EXPORT FAILED: {entry['error'][:300]}", flush=True)
            continue
        info = "cached" if entry.get("cached") else f"{entry['seconds']:.1f} s"
        check = entry.get("ort_vs_torch_max_abs")
        extra = f", onnxruntime vs torch max abs {check:.2e}" if check is not None else ""
        if entry.get("verify_error"):
            extra = f", onnxruntime check FAILED: {entry['verify_error'][:300]}"
        print(
            f"{entry['file']}: {info}, opset {entry['opset']}, {entry['nodes']} nodes{extra}",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
