"""``traceview stacks``: GPU time per place in the code (``tv.stacks``), and its flame-graph exports."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from ..atomic import write_text
from ..render import FORMATS
from ..render.safe import visible
from .common import _output, command_options, emit, friendly, refuse, say
from .group import main

#: the flame-graph formats and the file names that say them (checked before a plain .json)
EXPORTS = {"folded": (".folded",), "speedscope": (".speedscope.json",)}


def _export_named(path) -> str | None:
    name = Path(path).name.lower()
    return next((fmt for fmt, ends in EXPORTS.items() if name.endswith(ends)), None)


def _stacks_output(fmt, wide, path):
    """(export format or None, Output or the export's path): ``--format folded|speedscope`` or a
    file named ``*.folded`` / ``*.speedscope.json`` is an export; anything else is every command's
    ``--format`` (common._output)."""
    named = _export_named(path) if path is not None else None
    if named is not None and fmt is not None and fmt != named:
        why = f"{visible(path)} names a {named} file but --format is {fmt}"
        raise click.BadParameter(why, param_hint="'-o' / '--output'")
    if fmt in EXPORTS or (fmt is None and named is not None):
        fmt = fmt or named
        if path is not None and named != fmt:
            raise click.BadParameter(
                f"{visible(path)}: a {fmt} file ends in {EXPORTS[fmt][0]}", param_hint="'-o' / '--output'"
            )
        return fmt, _output("json", wide, path).path  # the same folder check as every output
    return None, _output(fmt, wide, path)


def stacks_format_option(f):
    """``--format`` (the report formats, folded and speedscope), ``--wide`` and ``-o``."""

    @functools.wraps(f)
    def wrapper(*args, fmt, wide, output, **kwargs):
        export, out = friendly(_stacks_output)(fmt, wide, output)
        return f(*args, out=out, export=export, **kwargs)

    opts = [
        click.option(
            "--format",
            "fmt",
            type=click.Choice([*FORMATS, *EXPORTS]),
            default=None,
            show_default="table",
            help="Output format; folded (flamegraph.pl, inferno) and speedscope (its JSON file "
            "format) are flame graphs of the whole tree, GPU time as the weight. With -o: the file "
            "name's extension (.folded, .speedscope.json, .json, ...), else table.",
        ),
        click.option(
            "--wide", is_flag=True, help="Table format: print whole names, not fitted to the terminal."
        ),
        click.option(
            "-o",
            "--output",
            "output",
            type=click.Path(dir_okay=False),
            default=None,
            metavar="FILE",
            help="Write the output to FILE (whole or not at all) instead of stdout.",
        ),
    ]
    for opt in reversed(opts):
        wrapper = opt(wrapper)
    return wrapper


@main.command()
@click.option(
    "--by",
    type=click.Choice(["frame", "module", "line"]),
    default="frame",
    show_default=True,
    help="frame: the call tree of Python and nn.Module frames; module: the nn.Module tree; line: "
    "your lines, at the line of the call where the source file is here.",
)
@click.option(
    "--fold-layers", is_flag=True, help="With --by module: every instance of a module class as one."
)
@click.option("--depth", type=click.IntRange(min=0), default=None, help="Show nodes at most this deep.")
@click.option(
    "--min-pct",
    type=click.FloatRange(0, 100),
    default=None,
    help="Show nodes with at least this % of the time.",
)
@click.option(
    "--form",
    type=click.Choice(["tree", "table"]),
    default=None,
    help="tree: frames indented under their callers; table: one row per node with its path "
    "(default: tree for the table and markdown formats, table for json and csv).",
)
@click.option(
    "--library",
    multiple=True,
    metavar="PATTERN",
    help="A file (utils.py) or folder (mylib/) that is not your code, beside traceview/rules/sources.toml.",
)
@click.option(
    "--own",
    multiple=True,
    metavar="PATTERN",
    help="A file or folder/ that is your code though the rules say library (transformers/); repeatable.",
)
@click.option(
    "--source-root",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    metavar="DIR",
    help="Where the trace's source files are (default: the current folder), to find the line of "
    "each call; files under it are parsed, never run.",
)
@stacks_format_option
@command_options("stacks")
@friendly
def stacks(
    trace, by, fold_layers, depth, min_pct, form, library, own, source_root, out, export, sel, options
):
    """GPU time per place in your code, from a trace recorded with with_stack=True: a call tree of
    Python and nn.Module frames with inclusive and self GPU time, kernels, FLOPs and bytes
    allocated per node (CPU op self time on a trace without GPU activity). Kernels reach a frame
    through the op that launched them; what has no stack or no op keeps its own node."""
    from .. import api

    refuse("stacks", by=by, export=export)
    if export is None and form is None:
        form = "tree" if out.fmt in ("table", "markdown", "html") else "table"
    report = api.stacks(
        trace,
        sel=sel,
        by=by,
        fold_layers=fold_layers,
        depth=depth,
        min_pct=min_pct,
        form=form or "table",
        library=tuple(library),
        own=tuple(own),
        source_root=source_root,
        options=options,
        on_warning=say,
    )
    if export is None:
        return emit(report, out)
    from ..render.flame import render_folded, render_speedscope

    text = (render_folded if export == "folded" else render_speedscope)(report)
    if out is None:
        return click.echo(text, nl=False)
    write_text(out, text)
    click.echo(f"wrote {visible(str(out))}", err=True)
