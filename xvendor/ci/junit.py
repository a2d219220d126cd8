"""pytest's JUnit XML, read per tier (the plugin records each test's tier) with the failing
and erroring tests by name, and rewritten so each cell's suite says which cell it is:
suite named after the cell, the provenance block as suite properties."""

from __future__ import annotations

import collections
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

MESSAGE_LINES = 3  # the first lines of a failure's message that a report shows


@dataclass
class TierResult:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    skip_reasons: collections.Counter = field(default_factory=collections.Counter)


@dataclass
class Failure:
    tier: str
    test: str  # pytest's node id, as `pytest NODEID` reruns it
    kind: str  # "failure" or "error"
    message: str  # its first lines


def _node_id(case) -> str:
    classname, name = case.get("classname", ""), case.get("name", "")
    parts = classname.split(".")
    # xunit1 records the file ("tests/ci/test_x.py") beside the dotted classname
    # ("tests.ci.test_x.TestClass"): rebuild pytest's node id from the two, so a report's
    # name can be pasted into `pytest NODEID`; without a file, keep the dotted form.
    if case.get("file"):
        rest = [p for p in parts if p not in Path(case.get("file")).with_suffix("").parts]
        return "::".join([case.get("file"), *rest, name])
    return "::".join([classname, name]) if classname else name


def first_lines(text: str, n: int = MESSAGE_LINES) -> str:
    lines = [ln.rstrip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return "\n".join(lines[:n])


def _reason(message: str) -> str:
    return message.split(": ", 1)[1] if message.startswith("Skipped: ") else \
        message.removeprefix("Skipped:").strip() or message


def parse(path: Path) -> tuple[dict[str, TierResult], list[Failure]]:
    """Per-tier counts and the failing/erroring tests from pytest's JUnit XML."""
    tiers: dict[str, TierResult] = collections.defaultdict(TierResult)
    failures = []
    for case in ET.parse(path).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        tier = props.get("xv_tier", "l0")
        res = tiers[tier]
        bad = next((e for e in (case.find("failure"), case.find("error")) if e is not None), None)
        if bad is not None:
            res.failed += 1
            message = bad.get("message") or bad.text or ""
            failures.append(Failure(tier, _node_id(case), bad.tag, first_lines(message)))
        elif (skip := case.find("skipped")) is not None:
            res.skipped += 1
            res.skip_reasons[_reason(skip.get("message", ""))] += 1
        else:
            res.passed += 1
    return dict(tiers), failures


def label_suites(path: Path, suite: str, properties: dict[str, str]) -> None:
    """Name every test suite ``suite``, set its hostname, and add ``properties`` (the
    provenance) as suite properties, so merged results of many cells stay apart."""
    tree = ET.parse(path)
    root = tree.getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    for s in suites:
        s.set("name", suite)
        if properties.get("host"):
            s.set("hostname", properties["host"])
        props = s.find("properties")
        if props is None:
            props = ET.Element("properties")
            s.insert(0, props)
        for k, v in properties.items():
            ET.SubElement(props, "property", name=k, value=v)
    tree.write(path, encoding="utf-8", xml_declaration=True)
