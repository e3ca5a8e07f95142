"""An InferenceSession's kernels are made ready while it is created (issue 21): no run
after creation compiles, whatever its batch size or sequence length.

Which kernel overloads a run takes depends on the inputs' dtypes and ranks (numba's
overload key) and, through the handlers' size thresholds, on the sizes. Creation runs
the plan on synthesised inputs of the declared dtypes and ranks, inside
`watch.creating(...)`: every kernel the run reaches is linked from the store or
compiled there, visibly (kernels/objload/watch.py), not in a later run.

- Symbolic dimensions are set to 1 first. When that run compiled nothing, the store
  had every kernel it took: later runs link what they need (microseconds, no compile),
  so creation stops there (one small extra run). When it compiled, the store was cold
  for this model: the plan runs again with symbolic dimensions at 2 and 16 (the sizes
  `onnxexec warmup` uses), which is little next to the compiles.
- A model file `onnxexec warmup` readied for this configuration skips the run.
- Inputs are zeros for integers and booleans (ids, indices and lengths in range
  whatever the model) and N(0, 1) floats; a run that fails on them (a model whose
  inputs must satisfy more than their types) just ends the readying, logged at debug.
- ONNXEXEC_READY=0 turns readying off (as does NUMBA_DISABLE_JIT: nothing to compile).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import numpy as np

from onnxexec.ir.dtypes import np_dtype
from onnxexec.ir.types import TensorType

log = logging.getLogger("onnxexec")
ENV_VAR: Final = "ONNXEXEC_READY"
SIZES: Final = (1, 2, 16)


def enabled() -> bool:
    if os.environ.get(ENV_VAR, "1") == "0":
        return False
    return os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0")


def synthesize(inputs: Sequence[Any], size: int, seed: int = 0) -> dict[str, Any] | None:
    """Inputs of the declared types with every unknown dimension at `size`, or None
    when one can't be made (a sequence, a map, an unknown rank)."""
    rng = np.random.default_rng(seed)
    feed: dict[str, Any] = {}
    for vi in inputs:
        t = vi.type
        if not isinstance(t, TensorType) or t.shape is None:
            return None
        shape = tuple(d if isinstance(d, int) else size for d in t.shape)
        dt = np_dtype(t.elem_type)
        if dt == np.dtype(object):
            feed[vi.name] = np.full(shape, "a", dtype=object)
        elif dt.kind in "iub":
            feed[vi.name] = np.zeros(shape, dtype=dt)
        else:
            feed[vi.name] = rng.standard_normal(shape).astype(np.float32).astype(dt)
    return feed


def _symbolic(inputs: Sequence[Any]) -> bool:
    shapes = [getattr(vi.type, "shape", None) or () for vi in inputs]
    return any(not isinstance(d, int) for s in shapes for d in s)


def ready(
    run: Callable[[Mapping[str, Any]], Any],
    inputs: Sequence[Any],
    name: str,
    model_path: str | os.PathLike[str] | None = None,
) -> None:
    """Run `run(feed)` on synthesised inputs as described in the module docstring."""
    if not enabled() or not inputs:
        return
    from onnxexec.runtime import kernel_store

    if model_path is not None:
        try:
            if kernel_store.warmed(kernel_store.model_id(os.fspath(model_path))):
                return
        except OSError:
            pass
    with kernel_store.creating(name):
        before = kernel_store.compiles()
        numba_before = "numba" in sys.modules
        for size in SIZES if _symbolic(inputs) else SIZES[:1]:
            feed = synthesize(inputs, size)
            if feed is None:
                return
            try:
                # synthetic inputs may be degenerate (a 1x1 image pooled to nothing):
                # the user sees no numpy warning from a run they did not make
                # and no ONNXEXEC_DEBUG node trace either: the executor logs through
                # this same "onnxexec" logger
                quiet, log.disabled = log.disabled, True
                try:
                    with warnings.catch_warnings(), np.errstate(all="ignore"):
                        warnings.simplefilter("ignore")
                        run(feed)
                finally:
                    log.disabled = quiet
            except Exception as e:  # inputs that need more than their types: stop
                log.debug("readying %s: a run at size %d failed: %s", name, size, e)
                return
            cold = kernel_store.compiles() > before or ("numba" in sys.modules) > numba_before
            if not cold:
                return
