"""onnxruntime's default-logger controls mapped onto the "onnxexec" logging logger.

Severities are onnxruntime's: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal. A
callback set with `set_default_logger_callback` receives every record at or above its
severity as `(severity, category, logid, code_location, message)`; an exception in the
callback is swallowed (a logging callback must never stop inference). Nothing is
configured at import: these functions change logging only when called.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from onnxexec.errors import ConfigError

log = logging.getLogger("onnxexec")

_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)
_state: dict[str, Any] = {"handler": None, "verbosity": 0}


def _level(severity: int) -> int:
    if not isinstance(severity, int) or not 0 <= severity <= 4:
        raise ConfigError(
            f"Invalid logging severity {severity!r}: expected 0 (verbose) to 4 (fatal)"
        )
    return _LEVELS[severity]


def _severity(levelno: int) -> int:
    return sum(levelno >= lv for lv in _LEVELS[1:])


class _CallbackHandler(logging.Handler):
    def __init__(self, callback: Callable[..., Any], level: int) -> None:
        super().__init__(level)
        self.callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.callback(
                _severity(record.levelno),
                "onnxexec",
                str(getattr(record, "logid", "")),
                f"{record.pathname}:{record.lineno} {record.funcName}",
                record.getMessage(),
            )
        except Exception:
            pass


def set_default_logger_severity(severity: int) -> None:
    """Log records at `severity` and above (onnxruntime's default is 2, warning)."""
    log.setLevel(_level(severity))


def set_default_logger_verbosity(verbosity: int) -> None:
    """Accepted: onnxexec's verbose records have no sub-levels."""
    _state["verbosity"] = int(verbosity)


def set_default_logger_callback(callback: Callable[..., Any] | None, severity: int = 2) -> None:
    """Send log records to `callback`; None restores the default (no callback)."""
    old = _state["handler"]
    if callback is None:
        if old is not None:
            log.removeHandler(old)
            _state["handler"] = None
        return
    if not callable(callback):
        raise ConfigError(f"logger callback must be callable, got {type(callback).__name__}")
    level = _level(severity)
    if old is not None:
        log.removeHandler(old)
    handler = _CallbackHandler(callback, level)
    log.addHandler(handler)
    _state["handler"] = handler
    log.setLevel(level)
