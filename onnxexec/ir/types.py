"""Static types of graph values: tensors (dtype + symbolic shape), sequences,
optionals and maps, as declared in ValueInfoProto / TypeProto."""

from __future__ import annotations

from dataclasses import dataclass

from onnxexec.ir.dtypes import type_name

Dim = int | str | None  # fixed size, symbolic name, or unknown
Shape = tuple[Dim, ...]


@dataclass(frozen=True)
class TensorType:
    """A tensor of `elem_type` (TensorProto.DataType); shape None = rank unknown."""

    elem_type: int
    shape: Shape | None = None

    def __str__(self) -> str:
        return f"tensor({type_name(self.elem_type)})"

    def shape_str(self) -> str:
        if self.shape is None:
            return "?"
        return "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"


@dataclass(frozen=True)
class SparseTensorType:
    elem_type: int
    shape: Shape | None = None

    def __str__(self) -> str:
        return f"sparse_tensor({type_name(self.elem_type)})"


@dataclass(frozen=True)
class SequenceType:
    elem: ValueType | None

    def __str__(self) -> str:
        return f"seq({self.elem})"


@dataclass(frozen=True)
class OptionalType:
    elem: ValueType | None

    def __str__(self) -> str:
        return f"optional({self.elem})"


@dataclass(frozen=True)
class MapType:
    key_type: int
    value: ValueType | None

    def __str__(self) -> str:
        return f"map({type_name(self.key_type)},{self.value})"


ValueType = TensorType | SparseTensorType | SequenceType | OptionalType | MapType
