"""The package's layering stays true: data flows one way, with no import loops.

Reads every module's imports (at module level and inside functions alike) with
``ast`` and checks them against the layer order below: a module may import its
own layer or any layer beneath it, never one above, and the import graph between
modules has no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "traceview"

#: lowest first; a module's layer is the first prefix that matches its dotted name
LAYERS = [
    (
        "base",
        [
            "errors",
            "atomic",
            "numbers",
            "limits",
            "units",
            "_version",
            "domain",
            "schema",
            "devices",
            "filenames",
            "fingerprint",
            "replay",
            "temporaries",
            "deferred",
            "plain",
            "selection",
            "entry_files",
            "kept",
        ],
    ),
    ("read", ["read"]),
    ("model", ["model"]),
    ("link", ["link", "sources", "trees", "launches"]),
    ("classify", ["classify"]),
    ("load", ["cache", "load", "options", "discover", "run", "interop"]),
    ("report", ["report"]),
    # analyses, in its own order: one selection, then the words for names and figures,
    # the measures, one-trace reports, two-variant comparisons, whole runs, the HTML set
    ("analyses.select", ["analyses.select"]),
    ("analyses.wording", ["analyses.wording"]),
    ("analyses.measure", ["analyses.measure"]),
    ("analyses.trace", ["analyses.trace"]),
    ("analyses.variants", ["analyses.variants"]),
    ("analyses.runs", ["analyses.runs"]),
    ("analyses", ["analyses"]),
    ("render", ["render"]),
    ("api", ["api", "scale", "commands"]),
    ("cli", ["cli", "_entry", "__init__", "__main__"]),
]


def layer_of(module: str) -> int:
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    raise AssertionError(f"traceview.{module} is in no layer: add it to LAYERS in {__file__}")


def modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """traceview modules that ``name`` imports (relative or absolute, anywhere in the file)."""
    is_pkg = path.name == "__init__.py"
    here = name.split(".") if is_pkg and name != "__init__" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else list(here)
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("traceview"):
                target = node.module[len("traceview.") :] if node.module != "traceview" else ""
            else:
                continue
            for alias in node.names:  # "from . import x" imports a module x
                sub = f"{target}.{alias.name}" if target else alias.name
                found.add(sub if sub in known else (target or "__init__"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("traceview."):
                    found.add(alias.name[len("traceview.") :])
                elif alias.name == "traceview":
                    found.add("__init__")
    return {m for m in found if m in known and m != name}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def test_no_upward_imports(graph):
    upward = [
        f"traceview.{m} ({LAYERS[layer_of(m)][0]}) imports traceview.{d} ({LAYERS[layer_of(d)][0]})"
        for m, deps in graph.items()
        for d in deps
        if layer_of(d) > layer_of(m)
    ]
    assert not upward, "imports from a layer above:\n" + "\n".join(sorted(upward))


def test_no_import_loops(graph):
    state: dict[str, int] = {}
    loops = []

    def visit(m, stack):
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                loops.append(" -> ".join([*stack[stack.index(d) :], d]))
            elif d not in state:
                visit(d, [*stack, d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not loops, "import loops:\n" + "\n".join(loops)


def test_the_checker_sees_imports():
    """The test can fail: a known downward import is found, and an upward one would be reported."""
    mods = modules()
    g = {name: imports(name, path, set(mods)) for name, path in mods.items()}
    assert "model" in g["link"] and "analyses.select.region" in g["analyses.measure.metrics"]
    assert layer_of("render.plot") > layer_of("analyses.select.region") > layer_of("load")
    assert (
        layer_of("analyses.runs.ranks")
        > layer_of("analyses.variants.diff")
        > layer_of("analyses.trace.summary")
    )


def test_analyses_are_grouped():
    """analyses/ holds folders, one per part, and no loose module but the HTML report's set."""
    loose = sorted(p.name for p in (PKG / "analyses").glob("*.py") if p.name != "__init__.py")
    assert loose == ["report_set.py"], loose
