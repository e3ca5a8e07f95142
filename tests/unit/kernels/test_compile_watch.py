"""kernels/objload/watch.py: numba compiles are counted through numba's event API;
one outside creation, after a creation, is said once per kernel on the
`onnxexec.kernels` logger (stderr by default); inside creation it is silent."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest

from onnxexec.kernels.objload import watch


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch._State, "created", False)
    monkeypatch.setattr(watch._State, "creating", 0)
    monkeypatch.setattr(watch._State, "said", set())
    monkeypatch.setattr(watch._State, "subscribers", [])


def _compile_new_kernel(scale: float) -> float:
    import numba

    # a new function each call: numba has never compiled it, in any process
    fn = numba.njit(lambda x: x * scale)
    return float(fn(np.float64(2.0)))


def test_compiles_inside_creation_are_counted_not_said(
    fresh_state: None, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []
    watch.subscribe(seen.append)
    before, lazy = watch.compiles(), watch.lazy_compiles()
    with caplog.at_level(logging.WARNING, "onnxexec.kernels"), watch.creating("test"):
        assert _compile_new_kernel(1.5) == 3.0
    assert watch.compiles() == before + 1
    assert watch.lazy_compiles() == lazy
    assert len(seen) == 1 and "<lambda>" in seen[0]
    assert caplog.records == []


def test_a_compile_after_creation_is_one_warning_per_kernel(
    fresh_state: None, caplog: pytest.LogCaptureFixture
) -> None:
    with watch.creating("test"):
        pass
    lazy = watch.lazy_compiles()
    with caplog.at_level(logging.WARNING, "onnxexec.kernels"):
        _compile_new_kernel(2.5)
        watch.on_compile("pkg.kernel", ("float32[:, ::1]", "int64"))
        watch.on_compile("pkg.kernel", ("float64[:, ::1]", "int64"))  # same kernel: silent
    assert watch.lazy_compiles() == lazy + 3
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "<lambda>" in messages[0] and "float64" in messages[0]
    assert messages[1].startswith("onnxexec: compiling kernel pkg.kernel (float32[:, ::1], int64)")
    assert all("\n" not in m and "creation did not warm" in m for m in messages)


def test_the_lazy_compile_line_reaches_stderr_without_logging_setup() -> None:
    """The application configured no logging: Python's last-resort handler prints
    the warning, one line, on stderr."""
    code = (
        "from onnxexec.kernels.objload import watch\n"
        "with watch.creating('x'):\n"
        "    pass\n"
        "watch.on_compile('pkg.k', ('int64',))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""
    assert out.stderr.splitlines() == [
        "onnxexec: compiling kernel pkg.k (int64) during a run: creation did not warm this "
        "path; `onnxexec warmup MODEL` stores it for later processes"
    ]


def test_ready_overloads_counts_what_numba_holds(fresh_state: None) -> None:
    from onnxexec.kernels.objload import njit

    before = watch.ready_overloads()
    kernel = njit(lambda a: a + 1)  # made after numba came in: a recorded dispatcher
    kernel(np.int64(1))
    kernel(np.float64(1.0))
    assert watch.ready_overloads() == before + 2
