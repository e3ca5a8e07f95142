"""Fixtures shared by the kernel tests."""

from __future__ import annotations

import pytest

from onnxexec.native import parallel


@pytest.fixture(params=[1, 2, 3], ids=["1thread", "2threads", "3threads"])
def threads(request):
    """Run the test with native/parallel.py's pool at 1, 2 and 3 threads."""
    old = parallel.num_threads()
    parallel.set_num_threads(request.param)
    yield request.param
    parallel.set_num_threads(old)
