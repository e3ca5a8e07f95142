"""onnxexec on Ray (the optional extra `onnxexec[ray]`): batch inference over data sets
with Ray Data, replicated serving with Ray Serve. Nothing else in onnxexec imports this
package, and importing it does not import Ray: `batch_predict` and `run_batch` load it."""

from __future__ import annotations

from typing import Any

__all__ = ["BatchSummary", "batch_predict", "run_batch"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from onnxexec.ray import batch

        return getattr(batch, name)
    raise AttributeError(f"module 'onnxexec.ray' has no attribute '{name}'")
