"""``--plot`` and ``traceview timeline``: real pictures of non-trivial size, friendly errors."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import synth
from click.testing import CliRunner

import traceview as tv
from traceview.cli import main
from traceview.errors import TraceviewError

pytest.importorskip("matplotlib")

from traceview.analyses.select.region import Selection
from traceview.analyses.trace.breakdown import breakdown
from traceview.analyses.trace.timeline import timeline
from traceview.render.plot import plot_breakdown, plot_timeline

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def story_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("plots")
    for v in ("naive", "naive_inplace", "sdpa_math", "sdpa_efficient", "sdpa_flash"):
        synth.make(d, v)
    return d


def is_png(path: Path) -> bool:
    data = path.read_bytes()
    return data[:8] == PNG_MAGIC and len(data) > 10_000


def is_svg(path: Path) -> bool:
    root = ET.parse(path).getroot()
    return root.tag.endswith("svg") and path.stat().st_size > 10_000


def test_breakdown_png_svg_html(story_dir, tmp_path):
    traces = breakdown([tv.load(p, cache=False) for p in sorted(story_dir.glob("*.json.gz"))])
    assert is_png(Path(plot_breakdown(traces, tmp_path / "b.png")))
    assert is_svg(Path(plot_breakdown(traces, tmp_path / "b.svg")))
    page = (Path(plot_breakdown(traces, tmp_path / "b.html"))).read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "</html>" in page
    svg = page[page.index("<svg") : page.rindex("</svg>") + len("</svg>")]
    assert ET.fromstring(svg).tag.endswith("svg")
    # CPU-only traces: CPU self time by op
    cpu = breakdown([tv.load(p) for p in sorted(SAMPLES.glob("*.json.gz"))])
    assert cpu.info["basis"] == "cpu"
    assert is_png(Path(plot_breakdown(cpu, tmp_path / "cpu.png")))


def test_timeline_gpu_and_cpu(story_dir, tmp_path):
    t = tv.load(story_dir / "sdpa_math.json.gz", cache=False)
    assert is_png(Path(plot_timeline(timeline(t, Selection(step=4)), tmp_path / "t.png")))
    assert is_svg(Path(plot_timeline(timeline(t), tmp_path / "t.svg")))
    cpu = tv.load(SAMPLES / "naive.json.gz")
    assert is_png(Path(plot_timeline(timeline(cpu), tmp_path / "cpu.png")))
    with pytest.raises(TraceviewError, match="has no step 99"):
        timeline(t, Selection(step=99))
    with pytest.raises(TraceviewError, match=r"must end in \.png, \.svg or \.html"):
        plot_timeline(timeline(t), tmp_path / "x.pdf")


def test_cli_plots(story_dir, tmp_path):
    runner = CliRunner()
    a, b = str(story_dir / "naive.json.gz"), str(story_dir / "sdpa_math.json.gz")
    res = runner.invoke(main, ["diff", a, b, "--plot", str(tmp_path / "d.png"), "--no-cache"])
    assert res.exit_code == 0, res.output
    assert is_png(tmp_path / "d.png") and "Findings" in res.stdout
    res = runner.invoke(main, ["compare", str(story_dir), "--plot", str(tmp_path / "c.svg"), "--no-cache"])
    assert res.exit_code == 0, res.output
    assert is_svg(tmp_path / "c.svg")
    res = runner.invoke(main, ["compare", str(SAMPLES), "--plot", str(tmp_path / "cpu.html")])
    assert res.exit_code == 0, res.output
    assert "<svg" in (tmp_path / "cpu.html").read_text()
    res = runner.invoke(main, ["timeline", a, "--plot", str(tmp_path / "t.png"), "--step", "5", "--no-cache"])
    assert res.exit_code == 0, res.output
    assert is_png(tmp_path / "t.png")


def test_cli_plot_errors_are_one_line(story_dir, tmp_path):
    runner = CliRunner()
    a = str(story_dir / "naive.json.gz")
    res = runner.invoke(main, ["timeline", str(tmp_path / "missing.json"), "--plot", str(tmp_path / "t.png")])
    assert res.exit_code == 1 and len(res.stderr.strip().splitlines()) == 1 and "no such file" in res.stderr
    assert "Traceback" not in res.output
    res = runner.invoke(main, ["diff", a, a, "--plot", str(tmp_path / "d.jpg")])
    assert res.exit_code == 1 and "must end in .png, .svg or .html" in res.stderr
    res = runner.invoke(main, ["timeline", a, "--plot", str(tmp_path / "t.png"), "--step", "77"])
    assert res.exit_code == 1 and "has no step 77" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    before = set(tmp_path.iterdir())
    res = runner.invoke(main, ["timeline", a, "--format", "json", "--no-cache"])
    assert res.exit_code == 0, res.output  # no --plot: the table alone, no picture
    assert json.loads(res.stdout)["tables"]["timeline"] and set(tmp_path.iterdir()) == before


def test_without_matplotlib_plot_says_install(story_dir, tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    a = str(story_dir / "naive.json.gz")
    res = CliRunner().invoke(main, ["diff", a, a, "--plot", str(tmp_path / "d.png")])
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "install traceview[plot]" in lines[0]
    res = CliRunner().invoke(main, ["timeline", a, "--plot", str(tmp_path / "t.png")])
    assert res.exit_code == 1 and "install traceview[plot]" in res.stderr
    # without --plot nothing needs matplotlib
    res = CliRunner().invoke(main, ["diff", a, a, "--no-cache"])
    assert res.exit_code == 0, res.output


def test_long_trace_labels_do_not_overlap():
    """diff --plot of the H100 and MI300 BERT traces: the two axis labels never touch."""
    from corpus import CORPUS

    files = [
        CORPUS / "tracelens" / "h100__gaunernst_bert-small-uncased__1016001.json.gz",
        CORPUS / "rocm" / "tracelens__mi300__gaunernst_bert-small-uncased__1016001.json.gz",
    ]
    if not all(f.exists() for f in files):
        pytest.skip(f"corpus not found at {CORPUS}")
    pytest.importorskip("matplotlib")
    import traceview as tv
    from traceview.analyses.trace.breakdown import breakdown
    from traceview.render.plot import breakdown_figure

    traces = [tv.load(f) for f in files]
    fig = breakdown_figure(breakdown(traces, labels=[f"A: {t.label}" for t in traces]))
    fig.canvas.draw()
    boxes = [lbl.get_window_extent() for lbl in fig.axes[0].get_xticklabels()]
    assert len(boxes) == 2 and not boxes[0].overlaps(boxes[1])


#: op names that matplotlib would read as markup: mathtext, a macro it does not know, a
#: label it leaves out of legends
HOSTILE = [r"$\frac{A}{B}$", r"$\undefinedmacro{x}$", "_hidden_op", "aten::mm"]


@pytest.fixture
def hostile_trace(tmp_path) -> Path:
    """A CPU-only trace whose ops (legend entries) and file name (titles, tick labels) are markup."""
    b = synth.Builder()
    for n in range(3):
        b.step(n, [synth.op(name) for name in HOSTILE])
    return Path(synth.write(tmp_path / r"$\frac{A}{B}$.json.gz", synth.kineto(b.events)))


def _drawn_literally(fig, text) -> bool:
    """``text`` takes the room of its characters drawn as plain text (mathtext draws
    ``$\\frac{A}{B}$`` as a narrow fraction; an unknown macro fails to draw at all)."""
    renderer = fig.canvas.get_renderer()
    ref = fig.text(
        0, 0, text.get_text(), fontproperties=text.get_fontproperties(), parse_math=False, usetex=False
    )
    try:
        return ref.get_window_extent(renderer).width == pytest.approx(text.get_window_extent(renderer).width)
    finally:
        ref.remove()


def test_plot_text_is_literal(hostile_trace):
    import matplotlib.text

    from traceview.render.plot import breakdown_figure, timeline_figure

    t = tv.load(hostile_trace, cache=False)
    figures = [breakdown_figure(breakdown([t], labels=[r"$x^2$ \alpha_1"])), timeline_figure(timeline(t))[0]]
    for fig in figures:
        fig.canvas.draw()
        legend = fig.axes[0].get_legend()
        assert sorted(x.get_text() for x in legend.get_texts()) == sorted(HOSTILE)  # _hidden_op too
        texts = [x for x in fig.findobj(matplotlib.text.Text) if "$" in x.get_text() and x.get_visible()]
        assert len(texts) >= 3  # legend entries, the title, a tick label
        assert all(_drawn_literally(fig, x) for x in texts), [x.get_text() for x in texts]
        assert any(x.get_text() == r"$\frac{A}{B}$" for x in texts)


def test_cli_plots_of_markup_names(hostile_trace, tmp_path):
    """Before: exit 3 (ValueError from mathtext) on every picture of this trace."""
    runner = CliRunner()
    for argv in (
        ["compare", str(hostile_trace), "--plot", str(tmp_path / "c.png")],
        ["timeline", str(hostile_trace), "--plot", str(tmp_path / "t.svg")],
        ["report", str(hostile_trace), "-o", str(tmp_path / "r.html")],
    ):
        res = runner.invoke(main, [*argv, "--no-cache"])
        assert res.exit_code == 0, (argv, res.output)
    assert is_png(tmp_path / "c.png") and is_svg(tmp_path / "t.svg")


def test_plot_text_shows_controls_escaped(tmp_path):
    """An ESC or BEL in an op or file name is drawn escaped (as every text output shows it):
    no font has those glyphs, and matplotlib's missing-glyph warning printed them raw."""
    import subprocess

    import matplotlib.text

    from traceview.render.plot import breakdown_figure, timeline_figure
    from traceview.render.safe import UNSAFE

    b = synth.Builder()
    for n in range(2):
        b.step(n, [synth.op("evil\x1b]0;T\x07op"), synth.op("aten::mm")])
    path = Path(synth.write(tmp_path / "a\x1b[2J\nb.json.gz", synth.kineto(b.events)))
    t = tv.load(path, cache=False)
    for fig in (breakdown_figure(breakdown([t])), timeline_figure(timeline(t))[0]):
        fig.canvas.draw()
        texts = [x.get_text() for x in fig.findobj(matplotlib.text.Text)]
        assert not [
            x for x in texts if UNSAFE.search(x.replace("\n", ""))
        ]  # wrapping adds real newlines only
        assert "evil\\x1b]0;T\\x07op" in texts
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "traceview",
            "timeline",
            str(path),
            "--plot",
            str(tmp_path / "t.svg"),
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "\x1b" not in r.stderr.replace(str(path), ""), r.stderr
