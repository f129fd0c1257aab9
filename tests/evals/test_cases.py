"""Case files: every one in evals/cases/ loads, and a bad one is refused saying where and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.cases import CASES_DIR, REQUEST_EXECUTION, CaseInvalid, case_dump, case_parse, cases_load


def test_every_case_in_the_repository_loads() -> None:
    cases = cases_load()
    assert cases, "evals/cases/ holds the cases"
    assert len({case.id for case in cases}) == len(cases)
    for case in cases:
        assert case.digest and case.title


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("title: t\nask: hi\n", "expect needs at least one fact"),
        ("title: t\nexpect: {facts: [x]}\n", "exactly one of ask, signal or conversation"),
        ("title: t\nask: hi\nsignal: {entity: service:x, kind: k}\nexpect: {facts: [x]}\n", "exactly one of"),
        ("title: t\nask: hi\nexpect: {facts: [x]}\nbudgets: {tokens: -1}\n", "budgets.tokens"),
        ("title: t\nask: hi\nexpect: {facts: [x], fact: [y]}\n", "expect.fact: Extra inputs"),
        ("title: t\nask: hi\nexpect: {facts: [x]}\nbar: 2\n", "bar: Input should be less than or equal to 1"),
        ("title: [unclosed\n", "not valid YAML"),
        ("- a list\n", "a case is a mapping"),
        ("title: t\nconversation: [only one]\nexpect: {facts: [x]}\n", "at least two questions"),
    ],
)
def test_a_bad_case_is_refused_naming_the_file_and_the_field(text: str, says: str) -> None:
    with pytest.raises(CaseInvalid, match=r"bad-case\.yaml") as raised:
        case_parse(text, case_id="bad-case")
    assert says in str(raised.value)


def test_request_execution_is_forbidden_unless_the_case_asks_for_an_action() -> None:
    plain = case_parse("title: t\nask: hi\nexpect: {facts: [x]}\n", case_id="plain-case")
    acting = case_parse("title: t\nask: restart x\nexpect: {facts: [x], action: true}\n", case_id="acting-case")
    assert plain.expect.forbidden_tools == [REQUEST_EXECUTION]
    assert acting.expect.forbidden_tools == []


def test_a_case_round_trips_through_its_file(tmp_path: Path) -> None:
    case = cases_load(ids=["health-sonarr-degraded"])[0]
    (tmp_path / "copy-of-it.yaml").write_text(case_dump(case))
    again = cases_load(tmp_path)[0]
    assert again.model_dump(exclude={"id", "digest"}) == case.model_dump(exclude={"id", "digest"})


def test_an_unknown_case_id_is_named() -> None:
    with pytest.raises(CaseInvalid, match="no case named nope-nope"):
        cases_load(CASES_DIR, ids=["nope-nope"])
