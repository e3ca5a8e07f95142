"""The fusion passes of ORT_ENABLE_EXTENDED and the layout passes of ORT_ENABLE_ALL."""

from __future__ import annotations

from collections.abc import Callable

from onnxexec.ir.graph import Graph

EXTENDED: list[Callable[[Graph], Graph]] = []
LAYOUT: list[Callable[[Graph], Graph]] = []
