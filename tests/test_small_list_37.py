"""Issue 37's small list, one test each: an edited device file is read again, no CLI command
changes the Report the API returned, and help(tv) opens with a quick start."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

import traceview as tv
from traceview.devices import find_device

PKG = Path(__file__).resolve().parents[1] / "traceview"

TABLE = """version = 1
[[device]]
name = "{name}"
match = 'Test GPU 9000'
memory_gbps = {bw}
source = "a test"
"""


def test_an_edited_device_file_is_read_again(tmp_path):
    path = tmp_path / "devices.toml"
    path.write_text(TABLE.format(name="first", bw=100), encoding="utf-8")
    assert find_device("Test GPU 9000", None, str(path)).name == "first"
    path.write_text(TABLE.format(name="second, edited", bw=200), encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a coarse clock may not tick
    d = find_device("Test GPU 9000", None, str(path))
    assert d.name == "second, edited" and d.memory_gbps == 200


def test_no_cli_command_changes_a_report_the_api_returned():
    """The CLI renders what the API returns; removing or replacing a table of it in place would
    make the API's result depend on who called it (cli/memory.py deleted its timeline)."""
    found = []
    for f in sorted((PKG / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, (ast.Delete, ast.Assign)) else []
            for t in targets:
                if isinstance(t, ast.Subscript) and re.search(
                    r"\.(tables|findings|notes|info)$", ast.unparse(t.value)
                ):
                    found.append(f"{f.name}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.Call) and re.search(
                r"\.(tables|findings|notes|info)\.(pop|clear|update|append|extend|remove)$",
                ast.unparse(node.func),
            ):
                found.append(f"{f.name}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "\n".join(found)


def test_help_opens_with_a_quick_start_that_names_real_functions():
    first = tv.__doc__.split("\n\n")
    assert first[1].startswith("Quick start")
    example = first[2]
    for name in re.findall(r"\btv\.(\w+)\(", example):
        assert callable(getattr(tv, name)), name
    assert "__getattr__" not in "\n\n".join(first[:4])  # internals come after, not first


SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"


def test_top_0_means_every_row_in_the_api_as_in_the_cli():
    import json

    from click.testing import CliRunner

    from traceview.cli import main

    a, b = str(SAMPLES / "naive.json.gz"), str(SAMPLES / "sdpa_math.json.gz")
    every = tv.diff(a, b, top=None)
    zero = tv.diff(a, b, top=0)
    assert {k: len(v) for k, v in zero.tables.items()} == {k: len(v) for k, v in every.tables.items()}
    assert len(every["cpu_ops"]) > 0
    out = CliRunner().invoke(main, ["diff", a, b, "--top", "0", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert {k: len(v) for k, v in json.loads(out.stdout)["tables"].items()} == {
        k: len(v) for k, v in zero.tables.items()
    }


def test_every_cited_table_is_found_by_report_lookup_info_included():
    """Evidence that cites ``info`` is looked up like every other table: report["info"]."""
    r = tv.diff(str(SAMPLES / "naive.json.gz"), str(SAMPLES / "sdpa_math.json.gz"))
    cited = {e["table"] for f in r.findings for e in getattr(f, "evidence", ())}
    for name in cited:
        assert len(r[name]) >= 1, name
    info = r["info"]
    assert len(info) == 1 and info["a_label"].iloc[0] == r.info["a_label"]


def test_report_of_one_trace_is_its_summary_and_tables_scroll_in_their_box(tmp_path):
    pytest.importorskip("matplotlib")
    page = tv.report([str(SAMPLES / "naive.json.gz")], output=tmp_path / "one.html")
    assert "Summary of naive" in page
    assert "Compare 1 traces" not in page and "nothing to compare it with" not in page
    tables = page.count('<table class="report">')
    assert tables > 0 and page.count('<div class="scroll"><table class="report">') == tables
    two = tv.report([str(SAMPLES / "naive.json.gz"), str(SAMPLES / "naive_inplace.json.gz")])
    assert "Compare 2 traces" in two


def test_a_loaded_trace_with_other_load_options_is_refused_not_silently_kept(tmp_path):
    """tv.compare([tv.load(P)], devices=F) used to rate the device without F; now the call refuses
    in one line, and the same options (or none) go through."""
    p = str(SAMPLES / "naive.json.gz")
    table = tmp_path / "devices.toml"
    table.write_text(TABLE.format(name="mine", bw=100), encoding="utf-8")
    t = tv.load(p)
    with pytest.raises(TypeError, match=r"was loaded with devices=None.*pass its path") as e:
        tv.compare([t], devices=table)
    assert "\n" not in str(e.value)
    with pytest.raises(TypeError, match="salvage"):
        tv.summary(t, salvage=True)
    assert tv.summary(t).kind == "summary"  # no options given: the Trace as loaded
    mine = tv.load(p, devices=table)
    assert tv.compare([mine], devices=table).kind == "compare"  # the options it was loaded with
    assert tv.compare([p], devices=table).kind == "compare"  # a path is loaded with them
