"""The differential harness: every graph at level 0 against levels 1, 2 and 99, with the
shape check (ONNXEXEC_CHECK_SHAPES=1) on; a summary line counts what was tried."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from onnxexec.runtime import shape_check
from tests.differential._harness import STATS
from tests.differential._suites import SUITE_STATS


@pytest.fixture(autouse=True)
def _check_shapes() -> Iterator[None]:
    old = os.environ.get(shape_check.ENV)
    os.environ[shape_check.ENV] = "1"
    yield
    if old is None:
        os.environ.pop(shape_check.ENV, None)
    else:
        os.environ[shape_check.ENV] = old


def pytest_terminal_summary(terminalreporter: Any) -> None:
    stats = STATS + SUITE_STATS
    if STATS["graphs"]:
        stats["mismatches"] = STATS["mismatches"]  # shown even when 0
    if stats:
        terminalreporter.section("differential (level 0 vs 1, 2, 99)")
        for k in sorted(stats):
            terminalreporter.write_line(f"{k}: {stats[k]}")
