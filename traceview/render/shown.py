"""A Report as the text and markdown renderers show it, before any width or colour: its texts
escaped (:mod:`.safe`), its facts as lines, each table as its heading, header, which columns are
numbers and every cell as text (:mod:`.cells`). Plain data: ``as_data`` and ``from_data`` turn it
into JSON's types and back, so that a run can show again what an earlier run showed of a trace
(``traceview.kept``) without importing pandas. Both renderers draw from this alone, whichever way
it was made.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .safe import visible


@dataclass(frozen=True)
class Table:
    heading: str
    header: list[str]
    numeric: list[bool]  # the column holds numbers: right-aligned
    rows: list[list[str]]


@dataclass(frozen=True)
class Shown:
    title: str
    info: list[tuple[str, str]]
    findings: list[str]
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def shown(report) -> Shown:
    """``report`` (a Report, or a Shown already) as the text renderers show it."""
    if isinstance(report, Shown):
        return report
    from .cells import display_frame, heading, info_lines  # the cells of frames: pandas
    from .safe import visible_report

    report = visible_report(report)  # before fitting: ``\x1b`` takes four columns, ESC none
    return Shown(
        title=report.title,
        info=info_lines(report.info),
        findings=[str(f) for f in report.findings],
        tables=[
            Table(
                heading(report, name),
                [str(c) for c in df.columns],
                [df[c].dtype.kind in "iuf" for c in df.columns],
                display_frame(df),
            )
            for name, df in report.tables.items()
        ],
        notes=[str(n) for n in report.notes],
    )


def as_data(s: Shown) -> dict:
    return asdict(s)


def from_data(data: dict) -> Shown:
    """The Shown ``as_data`` gave; a ValueError for anything else. Its texts were escaped when it
    was made; they are escaped again (``visible`` changes nothing escaped), so that a file changed
    in the cache folder cannot put a control character on the terminal either."""
    try:
        shown = Shown(
            title=_text(data["title"]),
            info=[(_text(k), _text(v)) for k, v in data["info"]],
            findings=[_text(f) for f in data["findings"]],
            tables=[
                Table(
                    _text(t["heading"]),
                    [_text(h) for h in t["header"]],
                    [bool(n) for n in t["numeric"]],
                    [[_text(c) for c in row] for row in t["rows"]],
                )
                for t in data["tables"]
            ],
            notes=[_text(n) for n in data["notes"]],
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a shown report: {exc}") from None
    if any(
        len(t.numeric) != len(t.header) or any(len(r) != len(t.header) for r in t.rows) for t in shown.tables
    ):
        raise ValueError("not a shown report: a row of another width than its header")
    return shown


def _text(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} where text was")
    return visible(value)
