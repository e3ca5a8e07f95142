"""`onnxexec conformance`: run the ONNX backend test suites and report per op type."""

from __future__ import annotations

import fnmatch
import json
from collections import defaultdict
from typing import TYPE_CHECKING

import click

from onnxexec.cli.common import verbose_option
from onnxexec.conformance.expected import SUITES, load_expected, platform_dependent

if TYPE_CHECKING:
    from onnxexec.conformance.runner import Result


def _matches(name: str, pattern: str) -> bool:
    return fnmatch.fnmatch(name, pattern) if any(c in pattern for c in "*?[") else pattern in name


def _table(results: list[Result], expected: dict[str, str]) -> list[str]:
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for r in results:
        row = rows[r.op_type]
        row[0] += 1
        if r.passed:
            row[1] += 1
        elif r.case in expected:
            row[3] += 1
        else:
            row[2] += 1
    lines = [f"{'op type':<34}{'cases':>7}{'passed':>8}{'failed':>8}{'xfail':>7}"]
    for op in sorted(rows):
        c, p, f, x = rows[op]
        lines.append(f"{op:<34}{c:>7}{p:>8}{f:>8}{x:>7}")
    return lines


@click.command("conformance")
@click.option("-k", "pattern", default="", help="Only cases whose name contains PATTERN (or glob).")
@click.option("--suite", type=click.Choice([*SUITES, "all"]), default="node", show_default=True)
@click.option("--op", "op_type", default="", help="Only cases of this op type.")
@click.option("--json", "json_path", metavar="REPORT", help="Write every result as JSON.")
@click.option("--failures-only", is_flag=True, help="Print only failing op types and cases.")
@verbose_option
def conformance_cmd(
    pattern: str, suite: str, op_type: str, json_path: str | None, failures_only: bool
) -> None:
    """Run the ONNX backend test suites through onnxexec and report per op type."""
    from tqdm import tqdm  # here: every CLI start (`onnxexec generate`) imports this module

    from onnxexec.conformance.runner import run_case
    from onnxexec.conformance.suites import collect

    expected = load_expected()
    cases = [
        c
        for c in collect(suite)
        if (not pattern or _matches(c.name, pattern)) and (not op_type or c.op_type == op_type)
    ]
    if not cases:
        raise click.ClickException("no conformance case matches the filters")
    results = []
    for case in tqdm(cases, desc="conformance", unit="case", disable=None, leave=False):
        results.append(run_case(case))
    failed = [r for r in results if not r.passed and r.case not in expected]
    xfail = [r for r in results if not r.passed and r.case in expected]
    xpass = [
        r
        for r in results
        if r.passed and r.case in expected and not platform_dependent(expected[r.case])
    ]
    table = _table(results, expected)
    if failures_only:
        bad_ops = {r.op_type for r in failed}
        table = table[:1] + [ln for ln in table[1:] if ln.split()[0] in bad_ops]
    for line in table:
        click.echo(line)
    for r in failed:
        click.echo(f"FAIL  {r.case} [{r.op_type}] {r.status}: {r.message}")
    for r in xpass:
        click.echo(f"XPASS {r.case}: passes but is listed as expected failure ({expected[r.case]})")
    by_suite: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in results:
        by_suite[r.suite][0] += 1
        by_suite[r.suite][1] += r.passed
    for s, (n, p) in by_suite.items():
        click.echo(f"suite {s}: {p}/{n} passed")
    passed = sum(r.passed for r in results)
    click.echo(
        f"{passed} passed, {len(failed)} failed, {len(xfail)} expected failures "
        f"(of {len(results)} cases)"
    )
    if json_path:
        with open(json_path, "w") as f:
            json.dump(
                {
                    "summary": {
                        "cases": len(results),
                        "passed": passed,
                        "failed": len(failed),
                        "expected_failures": len(xfail),
                        "suites": {s: {"cases": n, "passed": p} for s, (n, p) in by_suite.items()},
                    },
                    "results": [
                        r.__dict__ | {"expected_failure": expected.get(r.case)} for r in results
                    ],
                },
                f,
                indent=1,
            )
    if failed:
        raise SystemExit(1)


COMMANDS = [conformance_cmd]
