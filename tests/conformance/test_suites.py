"""Every ONNX backend test case (node + the wheel's model suites) through onnxexec.

A case listed in onnxexec/conformance/expected_failures.txt is an xfail carrying its
reason; an expected failure that passes makes the test fail, so the list stays true.
"""

from __future__ import annotations

import pytest

from onnxexec.conformance.expected import load_expected, platform_dependent
from onnxexec.conformance.runner import run_case
from onnxexec.conformance.suites import SUITES, collect

EXPECTED = load_expected()
CASES = [c for s in SUITES for c in collect(s)]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.suite}/{c.name}" for c in CASES])
def test_case(case):
    result = run_case(case)
    if case.name in EXPECTED:
        reason = EXPECTED[case.name]
        if result.passed and platform_dependent(reason):
            return  # this CPU's BLAS kernels give the expected data exactly
        assert not result.passed, "passes now; remove it from expected_failures.txt"
        pytest.xfail(reason)
    assert result.passed, f"{result.status}: {result.message}"


def test_expected_failures_are_real_cases():
    names = {c.name for c in CASES}
    unknown = sorted(set(EXPECTED) - names)
    assert not unknown, f"expected_failures.txt names unknown cases: {unknown}"
