"""One front door (issue 21, items 1 and 2): the CLI is a shell over ``traceview.api``.

The CLI imports no analysis (checked with ``ast``, as test_layers does); no setting travels
on the click context; every command has an API function whose signature shows the same
options (no ``**kw``); and an option a command cannot apply is a usage error, never dropped.
"""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from corpus import CORPUS
from test_layers import PKG, imports, modules

import traceview as tv
from traceview import api
from traceview.cli import main

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
RANKS = sorted((CORPUS / "param").glob("dlrm_kineto__worker[01]_*.json.gz"))
needs_ranks = pytest.mark.skipif(len(RANKS) < 2, reason="corpus absent (param dlrm ranks)")

#: CLI option (click parameter name) -> the API keyword it becomes
KEYWORD = {
    "max_size": "max_bytes",
    "no_cache": "cache",
    "no_ns_rounding": "ns_rounding",
    "fmt": None,
    "out": None,
    "wide": None,
    "output_file": None,
    "plot": None,
}
#: commands that are not analyses of traces (the cache folder, running a collector)
NOT_ANALYSES = {"cache", "collect"}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_cli_imports_no_analysis():
    mods = modules()
    known = set(mods)
    found = [
        f"traceview.{m} imports traceview.{d}"
        for m, path in mods.items()
        if m == "cli" or m.startswith("cli.")
        for d in imports(m, path, known)
        if d == "analyses" or d.startswith("analyses.")
    ]
    assert not found, "\n".join(found)


def test_the_import_check_sees_an_analysis_import():
    """It can fail: api imports analyses, and the same reader sees it."""
    mods = modules()
    assert any(d.startswith("analyses") for d in imports("api", mods["api"], set(mods)))


def test_no_setting_travels_on_the_click_context():
    uses = [
        f"{p.relative_to(PKG)}:{i}"
        for p in PKG.rglob("*.py")
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "ctx.meta" in line
    ]
    assert not uses, uses


def commands():
    return [c for name, c in sorted(main.commands.items()) if name not in NOT_ANALYSES]


@pytest.mark.parametrize("command", commands(), ids=lambda c: c.name)
def test_every_command_has_its_api_function_with_its_options(command):
    fn = getattr(api, command.name)
    params = inspect.signature(fn).parameters
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values()), f"{command.name}: **kw hides options"
    wanted = {KEYWORD.get(p.name, p.name) for p in command.params if isinstance(p, click.Option)}
    wanted -= {None, "help", "version"}
    if "fmt" in {p.name for p in command.params}:  # --format/--wide/-o say how to show the result
        wanted.discard("output")
    if command.name in ("diff", "compare"):
        wanted.discard("plot")
    missing = sorted(w for w in wanted if w not in params)
    assert not missing, f"tv.{command.name} lacks {missing}"
    assert getattr(tv, command.name) is fn and fn.__doc__


def test_every_api_function_takes_the_load_options_as_keywords():
    for name in ("summary", "kernels", "diff", "compare", "timeline", "report", "annotate", "hta", "ranks"):
        params = inspect.signature(getattr(tv, name)).parameters
        for kw in ("rules", "devices", "salvage", "max_bytes", "max_ratio", "cache", "options"):
            assert params[kw].kind is inspect.Parameter.KEYWORD_ONLY, (name, kw)


def test_report_class_and_new_functions_are_exported():
    from traceview.report import Report

    assert tv.Report is Report and callable(tv.report) and callable(tv.timeline) and callable(tv.annotate)
    assert {"Report", "LoadOptions", "timeline", "annotate", "report"} <= set(tv.__all__)


def test_selection_twice_is_refused():
    with pytest.raises(TypeError, match="not both"):
        tv.summary(SAMPLES / "naive.json.gz", sel=tv.Selection(step=1), step=1)
    with pytest.raises(TypeError, match="not both"):
        tv.summary(SAMPLES / "naive.json.gz", options=tv.LoadOptions(cache=False), salvage=True)


def test_timeline_api_is_the_cli_table(tmp_path):
    pytest.importorskip("matplotlib")
    path = SAMPLES / "sdpa_math.json.gz"
    report = tv.timeline(path, cache=False)
    out = run("timeline", path, "--plot", tmp_path / "t.png", "--format", "csv", "--no-cache")
    assert out.exit_code == 0, out.output
    assert isinstance(report, tv.Report) and len(next(iter(report.tables.values()))) > 0


def test_annotate_api_writes_the_trace(tmp_path):
    counts = tv.annotate(SAMPLES / "sdpa_math.json.gz", tmp_path / "a.json", cache=False)
    out = run("annotate", SAMPLES / "sdpa_math.json.gz", "-o", tmp_path / "b.json", "--no-cache")
    assert out.exit_code == 0 and f"{counts['counter_events']} counter samples" in out.output, out.output
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_report_api_writes_html(tmp_path):
    pytest.importorskip("matplotlib")
    text = tv.report(
        [SAMPLES / "naive.json.gz", SAMPLES / "sdpa_flash.json.gz"], output=tmp_path / "r.html", cache=False
    )
    assert text.startswith("<!") and (tmp_path / "r.html").read_text(encoding="utf-8") == text


def test_load_options_reach_the_trace(tmp_path):
    """``--devices`` travels in LoadOptions down to the Trace, not on the side."""
    devices = Path(tv.__file__).parent / "rules" / "devices.toml"
    t = tv.LoadOptions(devices=str(devices), cache=False).checked().load(SAMPLES / "naive.json.gz")
    assert t.devices == str(devices)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for name in ("runA", "runB"):
        (root / name).mkdir()
        for p in RANKS:
            os.symlink(p, root / name / p.name)
    return root / "runA", root / "runB"


@needs_ranks
def test_diff_of_two_runs_refuses_what_it_cannot_apply(two_runs):
    a, b = two_runs
    out = run("diff", a, b, "--step", 99, "--device", 7, "--kind", "memset")
    assert out.exit_code == 2, out.output
    assert "--step" in out.output and "--device" in out.output and "--kind" in out.output


@needs_ranks
def test_diff_of_two_runs_still_runs(two_runs):
    a, b = two_runs
    out = run("diff", a, b, "--no-cache", "--format", "csv")
    assert out.exit_code == 0, out.output


@needs_ranks
def test_summary_run_refuses_top():
    out = run("summary", *RANKS, "--run", "--top", 3)
    assert out.exit_code == 2 and "--top" in out.output, out.output


def test_unclassified_refuses_ops():
    out = run("kernels", SAMPLES / "naive.json.gz", "--unclassified", "--ops")
    assert out.exit_code == 2 and "--ops" in out.output, out.output


def test_load_options_are_plain_data_for_dask_workers(tmp_path):
    """Checked options pickle whole, as Dask sends them to its workers (``ranks --workers N --rules
    FILE`` sent a RuleSet, which does not pickle)."""
    import pickle

    rules = tmp_path / "r.toml"
    rules.write_text('[[rule]]\nid = "mine"\npattern = "^naive_thing"\ncategory = "gemm"\n', encoding="utf-8")
    opts = tv.LoadOptions(rules=str(rules), cache=False).checked()
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_a_bad_devices_file_is_one_line_before_loading(tmp_path):
    bad = tmp_path / "d.toml"
    bad.write_text("not toml [", encoding="utf-8")
    out = run("kernels", SAMPLES / "naive.json.gz", "--devices", bad, "--no-cache")
    assert out.exit_code == 1 and str(bad) in out.output and "Traceback" not in out.output, out.output


@needs_ranks
def test_ranks_on_dask_workers_take_a_rule_file(tmp_path):
    """``--rules`` travels to the workers as a path (it was a RuleSet: exit 3, "internal error")."""
    pytest.importorskip("distributed")
    rules = tmp_path / "r.toml"
    rules.write_text('[[rule]]\nid = "mine"\npattern = "^naive_thing"\ncategory = "gemm"\n', encoding="utf-8")
    out = run("ranks", *RANKS, "--workers", 2, "--rules", rules, "--no-cache", "--format", "csv")
    assert out.exit_code == 0 and "internal error" not in out.output, out.output


@needs_ranks
def test_the_api_refuses_what_a_run_cannot_apply(two_runs):
    a, b = two_runs
    with pytest.raises(TypeError, match="does not apply"):
        tv.diff(a, b, step=99, device=7, kind="memset")
    with pytest.raises(TypeError, match="run=True"):
        tv.summary(a, run=True, top=3)


# ------------------------------------------------------------------ nothing on the side (item 2)

#: module-level containers a function may write: a cache of a pure function, keyed by what it reads
MODULE_STATE_ALLOWED = {
    ("cache.py", "_digest_memo"),  # the code digest, keyed by the files' stat
    # process-wide by nature (issue 38): the files being read while a command runs (no write may
    # target them), the temporary files that exist now and the signal handlers saved while they
    # do (SIGTERM/SIGHUP remove them); each is emptied when its block ends
    ("atomic.py", "_INPUTS"),
    ("temporaries.py", "_LIVE"),
    ("temporaries.py", "_SAVED"),
    ("temporaries.py", "_ARMED"),  # the blocks open now in which threads may make temporary files
    ("read/columns.py", "_GC_PAUSE"),  # the garbage collector's pauses open now, and its state before them
    # why this process's output may not be recorded for a replay (a file written, a rebuilt entry)
    ("replay.py", "_SPOILED"),
    ("replay.py", "_DEPENDS"),  # and the files beyond its arguments that its output depends on
    # how many lines the command said on stderr: an output that said any is not kept to show again
    ("cli/common.py", "_SAID"),
    # whether the command showed what a trace's cache entry kept (a replay may then record it)
    ("kept.py", "_SERVED"),
}


def _trees():
    return [
        (p.relative_to(PKG).as_posix(), ast.parse(p.read_text(encoding="utf-8"))) for p in PKG.rglob("*.py")
    ]


def id_calls(tree) -> list[int]:
    """Lines calling the builtin ``id``: an ``id()`` key outlives its object and can be reused."""
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "id"
    ]


def import_time_calls(tree) -> list[int]:
    """Module-level statements that only call (their effect is on someone else's state: a registration)."""
    return [n.lineno for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]


def _empty_containers(tree) -> set[str]:
    names = set()
    for n in tree.body:
        v = n.value if isinstance(n, (ast.Assign, ast.AnnAssign)) else None
        empty = (isinstance(v, ast.Dict) and not v.keys) or (
            isinstance(v, (ast.List, ast.Set)) and not v.elts
        )
        empty |= (
            isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in ("dict", "list", "set")
        )
        targets = n.targets if isinstance(n, ast.Assign) else [getattr(n, "target", None)]
        names |= {t.id for t in targets if empty and isinstance(t, ast.Name)}
    return names


def filled_registries(tree) -> set[str]:
    """Module-level empty containers that some function fills (a registry or a memo on the side)."""
    names, found = _empty_containers(tree), set()
    for n in ast.walk(tree):
        call = isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        if call and isinstance(n.func.value, ast.Name) and n.func.value.id in names:
            found.add(n.func.value.id)
        for t in n.targets if isinstance(n, ast.Assign) else []:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in names:
                found.add(t.value.id)
    return found


def test_no_id_keyed_memo_and_no_registry_filled_on_import():
    found = []
    for rel, tree in _trees():
        found += [f"{rel}:{line}: id()" for line in id_calls(tree)]
        if rel != "__main__.py":  # ``python -m traceview`` runs main() on import, as it must
            found += [f"{rel}:{line}: a call at import" for line in import_time_calls(tree)]
        found += [f"{rel}: {name} filled by a function" for name in filled_registries(tree)]
    found = [
        f for f in found if not any(f == f"{r}: {n} filled by a function" for r, n in MODULE_STATE_ALLOWED)
    ]
    assert not found, "\n".join(found)


def test_the_scan_sees_what_was_removed():
    """It can fail: the memo keyed by id(trace) and the display filled by render, as they were."""
    memo = "_MEMO: dict = {}\ndef memo(t, what, make):\n    _MEMO[(id(t), what)] = make(t)\n"
    display = "_DISPLAY = {}\ndef set_display(text):\n    _DISPLAY.update(text=text)\n"
    assert id_calls(ast.parse(memo)) and filled_registries(ast.parse(memo)) == {"_MEMO"}
    assert filled_registries(ast.parse(display)) == {"_DISPLAY"}
    assert import_time_calls(ast.parse("from . import report\nreport.set_display(text=str)\n")) == [2]


def test_a_report_shows_itself_without_importing_render_first():
    """``str(report)`` works in a process that imported only the report layer (render filled it before)."""
    code = (
        "from traceview.report import Report; import pandas as pd\n"
        "r = Report(kind='k', title='T', tables={'t': pd.DataFrame({'a': [1]})})\n"
        "print(str(r)); print(len(r._repr_html_()) > 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "T" in out.stdout and out.stdout.strip().endswith("True"), out.stderr


def test_work_is_kept_with_its_trace():
    from traceview.analyses.measure.work import trace_work

    t = tv.load(SAMPLES / "naive.json.gz", cache=False)
    w = trace_work(t)
    assert trace_work(t) is w and t.derived["work"] is w
    assert trace_work(tv.load(SAMPLES / "naive.json.gz", cache=False)) is not w


# ------------------------------------------------------------------ one declaration (issue 37)


def test_the_keywords_are_declared_once():
    """api.py names the selection and load keywords in one place (``Options``): no function lists
    them, and each function's signature (what help() shows) holds those its Command applies."""
    from traceview.commands import COMMANDS, LOAD, SELECT

    tree = ast.parse((PKG / "api.py").read_text(encoding="utf-8"))
    listed = [
        f"{f.name}: {a.arg}"
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef)
        for a in f.args.kwonlyargs
        if a.arg in (*SELECT, *LOAD, "sel", "options")
    ]
    assert not listed, listed
    for name, spec in COMMANDS.items():
        params = inspect.signature(getattr(api, name)).parameters
        assert [p for p in params if p in SELECT] == list(spec.select), name
        assert all(params[k].kind is inspect.Parameter.KEYWORD_ONLY for k in (*LOAD, "options", "on_warning"))


def test_an_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError, match="stream"):
        tv.memory(SAMPLES / "naive.json.gz", stream=7)  # memory selects by step and device only
    with pytest.raises(TypeError, match="colour"):
        tv.exposed(SAMPLES / "naive.json.gz", colour="red")


def test_the_cli_offers_the_options_of_the_spec():
    from traceview.commands import COMMANDS, SELECT

    for name, command in main.commands.items():
        if name in NOT_ANALYSES:
            continue
        spec, offered = COMMANDS[name], {p.name for p in command.params}
        assert offered & set(SELECT) == set(spec.select), name
        assert ("devices" in offered) == spec.devices, name


#: CLI options whose default the CLI decides from elsewhere: stacks' --form from --format
DEFAULT_FROM_ELSEWHERE = {("stacks", "form")}


@pytest.mark.parametrize("command", commands(), ids=lambda c: c.name)
def test_every_option_has_the_api_default(command):
    """An option left out means the same in both: the CLI's default is the API keyword's (so ``diff``
    keeps 20 rows in both, and ``--no-ns-rounding`` off is ``ns_rounding=True``)."""
    params = inspect.signature(getattr(api, command.name)).parameters
    flipped = {"no_ns_rounding": "ns_rounding"}  # a flag that turns the keyword off
    from traceview.cli.common import _load_options
    from traceview.commands import LOAD

    assert _load_options() == tv.LoadOptions()  # the load options the CLI builds when none is given
    ctx = click.Context(command)
    for p in command.params:
        name = flipped.get(p.name, p.name)
        if not isinstance(p, click.Option) or p.required or name not in params:
            continue
        if (command.name, name) in DEFAULT_FROM_ELSEWHERE or name in LOAD:  # LoadOptions: above
            continue
        default = p.get_default(ctx)
        default = (not default) if p.name in flipped else default
        if p.multiple:  # none given is an empty tuple in both
            default = tuple(default) if isinstance(default, (list, tuple)) else ()
        expected = params[name].default
        same = default == expected or (p.multiple and default == () and expected is None)  # check --baseline
        assert same, (command.name, p.name, default, expected)
