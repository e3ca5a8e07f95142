"""IOBinding: inputs and outputs bound ahead of a run, as onnxruntime's on the CPU.

Inputs are bound from numpy arrays, OrtValues or a raw CPU pointer (element type,
shape, address: the memory is read in place). Outputs are bound by name (a new value
each run), to an OrtValue, or to a raw pointer; a preallocated output receives the
result by copy and must have its shape. `run_with_iobinding` runs the session on the
bound inputs for the bound output names.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from onnxexec.errors import InvalidArgument
from onnxexec.ir.dtypes import np_dtype
from onnxexec.runtime.ortvalue import OrtValue, OrtValueVector, check_device


def _dtype(element_type: Any) -> np.dtype:
    if isinstance(element_type, int | np.integer) and not isinstance(element_type, bool):
        return np_dtype(int(element_type))
    return np.dtype(element_type)


def array_at(ptr: int, element_type: Any, shape: Sequence[int]) -> np.ndarray:
    """A numpy view of `shape` elements of `element_type` at CPU address `ptr`."""
    dt = _dtype(element_type)
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return np.empty(tuple(shape), dtype=dt)
    buf = (ctypes.c_char * (count * dt.itemsize)).from_address(int(ptr))
    return np.frombuffer(memoryview(buf).cast("B"), dtype=dt).reshape(tuple(shape))


class IOBinding:
    """Inputs and outputs of one session bound ahead of `run_with_iobinding`."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._inputs: dict[str, Any] = {}
        self._outputs: dict[str, OrtValue | None] = {}
        self._results: list[OrtValue] = []

    @property
    def _iobinding(self) -> IOBinding:
        return self

    def bind_cpu_input(self, name: str, arr_on_cpu: Any) -> None:
        self._inputs[name] = arr_on_cpu

    def bind_input(
        self,
        name: str,
        device_type: str,
        device_id: int,
        element_type: Any,
        shape: Sequence[int],
        buffer_ptr: int,
    ) -> None:
        check_device(device_type, device_id)
        self._inputs[name] = array_at(buffer_ptr, element_type, shape)

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        self._inputs[name] = ortvalue

    def synchronize_inputs(self) -> None:
        """Nothing to wait for: CPU memory is written synchronously."""

    def bind_output(
        self,
        name: str,
        device_type: str = "cpu",
        device_id: int = 0,
        element_type: Any = None,
        shape: Sequence[int] | None = None,
        buffer_ptr: int | None = None,
    ) -> None:
        check_device(device_type, device_id)
        if buffer_ptr is None:
            self._outputs[name] = None
            return
        if element_type is None or shape is None:
            raise InvalidArgument(f"output '{name}': a buffer needs its element_type and shape")
        self._outputs[name] = OrtValue(array_at(buffer_ptr, element_type, shape))

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        self._outputs[name] = ortvalue

    def synchronize_outputs(self) -> None:
        """Nothing to wait for: results are in place when run_with_iobinding returns."""

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._results = []

    def get_outputs(self) -> OrtValueVector:
        return OrtValueVector(self._results)

    def get_outputs_as_ortvaluevector(self) -> OrtValueVector:
        return self.get_outputs()

    def copy_outputs_to_cpu(self) -> list[Any]:
        """The outputs as numpy arrays (copies, as onnxruntime makes)."""
        out = []
        for v in self._results:
            x = v.numpy()
            out.append(x.copy() if isinstance(x, np.ndarray) else x)
        return out

    def run(self, run_options: Any = None) -> None:
        """Run the session on the bound inputs; results go to the bound outputs."""
        names = list(self._outputs)
        if not names:
            raise InvalidArgument("IOBinding: bind at least one output before running")
        values = self._session.run(names, dict(self._inputs), run_options)
        results = []
        for name, value in zip(names, values, strict=True):
            target = self._outputs[name]
            if target is None:
                results.append(OrtValue(value))
                continue
            dest = target.numpy()
            if not isinstance(dest, np.ndarray) or dest.shape != np.shape(value):
                raise InvalidArgument(
                    f"output '{name}': bound buffer {target!r} cannot hold a "
                    f"{np.asarray(value).dtype}{list(np.shape(value))} result"
                )
            np.copyto(dest, value, casting="no")
            results.append(target)
        self._results = results
