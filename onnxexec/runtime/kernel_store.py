"""The per-user store of compiled kernels as tools above the runtime see it (the CLI's
`cache` command): what it holds and clearing it. The store itself is
kernels/objload's; this module keeps the CLI off the kernels package."""

from __future__ import annotations

from onnxexec.kernels.objload.inventory import StoreInfo, clear, info

__all__ = ["StoreInfo", "clear", "info"]
