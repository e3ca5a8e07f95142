"""Stands for the top-level `onnxruntime` package under the as-onnxruntime runner.

Every onnxruntime name onnxexec has resolves on first use. `__version__` is the
onnxruntime API level onnxexec mirrors (see onnxexec.runtime.module_api); the
package's submodules (`onnxruntime.capi...`) are mapped by onnxexec.as_onnxruntime.
"""

from __future__ import annotations

from typing import Any

from onnxexec.capi._names import PUBLIC, lookup
from onnxexec.runtime.module_api import ORT_API_VERSION

__version__ = ORT_API_VERSION
__all__ = PUBLIC
# A package: `import onnxruntime.capi` looks for submodules under it (the import hook
# answers for them, so the path stays empty).
__path__: list[str] = []


def __getattr__(name: str) -> Any:
    return lookup(name, "onnxruntime")
