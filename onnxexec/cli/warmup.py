"""`onnxexec warmup [MODEL...]`: compile into the per-user store every kernel the
models need, once, visibly, before the first run (issue 21).

Each model is readied in a fresh worker process (`python -c ...worker(path)`): it
creates the session or LLM and runs it the way later runs will (an LLM's creation
warms its prompt and both one-token paths; an ONNX model runs on synthesised inputs
with its symbolic dimensions at 1, 2 and 16: sizes pick kernel paths), and at exit
kernels/objload records every overload it used. The workers run side by side, one per
core: numba compiles under a process-wide lock, so processes, not threads, use the
cores. A model readied for this configuration (sources, numba, CPU, ISA) is marked in
the store, so a second `warmup` only checks the marks.

With no MODEL, the models are those listed in ONNXEXEC_WARMUP_MODELS (os.pathsep-
separated; each a model file, a folder whose *.onnx and *.gguf files are taken, or a
glob pattern), so an install script names its models once, in the environment.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import click

from onnxexec.cli.common import verbose_option

ENV_VAR = "ONNXEXEC_WARMUP_MODELS"
_SUFFIXES = (".onnx", ".gguf")


def default_models(listed: str | None = None) -> list[str]:
    """The model files ONNXEXEC_WARMUP_MODELS (or `listed`) names, in order, once each:
    files as given, folders' *.onnx / *.gguf files, glob patterns' matches."""
    found: list[str] = []
    text = os.environ.get(ENV_VAR, "") if listed is None else listed
    for entry in (e.strip() for e in text.split(os.pathsep)):
        if not entry:
            continue
        entry = os.path.expanduser(entry)
        if os.path.isdir(entry):
            names = sorted(os.listdir(entry))
            paths = [os.path.join(entry, n) for n in names if n.lower().endswith(_SUFFIXES)]
        elif os.path.isfile(entry):
            paths = [entry]
        else:
            paths = sorted(glob.glob(entry))
        found += [p for p in paths if os.path.isfile(p) and p not in found]
    return found


def worker(path: str) -> None:
    """Ready `path`'s kernels in this process (run by the `warmup` command in a
    subprocess); prints `compile <kernel>` per compile and `done <count>`."""
    from onnxexec.runtime import kernel_store

    def say(name: str) -> None:
        if not name.startswith("numba."):  # numba's own helpers compiled along
            print(f"compile {name}", flush=True)

    kernel_store.subscribe(say)
    if path.lower().endswith(".gguf"):
        from onnxexec.llm.model import LLM

        LLM(path, n_ctx=256)  # creation warms every path (LLM.warmup)
    else:
        import numpy as np

        from onnxexec.cli.feeds import synthesize
        from onnxexec.runtime.session import InferenceSession

        sess = InferenceSession(path)
        rng = np.random.default_rng(0)
        for size in (1, 2, 16):
            dims = {d: size for v in sess.runtime_inputs for d in _symbols(v)}
            feed = {v.name: _valid(synthesize(v, dims, rng)) for v in sess.runtime_inputs}
            sess.run(None, feed)
    print(f"done {kernel_store.compiles()}", flush=True)


def _valid(value: object) -> object:
    """Integer inputs as zeros: ids, indices and type ids are in range whatever the
    model's vocabulary (random ones in [0, 10) were not, for a BERT's token types)."""
    import numpy as np

    if isinstance(value, np.ndarray) and value.dtype.kind in "iub":
        return np.zeros_like(value)
    return value


def _symbols(vi: object) -> list[str]:
    shape = getattr(getattr(vi, "type", None), "shape", None) or ()
    return [d for d in shape if isinstance(d, str)]


class _Progress:
    def __init__(self, total: int) -> None:
        self.total, self.done, self.lock = total, 0, threading.Lock()

    def say(self, text: str) -> None:
        with self.lock:
            click.echo(f"warmup [{self.done}/{self.total}] {text}", err=True)


def _ready(path: str, progress: _Progress) -> str | None:
    """Warm `path` in a worker process; None on success, else the error's last line."""
    code = f"from onnxexec.cli.warmup import worker; worker({path!r})"
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    n = 0
    for line in proc.stdout:
        if line.startswith("compile "):
            n += 1
            progress.say(f"{os.path.basename(path)}: compiling {line[8:].strip()} ({n})")
    err = proc.stderr.read()
    if proc.wait() != 0:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        return lines[-1] if lines else f"worker exited with {proc.returncode}"
    with progress.lock:
        progress.done += 1
    progress.say(
        f"{os.path.basename(path)}: ready in {time.perf_counter() - start:.1f} s "
        f"({n} kernels compiled)"
    )
    return None


@click.command("warmup")
@click.argument("models", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--jobs", "-j", default=0, type=click.IntRange(0), help="Workers (0 = cores).")
@click.option("--force", is_flag=True, help="Also models already readied.")
@verbose_option
def warmup_cmd(models: tuple[str, ...], jobs: int, force: bool) -> None:
    """Compile the kernels MODEL... need into the store (no MODEL: those listed in
    ONNXEXEC_WARMUP_MODELS, separated by the path separator; folders and globs work)."""
    from onnxexec.runtime import kernel_store

    paths = list(models) or default_models()
    if not paths:
        state = "names no model file" if os.environ.get(ENV_VAR) else "is not set"
        raise click.UsageError(
            f"no model to warm up: name MODEL files, or list them in {ENV_VAR} (it {state})"
        )
    ids = {p: kernel_store.model_id(p) for p in paths}
    todo = [p for p in paths if force or not kernel_store.warmed(ids[p])]
    if not todo:
        click.echo(f"warmup: {len(paths)} model(s) ready, nothing to compile", err=True)
        return
    progress = _Progress(len(todo))
    progress.say(f"readying {len(todo)} model(s) on {jobs or os.cpu_count() or 1} workers")
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        errors = dict(zip(todo, pool.map(lambda p: _ready(p, progress), todo), strict=True))
    for path, error in errors.items():
        if error is None:
            kernel_store.mark_warmed(ids[path], os.path.realpath(path))
    failed = {p: e for p, e in errors.items() if e is not None}
    if failed:
        path, error = next(iter(failed.items()))
        raise click.ClickException(f"warmup of {path} failed: {error}")
    click.echo(f"warmup: done in {time.perf_counter() - start:.1f} s", err=True)


COMMANDS = [warmup_cmd]
