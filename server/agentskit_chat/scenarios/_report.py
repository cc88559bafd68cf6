"""Results for people (text with a readable diff) and for CI systems (JUnit XML)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from itertools import groupby

from ._runner import CaseResult, totals


def text_report(results: Sequence[CaseResult]) -> str:
    """One line per case under its file; a failing case shows the step and the difference."""
    lines: list[str] = []
    for file, cases in groupby(results, key=lambda r: r.file):
        lines.append(file)
        for case in cases:
            lines.extend(_case_lines(case))
    passed, failed, errors = totals(results)
    summary = f"{passed} passed, {failed} failed"
    if errors:
        summary += f", {errors} error{'s' if errors != 1 else ''}"
    lines.append(summary)
    return "\n".join(lines) + "\n"


def _case_lines(case: CaseResult) -> list[str]:
    if case.error:
        return [f"  ERROR {case.name}", f"        {case.error}"]
    if case.failure is None:
        plural = "s" if case.steps != 1 else ""
        lines = [f"  ok    {case.name} ({case.steps} step{plural})"]
        return lines + [f"        note: {note}" for note in case.notes]
    return [f"  FAIL  {case.name}", *(f"        {line}" for line in failure_lines(case))]


def failure_lines(case: CaseResult) -> list[str]:
    """The failing step and what differed, indented for reading."""
    failure = case.failure
    if failure is None:
        return []
    lines = [f"step {failure.index} of {case.steps}: {failure.title}"]
    if failure.problem:
        lines.append(f"  {failure.problem}")
    for mismatch in failure.mismatches:
        lines.extend(f"  {line}" for line in mismatch.lines())
    return lines


def junit_xml(results: Sequence[CaseResult], *, name: str = "agentskit-chat test") -> bytes:
    """A JUnit XML report: one testsuite per file, one testcase per case."""
    root = ET.Element("testsuites", name=name)
    _, failed, errors = totals(results)
    root.set("tests", str(len(results)))
    root.set("failures", str(failed))
    root.set("errors", str(errors))
    root.set("time", f"{sum(r.seconds for r in results):.3f}")
    for file, grouped in groupby(results, key=lambda r: r.file):
        cases = list(grouped)
        _, suite_failed, suite_errors = totals(cases)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=file,
            tests=str(len(cases)),
            failures=str(suite_failed),
            errors=str(suite_errors),
            skipped="0",
            time=f"{sum(c.seconds for c in cases):.3f}",
        )
        for case in cases:
            element = ET.SubElement(
                suite, "testcase", classname=file, name=case.name, time=f"{case.seconds:.3f}"
            )
            if case.error:
                ET.SubElement(element, "error", message=case.error, type="error").text = case.error
            elif case.failure is not None:
                failure = case.failure
                first = failure.problem or "; ".join(m.summary() for m in failure.mismatches)
                ET.SubElement(
                    element,
                    "failure",
                    message=f"step {failure.index}: {first}",
                    type="mismatch",
                ).text = "\n".join(failure_lines(case))
            if case.notes:
                ET.SubElement(element, "system-out").text = "\n".join(case.notes)
    ET.indent(root)
    written: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return written + b"\n"
