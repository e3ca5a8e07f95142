"""Device, memory-info and allocator records with onnxruntime's names and values.

onnxexec computes on the CPU only; these records exist so programs that describe
devices (IOBinding, OrtValue placement, allocator registration) run unchanged. The
enum values are onnxruntime's (OrtDeviceVendorId.NVIDIA == 0x10DE and so on).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from onnxexec.errors import ConfigError


class OrtDeviceVendorId(enum.IntEnum):
    NONE = 0
    AMD = 0x1002
    NVIDIA = 0x10DE
    ARM = 0x13B5
    MICROSOFT = 0x1414
    HUAWEI = 0x19E5
    QUALCOMM = 0x5143
    INTEL = 0x8086


class OrtMemType(enum.IntEnum):
    CPU_INPUT = -2
    CPU_OUTPUT = -1
    CPU = -1
    DEFAULT = 0


class OrtAllocatorType(enum.IntEnum):
    INVALID = -1
    ORT_DEVICE_ALLOCATOR = 0
    ORT_ARENA_ALLOCATOR = 1


class OrtDeviceMemoryType(enum.IntEnum):
    DEFAULT = 0
    HOST_ACCESSIBLE = 5


class OrtMemoryInfoDeviceType(enum.IntEnum):
    CPU = 0
    GPU = 1
    FPGA = 2
    NPU = 3


class OrtSparseFormat(enum.IntEnum):
    ORT_SPARSE_UNDEFINED = 0
    ORT_SPARSE_COO = 1
    ORT_SPARSE_CSRC = 2
    ORT_SPARSE_BLOCK_SPARSE = 4


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


# OrtDevice.device_type() codes and the vendor each device name implies.
_DEVICE_TYPES = {"cpu": 0, "cuda": 1, "gpu": 1, "fpga": 2, "npu": 3, "dml": 1, "cann": 3}
_VENDORS = {"cuda": OrtDeviceVendorId.NVIDIA, "cann": OrtDeviceVendorId.HUAWEI}


class OrtDevice:
    """A device description (type, vendor, id); only "cpu" can hold onnxexec values."""

    def __init__(
        self, device_type: int = 0, mem_type: int = 0, device_id: int = 0, vendor_id: int = 0
    ) -> None:
        self._type, self._mem, self._id, self._vendor = device_type, mem_type, device_id, vendor_id
        self.name = "cpu"

    @staticmethod
    def make(ort_device_name: str, device_id: int, vendor_id: int = -1) -> OrtDevice:
        name = ort_device_name.lower()
        if name not in _DEVICE_TYPES:
            raise ConfigError(f"Unsupported device type: {ort_device_name}")
        vendor = vendor_id if vendor_id >= 0 else int(_VENDORS.get(name, OrtDeviceVendorId.NONE))
        d = OrtDevice(_DEVICE_TYPES[name], 0, int(device_id), vendor)
        d.name = name
        return d

    @staticmethod
    def cpu() -> int:
        return 0

    @staticmethod
    def cuda() -> int:
        return 1

    @staticmethod
    def default_memory() -> int:
        return 0

    def device_id(self) -> int:
        return self._id

    def device_type(self) -> int:
        return self._type

    def device_vendor_id(self) -> int:
        return self._vendor

    def device_mem_type(self) -> int:
        return self._mem

    def _get_c_device(self) -> OrtDevice:
        return self

    def __repr__(self) -> str:
        return f"OrtDevice({self.name}:{self._id})"


class OrtMemoryInfo:
    """Where a value lives: (name, allocator type, device id, memory type)."""

    def __init__(self, name: str, allocator_type: int, device_id: int, mem_type: int) -> None:
        self.name = name
        self.allocator_type = OrtAllocatorType(int(allocator_type))
        self.device_id = int(device_id)
        self.mem_type = OrtMemType(int(mem_type))
        self.device_mem_type = OrtDeviceMemoryType.DEFAULT
        self.device_vendor_id = 0

    @staticmethod
    def create_v2(
        name: str,
        device_type: int,
        vendor_id: int,
        device_id: int,
        device_mem_type: int,
        alignment: int,
        allocator_type: int,
    ) -> OrtMemoryInfo:
        info = OrtMemoryInfo(name, allocator_type, device_id, OrtMemType.DEFAULT)
        info.device_mem_type = OrtDeviceMemoryType(int(device_mem_type))
        info.device_vendor_id = int(vendor_id)
        return info

    def __repr__(self) -> str:
        return f"OrtMemoryInfo(name={self.name!r}, device_id={self.device_id})"


def cpu_memory_info() -> OrtMemoryInfo:
    return OrtMemoryInfo("Cpu", OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, OrtMemType.DEFAULT)


_ARENA_KEYS = (
    "max_mem",
    "arena_extend_strategy",
    "initial_chunk_size_bytes",
    "max_dead_bytes_per_chunk",
    "initial_growth_chunk_size_bytes",
    "max_power_of_two_extend_bytes",
)


class OrtArenaCfg:
    """Arena settings, positional (the first four) or as a dict; recorded, not used:
    onnxexec allocates with numpy."""

    def __init__(self, *args: Any) -> None:
        values = dict.fromkeys(_ARENA_KEYS, -1)
        if len(args) == 1 and isinstance(args[0], Mapping):
            unknown = set(args[0]) - set(_ARENA_KEYS)
            if unknown:
                raise ConfigError(f"Invalid OrtArenaCfg option(s): {sorted(unknown)}")
            values.update({k: int(v) for k, v in args[0].items()})
        elif len(args) == 4:
            values.update(zip(_ARENA_KEYS[:4], (int(a) for a in args), strict=True))
        elif args:
            raise ConfigError("OrtArenaCfg takes a dict or (max_mem, strategy, chunk, dead bytes)")
        for k, v in values.items():
            setattr(self, k, v)


def create_and_register_allocator(mem_info: OrtMemoryInfo, arena_cfg: OrtArenaCfg | None) -> None:
    """Accepted for compatibility: numpy allocates every buffer onnxexec uses."""


def create_and_register_allocator_v2(
    provider_type: str, mem_info: OrtMemoryInfo, options: Mapping[str, str], arena_cfg: Any
) -> None:
    """Accepted for compatibility (see create_and_register_allocator)."""
