"""Counters for GET /metrics, written in Prometheus' text exposition format 0.0.4
(prometheus.io/docs/instrumenting/exposition_formats), names as llama-server's
(`llamacpp:` prefix there, `onnxexec:` here)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onnxexec.llm.batching import EngineStats


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, int]] = Counter()  # (route, status) -> count
        self.rejected = 0  # 429s
        self.completion_tokens = 0

    def request(self, route: str, status: int) -> None:
        with self._lock:
            self.requests[(route, status)] += 1
            if status == 429:
                self.rejected += 1

    def render(self, stats: EngineStats | None, in_flight: int) -> str:
        lines: list[str] = []

        def metric(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
            lines.append(f"# HELP onnxexec:{name} {help_}")
            lines.append(f"# TYPE onnxexec:{name} {kind}")
            for labels, v in samples:
                lines.append(f"onnxexec:{name}{labels} {v:g}")

        with self._lock:
            reqs = sorted(self.requests.items())
        metric(
            "requests_total",
            "counter",
            "HTTP requests answered, by route and status.",
            [(f'{{route="{r}",status="{s}"}}', n) for (r, s), n in reqs],
        )
        metric(
            "requests_rejected_total",
            "counter",
            "Requests refused with 429.",
            [("", self.rejected)],
        )
        metric(
            "requests_in_flight",
            "gauge",
            "Generation requests admitted and unfinished.",
            [("", in_flight)],
        )
        if stats is not None:
            used = sum(s.n_past for s in stats.slots)
            total = sum(s.n_ctx for s in stats.slots) or 1
            pre = stats.prompt_tokens / stats.prefill_s if stats.prefill_s > 0 else 0.0
            dec = stats.generated_tokens / stats.decode_s if stats.decode_s > 0 else 0.0
            metric(
                "prompt_tokens_total",
                "counter",
                "Prompt tokens evaluated.",
                [("", stats.prompt_tokens)],
            )
            metric(
                "prompt_tokens_cached_total",
                "counter",
                "Prompt tokens reused from a cache.",
                [("", stats.cached_tokens)],
            )
            metric(
                "tokens_predicted_total",
                "counter",
                "Tokens generated.",
                [("", stats.generated_tokens)],
            )
            metric(
                "prompt_tokens_seconds", "gauge", "Average prefill throughput (tok/s).", [("", pre)]
            )
            metric(
                "predicted_tokens_seconds",
                "gauge",
                "Average decode throughput (tok/s).",
                [("", dec)],
            )
            metric("requests_processing", "gauge", "Requests holding a slot.", [("", stats.active)])
            metric(
                "requests_deferred",
                "gauge",
                "Requests waiting for a slot (queue depth).",
                [("", stats.queued)],
            )
            metric(
                "kv_cache_usage_ratio",
                "gauge",
                "KV positions in use / all slots' positions.",
                [("", used / total)],
            )
            metric("kv_cache_tokens", "gauge", "KV positions in use.", [("", used)])
        return "\n".join(lines) + "\n"
