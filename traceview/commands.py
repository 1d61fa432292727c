"""Every command declared once, as data: what it reads, which selections and load options it
takes, and which of its options do not apply in which form (issue 37).

The API (``traceview.api``) derives each function's keywords and its refusals from the
:class:`Command` of its name; the CLI (``traceview.cli``) derives the ``--step``/``--kind``/...
options it offers and its usage errors from the same one. An option a form of a command cannot
apply is refused in both, with the same words, never dropped. Plain data: nothing here imports
the analyses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: the selection keywords (``Selection``'s fields), in the order the help lists them
SELECT = ("step", "annotation", "device", "stream", "kind")
#: the load keywords (``LoadOptions``' fields)
LOAD = ("rules", "devices", "salvage", "max_bytes", "max_ratio", "cache")


_PLACE = re.compile(r"\{(\w+)(?:=(\w+))?\}")


def words(text: str, cli: bool) -> str:
    """A refusal's text for the CLI (``{by=source}`` is ``--by source``, ``{run=True}`` ``--run``)
    or for the API (``by='source'``, ``run=True``, ``{top}`` ``top=``): one text, two spellings."""

    def one(m: re.Match) -> str:
        name, value = m.group(1), m.group(2)
        if cli:
            flag = "--" + name.replace("_", "-")
            return flag if value in (None, "True") else f"{flag} {value}"
        return f"{name}=" if value is None else f"{name}={value}" if value == "True" else f"{name}={value!r}"

    return _PLACE.sub(one, text)


def refusal(names: list[str], why: str, cli: bool) -> str:
    """One line: the options given that do not apply, and why."""
    given = [words("{" + n + "}", cli) for n in names]
    reason = words(why, cli)
    return reason if all(g in reason for g in given) else f"{', '.join(given)}: {reason}"


@dataclass(frozen=True)
class Refuse:
    """``names`` do not apply while ``key`` is ``value`` (``unless``: while it is not): given there,
    they are refused with ``why``. ``value`` True means any true value."""

    names: tuple[str, ...]
    why: str
    key: str
    value: object = True
    unless: bool = False

    def holds(self, values: Mapping[str, object]) -> bool:
        v = values.get(self.key)
        hit = bool(v) if self.value is True else v == self.value
        return hit != self.unless


@dataclass(frozen=True)
class Command:
    """One command: ``takes`` is what its first argument(s) are (``trace``: one trace; ``traces``:
    traces or folders of them; ``pair``: two traces or two runs; ``run``: one run's rank traces;
    ``runs``: runs), ``select`` the selection keywords it applies, ``devices`` whether it shows
    efficiency against a device table (``--devices``), ``refuse`` the options that do not apply in
    one of its forms."""

    name: str
    takes: str
    select: tuple[str, ...] = SELECT
    devices: bool = True
    refuse: tuple[Refuse, ...] = ()
    argument: str | None = None  # the command line's name for its inputs, where not the kind's

    def arguments(self) -> tuple[tuple[str, bool], ...]:
        """The command line's arguments: (name, several) for each, from the input kind."""
        found = ARGUMENTS[self.takes]
        return found if self.argument is None else ((self.argument, found[0][1]),)

    def refused(self, values: Mapping[str, object], given: set[str]) -> tuple[list[str], str] | None:
        """The first rule broken by the options ``given`` (names) with these ``values`` (the
        arguments, and facts such as ``runs``): the names given that do not apply, and why."""
        for rule in self.refuse:
            hit = [n for n in rule.names if n in given]
            if hit and rule.holds(values):
                return hit, rule.why
        return None


#: each input kind's arguments on the command line: (name, several)
ARGUMENTS = {
    "trace": (("trace", False),),
    "traces": (("traces", True),),
    "pair": (("a", False), ("b", False)),
    "run": (("paths", True),),
    "runs": (("runs", True),),
}

_DASK = ("workers", "scheduler")
_NOT_A_RUN = "{workers} and {scheduler} spread a run's rank files over Dask: give {run=True}"

COMMANDS = {
    c.name: c
    for c in (
        Command(
            "summary",
            "traces",
            refuse=(
                Refuse(("top",), "a run's summary ({run=True}) lists no kernels", "run"),
                Refuse(_DASK, _NOT_A_RUN, "run", unless=True),
            ),
        ),
        Command("summary_run", "run", devices=False),
        Command(
            "kernels",
            "trace",
            refuse=(
                Refuse(
                    ("ops",),
                    "{unclassified} lists the names no rule matched, without the ops table",
                    "unclassified",
                ),
                Refuse(("ops", "unclassified", "plot"), "{by=source} is its own table", "by", "source"),
                Refuse(("library",), "{library} applies to {by=source}", "by", "source", unless=True),
            ),
        ),
        Command("roofline", "trace"),
        Command(
            "diff",
            "pair",
            refuse=(
                Refuse(
                    (*SELECT, "annotation_b", "top", "plot"),
                    "does not apply to two folders: two runs are compared rank by rank over whole runs",
                    "runs",
                ),
                Refuse(
                    _DASK,
                    "{workers} and {scheduler} spread a run's rank files over Dask: give two folders",
                    "runs",
                    unless=True,
                ),
            ),
        ),
        Command(
            "compare",
            "traces",
            refuse=(
                Refuse(("plot",), "{plot} draws traces, not runs: leave it out with {run=True}", "run"),
                Refuse(_DASK, _NOT_A_RUN, "run", unless=True),
            ),
        ),
        Command("compare_runs", "runs", devices=False),
        Command("timeline", "trace", devices=False),
        Command("memory", "trace", select=("step", "device"), devices=False),
        Command("exposed", "trace", devices=False),
        Command("advise", "trace", devices=False),
        Command(
            "stacks",
            "trace",
            devices=False,
            refuse=(
                Refuse(("fold_layers",), "{fold_layers} applies to {by=module}", "by", "module", unless=True),
                Refuse(
                    ("library", "own"),
                    "{library} and {own} say which lines are yours: they apply to {by=line}",
                    "by",
                    "line",
                    unless=True,
                ),
                Refuse(("depth", "min_pct", "form"), "a flame graph is the whole tree", "export"),
            ),
        ),
        Command("check", "traces", devices=False, argument="candidate"),
        Command("assert_check", "traces", devices=False),  # API only: check for a test
        Command("report", "traces"),
        Command("annotate", "trace", select=(), devices=False),
        Command("hta", "trace", select=(), devices=False),
        Command("ranks", "run", select=(), devices=False),
        Command("load_run", "run", select=(), devices=False),
        Command("diff_runs", "runs", select=(), devices=False),
    )
}
