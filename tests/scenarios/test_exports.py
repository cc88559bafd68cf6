"""The public names of `agentskit_chat.scenarios`, pinned."""

from __future__ import annotations

import agentskit_chat.scenarios as scenarios


def test_public_names() -> None:
    assert scenarios.__all__ == [
        "EXPECTATIONS",
        "OPERATIONS",
        "TEST_SCHEMA_PATH",
        "TEST_SUFFIXES",
        "Case",
        "CaseComparison",
        "CaseResult",
        "InProcessTarget",
        "Mismatch",
        "Observation",
        "Outcome",
        "Problem",
        "RemoteTarget",
        "ScriptedModel",
        "Step",
        "StepChange",
        "StepFailure",
        "Target",
        "TestFile",
        "TestFileError",
        "compare",
        "compare_case",
        "compare_file",
        "comparison_report",
        "comparison_totals",
        "find_test_files",
        "junit_xml",
        "load_test_file",
        "load_test_schema",
        "parse_test_file",
        "run_case",
        "run_file",
        "text_report",
        "totals",
    ]
    assert all(hasattr(scenarios, name) for name in scenarios.__all__)
