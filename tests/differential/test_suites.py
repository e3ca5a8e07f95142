"""Every ONNX backend suite case (node suite + the wheel's model suites): each
optimization level gives level 0's outputs (_suites.py)."""

from __future__ import annotations

import pytest

from onnxexec.conformance.suites import SUITES, collect
from tests.differential._suites import SUITE_STATS, differential_case

CASES = [c for s in SUITES for c in collect(s)]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.suite}/{c.name}" for c in CASES])
def test_levels_match_level_0(case) -> None:
    status = differential_case(case)
    SUITE_STATS[f"suite cases {status.split(':')[0]}"] += 1
