"""The documented expected-failures list: `case_name  # one-line reason` per line."""

from __future__ import annotations

from pathlib import Path

# the suites `onnxexec conformance --suite` knows (suites.py collects them); kept here,
# away from onnx, so the CLI can list them without importing onnx
SUITES = ("node", "pytorch-converted", "pytorch-operator", "simple", "light")

EXPECTED_FAILURES = Path(__file__).with_name("expected_failures.txt")
# A reason starting with this tag marks a case whose outcome depends on the machine
# (which BLAS kernels OpenBLAS picks for the CPU): it may pass, and then nothing fails.
PLATFORM_TAG = "platform:"


def platform_dependent(reason: str) -> bool:
    return reason.startswith(PLATFORM_TAG)


def load_expected(path: Path = EXPECTED_FAILURES) -> dict[str, str]:
    """name -> reason. A line without a reason is an error: every entry must say why."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, reason = line.partition("#")
        if not sep or not reason.strip():
            raise ValueError(f"{path}:{n}: expected failure '{name.strip()}' has no reason")
        out[name.strip()] = reason.strip()
    return out
