"""onnxruntime's module-level functions that are not about sessions.

`ORT_API_VERSION` is the onnxruntime release whose Python API onnxexec mirrors. Under
the as-onnxruntime runner, `onnxruntime.__version__` and `get_version_string()` give it,
so programs that gate features on onnxruntime's version take the paths written for
that release; `onnxexec.__version__` stays onnxexec's own version.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

ORT_API_VERSION = "1.32.0"


def get_version_string() -> str:
    return ORT_API_VERSION


def get_build_info() -> str:
    # the package is imported whenever a submodule is (a parent module loads first)
    version = sys.modules["onnxexec"].__version__
    return (
        f"onnxexec {version} Build Info: pure Python (numpy + numba), "
        f"onnxruntime API {ORT_API_VERSION}, {platform.machine()}"
    )


def enable_telemetry_events() -> None:
    """No-op: onnxexec sends no telemetry."""


def disable_telemetry_events() -> None:
    """No-op: onnxexec sends no telemetry."""


def set_seed(seed: int) -> None:
    """Seed the generator of random ops that have no `seed` attribute."""
    from onnxexec.ops.random import set_global_seed

    set_global_seed(seed)


def set_global_thread_pool_sizes(
    intra_op_num_threads: int = 0, inter_op_num_threads: int = 0
) -> None:
    """The intra-op thread count for sessions created afterwards without their own."""
    from onnxexec.runtime.threads import set_threads

    set_threads(intra_op_num_threads)


def get_default_session_options() -> Any:
    from onnxexec.runtime.options import SessionOptions

    return SessionOptions()


def get_ep_devices() -> list[Any]:
    """No plugin execution-provider devices: onnxexec computes on the CPU."""
    return []
