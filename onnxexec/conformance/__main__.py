"""`python -m onnxexec.conformance [-k SUBSTRING]`: quick runner for development."""

from __future__ import annotations

import sys

from onnxexec.conformance.runner import run_case
from onnxexec.conformance.suites import collect


def main(argv: list[str]) -> int:
    pattern = argv[argv.index("-k") + 1] if "-k" in argv else ""
    suite = argv[argv.index("--suite") + 1] if "--suite" in argv else "node"
    results = [run_case(c) for c in collect(suite) if pattern in c.name]
    bad = [r for r in results if not r.passed]
    for r in bad:
        sys.stdout.write(f"{r.status.upper():5} {r.case}: {r.message}\n")
    sys.stdout.write(f"{len(results) - len(bad)} passed, {len(bad)} failed\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
