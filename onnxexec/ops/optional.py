"""Optional ops. An absent optional is None; a present one is its value itself
(a tensor or a sequence), so opset 18's "tensor or sequence where an optional is
expected" needs no special case."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxexec.ops.registry import op


@op("Optional", since=15)
def optional(x: Any = None, *, type: Any = None) -> Any:  # noqa: A002 (spec attribute name)
    """Wrap `x`; without an input, the empty optional of the attribute's type."""
    return x


@op("OptionalHasElement", since=15)
def optional_has_element(x: Any = None) -> np.ndarray:
    """bool scalar; an omitted input (opset 18+) is an empty optional."""
    return np.array(x is not None)


@op("OptionalGetElement", since=15)
def optional_get_element(x: Any) -> Any:
    if x is None:
        raise ValueError("OptionalGetElement: the optional is empty")
    return x
