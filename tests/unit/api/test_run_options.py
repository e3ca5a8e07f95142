"""RunOptions: terminate stops a run between nodes with onnxruntime's error; config entries."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import onnxexec
from onnxexec.capi import onnxruntime_pybind11_state as C
from tests.unit.api import models

LEVEL0 = onnxexec.SessionOptions(
    graph_optimization_level=onnxexec.GraphOptimizationLevel.ORT_DISABLE_ALL
)


class TerminateAfter(onnxexec.RunOptions):
    """`terminate` turns true at its n-th read, as if another thread had set it then;
    counts the reads, so the test sees that it is read once per node."""

    def __init__(self, n: int) -> None:
        self.n, self.reads = n, 0
        super().__init__()

    @property  # type: ignore[override]
    def terminate(self) -> bool:
        self.reads += 1
        return self.reads >= self.n

    @terminate.setter
    def terminate(self, value: bool) -> None:
        pass


def test_terminate_set_before_the_run_fails_like_onnxruntime():
    data = models.mul().SerializeToString()
    x = {"X": np.zeros((3, 2), np.float32)}
    theirs = ort.RunOptions()
    theirs.terminate = True
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail) as ort_err:
        ort.InferenceSession(data).run(None, x, theirs)
    ours = onnxexec.RunOptions()
    ours.terminate = True
    with pytest.raises(C.Fail) as our_err:
        onnxexec.InferenceSession(data).run(None, x, ours)
    assert str(our_err.value) in str(ort_err.value)


def test_terminate_stops_between_nodes():
    s = onnxexec.InferenceSession(models.chain(10), LEVEL0)
    x = {"x": np.ones(4, np.float32)}
    ro = TerminateAfter(4)  # read before the run, then before nodes 1, 2, 3: stops at 3
    with pytest.raises(onnxexec.errors.RunTerminatedError, match="terminate flag"):
        s.run(None, x, ro)
    assert ro.reads == 4
    done = TerminateAfter(100)
    np.testing.assert_array_equal(s.run(None, x, done)[0], np.ones(4))  # 10 negations
    assert done.reads == 11  # once before the run and once per node


def test_run_config_entries_and_accepted_fields():
    for mod in (onnxexec, ort):
        ro = mod.RunOptions()
        ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        assert ro.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
        ro.log_severity_level = 1
        ro.logid = "run-1"
    with pytest.raises(RuntimeError, match="RunOptions does not have configuration with key"):
        onnxexec.RunOptions().get_run_config_entry("nope")
    ro = onnxexec.RunOptions(run_tag="tag")
    out = onnxexec.InferenceSession(models.mul().SerializeToString()).run(
        None, {"X": np.ones((3, 2), np.float32)}, ro
    )
    np.testing.assert_array_equal(out[0], models.W)
