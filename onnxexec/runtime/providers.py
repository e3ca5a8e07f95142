"""Execution-provider arguments handled as onnxruntime's Python layer handles them.

onnxexec has one provider, CPUExecutionProvider. A provider onnxruntime knows but that
is not available here (CUDAExecutionProvider, ...) is skipped with a UserWarning, so
the common `providers=["CUDAExecutionProvider", "CPUExecutionProvider"]` runs on the
CPU as it does with a CPU-only onnxruntime. A name onnxruntime does not know at all
is "Unknown Provider Type": at session creation onnxruntime then falls back to the CPU
with a warning (unless fallback is disabled); set_providers raises.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from onnxexec.errors import ConfigError

CPU = "CPUExecutionProvider"

# onnxruntime's get_all_providers(), highest priority first (CPU last).
ALL_PROVIDERS = (
    "TensorrtExecutionProvider",
    "CUDAExecutionProvider",
    "MIGraphXExecutionProvider",
    "OpenVINOExecutionProvider",
    "DnnlExecutionProvider",
    "VitisAIExecutionProvider",
    "QNNExecutionProvider",
    "NnapiExecutionProvider",
    "VSINPUExecutionProvider",
    "JsExecutionProvider",
    "CoreMLExecutionProvider",
    "DmlExecutionProvider",
    "RknpuExecutionProvider",
    "WebNNExecutionProvider",
    "WebGpuExecutionProvider",
    "XnnpackExecutionProvider",
    "CANNExecutionProvider",
    "AzureExecutionProvider",
    CPU,
)
AVAILABLE = (CPU,)


def get_available_providers() -> list[str]:
    return list(AVAILABLE)


def get_all_providers() -> list[str]:
    return list(ALL_PROVIDERS)


def _options(name: str, opts: Any) -> dict[str, str]:
    if not isinstance(opts, Mapping):
        raise ValueError(f"provider options for '{name}' must be a dict, got {type(opts).__name__}")
    return {str(k): str(v) for k, v in opts.items()}


def check_and_normalize_provider_args(
    providers: Sequence[Any] | None,
    provider_options: Sequence[Any] | None,
    available_provider_names: Sequence[str],
    _stacklevel: int = 2,
) -> tuple[list[str], list[dict[str, str]]]:
    """(names, option dicts) from `providers` given as names or (name, options) pairs and
    an optional parallel `provider_options` list. Raises ValueError on malformed
    arguments; warns on names not in `available_provider_names` and on duplicates
    (the first wins)."""
    if providers is None:
        return [], []
    if isinstance(providers, str | bytes) or not isinstance(providers, Sequence):
        raise ValueError("'providers' should be a sequence.")
    if provider_options is not None:
        if isinstance(provider_options, str | bytes) or not isinstance(provider_options, Sequence):
            raise ValueError("'provider_options' should be a sequence.")
        if len(provider_options) != len(providers):
            raise ValueError(
                "'providers' and 'provider_options' should be the same length if both are given."
            )
    names: list[str] = []
    options: list[dict[str, str]] = []
    for i, p in enumerate(providers):
        if isinstance(p, tuple):
            if len(p) != 2 or not isinstance(p[0], str):
                raise ValueError(f"provider {p!r} should be a name or a (name, options) pair")
            if provider_options is not None:
                raise ValueError(
                    "Only one of 'providers' (as (name, options) pairs) and 'provider_options' "
                    "may give provider options."
                )
            name, opts = p[0], _options(p[0], p[1])
        elif isinstance(p, str):
            name = p
            opts = _options(p, provider_options[i]) if provider_options is not None else {}
        else:
            raise ValueError(f"provider {p!r} should be a name or a (name, options) pair")
        if name not in available_provider_names:
            warnings.warn(
                f"Specified provider '{name}' is not in available provider names."
                f"Available providers: '{', '.join(available_provider_names)}'",
                stacklevel=_stacklevel,
            )
        if name in names:
            warnings.warn(
                f"Duplicate provider '{name}' encountered, ignoring.", stacklevel=_stacklevel
            )
            continue
        names.append(name)
        options.append(opts)
    return names, options


def resolve_providers(
    providers: Sequence[Any] | None,
    provider_options: Sequence[Any] | None,
    fallback: bool,
) -> dict[str, dict[str, str]]:
    """The providers a session uses (always ends with the CPU) and their options.

    Unknown names raise ConfigError("Unknown Provider Type: ...") unless `fallback`,
    in which case onnxruntime's "EP Error ... Falling back" warning is given.
    """
    # warnings point at the caller of InferenceSession() / set_providers()
    names, _ = check_and_normalize_provider_args(providers, provider_options, AVAILABLE, 4)
    unknown = [n for n in names if n not in ALL_PROVIDERS]
    if unknown:
        msg = f"Unknown Provider Type: {unknown[0]}"
        if not fallback:
            raise ConfigError(msg)
        warnings.warn(
            f"EP Error {msg} when using {names}. Falling back to ['{CPU}'] and retrying.",
            stacklevel=3,
        )
        return {CPU: {}}
    # Every known provider but the CPU was skipped above with a warning; onnxruntime
    # reports no options for its CPU provider, whatever was given for it.
    return {CPU: {}}
