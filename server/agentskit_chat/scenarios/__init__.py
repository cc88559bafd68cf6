"""Conversation tests: YAML files of steps and expectations, run in-process or against a
live server, reported as text with a readable diff or as JUnit XML.

Typical use::

    test_file = load_test_file(Path("examples/definitions/support.test.yaml"))
    target = InProcessTarget(load_definitions("examples/definitions").values())
    results = await run_file(target, test_file)
    print(text_report(results))
"""

from ._compare import (
    CaseComparison,
    Outcome,
    StepChange,
    compare_case,
    compare_file,
    comparison_report,
    comparison_totals,
)
from ._observe import Mismatch, Observation, compare
from ._report import junit_xml, text_report
from ._runner import CaseResult, StepFailure, run_case, run_file, totals
from ._schema import TEST_SCHEMA_PATH, load_test_schema
from ._scripted import ScriptedModel
from ._spec import (
    EXPECTATIONS,
    OPERATIONS,
    TEST_SUFFIXES,
    Case,
    Problem,
    Step,
    TestFile,
    TestFileError,
    find_test_files,
    load_test_file,
    parse_test_file,
)
from ._targets import InProcessTarget, RemoteTarget, Target

__all__ = [
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
