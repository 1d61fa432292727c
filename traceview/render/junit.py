"""JUnit XML of ``traceview check`` results, the test report CI systems read (``check --junit FILE``).

One ``<testsuite>`` per check report, one ``<testcase>`` per rule: a failed rule carries a
``<failure>`` with the rule's message and how far it missed, a skipped one ``<skipped>`` with why.
Built with ElementTree (it escapes markup); trace text is made visible first (:mod:`.safe`), so no
control character (which XML 1.0 cannot hold) reaches the file. Not a ``--format``: it describes
checks only, and goes to its own file beside the format the terminal shows.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from ..analyses.variants.check import finding
from ..atomic import write_bytes
from .safe import visible

EXTENSIONS = (".xml",)
BINARY = True


def render_reports(reports, *, rich=None, width=None) -> bytes:
    """The check reports as one ``<testsuites>`` document."""
    suites = ET.Element("testsuites")
    for report in reports:
        if report.kind != "check":
            raise ValueError(f"JUnit XML shows check results, not a {report.kind} report")
        suites.append(_suite(report))
    for key in ("tests", "failures", "skipped"):
        suites.set(key, str(sum(int(s.get(key, "0")) for s in suites)))
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"


def _suite(report) -> ET.Element:
    table = report.tables["rules"]
    status = table["status"]
    suite = ET.Element(
        "testsuite",
        name=visible(f"traceview check {report.info['candidate']}"),
        tests=str(len(table)),
        failures=str(int((status == "fail").sum())),
        errors="0",
        skipped=str(int((status == "skipped").sum())),
    )
    for row in table.itertuples(index=False):
        case = ET.SubElement(suite, "testcase", name=visible(str(row.rule)), classname="traceview.check")
        detail = visible(f"{row.metric} {row.op} {row.bound}: value {row.value}, {row.detail or 'holds'}")
        if row.status == "fail":  # the message is the report's finding: one sentence, the same everywhere
            failure = ET.SubElement(case, "failure", message=visible(finding(row._asdict())), type="fail")
            failure.text = detail
        elif row.status == "skipped":
            ET.SubElement(case, "skipped", message=visible(str(row.detail)))
    return suite


def write_junit(reports, path) -> Path:
    """The check report(s) as JUnit XML in ``path``, whole or not at all."""
    reports = [reports] if not isinstance(reports, list) else reports
    write_bytes(path, render_reports(reports))
    return Path(path)
