"""``import traceview`` loads only what loading needs (issue 23): the analyses, renderers and
``api`` are imported the first time a command or one of those modules is asked for, and the
package still offers every name of ``__all__``, lists it in ``dir()``, and shows a Report as
it did when ``render`` was imported eagerly. Each check runs in a fresh interpreter, since the
question is what one import brings in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "sample_traces" / "naive.json.gz"
HEAVY = ("traceview.render", "traceview.analyses", "traceview.api")


def fresh(code: str, tmp_path) -> dict:
    """Run ``code`` in a new interpreter (its own cache folder); it prints one JSON object."""
    env = {**os.environ, "TRACEVIEW_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_loading_imports_no_analysis_and_no_renderer(tmp_path):
    got = fresh(
        "import json, sys\nimport traceview as tv\n"
        f"t = tv.load({str(SAMPLE)!r}, cache=False)\n"
        f"heavy = sorted(m for m in sys.modules if m.startswith({HEAVY!r}))\n"
        "print(json.dumps({'events': len(t.events), 'kernels': len(t.kernels), 'heavy': heavy}))",
        tmp_path,
    )
    assert got["heavy"] == [], got["heavy"]
    assert got["events"] > 0


SHOW = (
    "t = tv.load({path!r}, cache=False)\nr = tv.summary(t)\n"
    "print(json.dumps({{'text': str(r), 'html': r._repr_html_(), "
    "'table': tv.render.render(r, 'table', rich=False, width=None)}}))"
)


def test_a_report_shows_as_when_render_was_imported_first(tmp_path):
    """The lazy package against the old order (``render`` imported before anything else): the
    same text, notebook HTML and table, so nothing depended on that import's side effects."""
    lazy = fresh("import json\nimport traceview as tv\n" + SHOW.format(path=str(SAMPLE)), tmp_path)
    eager = fresh(
        "import json\nimport traceview.render\nimport traceview as tv\n" + SHOW.format(path=str(SAMPLE)),
        tmp_path,
    )
    assert lazy["text"] and "<table" in lazy["html"]
    assert lazy == eager


def test_every_exported_name_and_module_is_there_on_first_use(tmp_path):
    """``tv.report`` is the HTML report function even when the module ``traceview.report`` was
    imported first (an import sets the package attribute to the module it loads)."""
    got = fresh(
        "import json, types\nimport traceview.report\nfrom traceview.report import Report\n"
        "import traceview as tv\nlisted = set(dir(tv))\n"
        "missing = [n for n in tv.__all__ if getattr(tv, n, None) is None]\n"
        "modules = [n for n in tv.__all__ if isinstance(getattr(tv, n), types.ModuleType)]\n"
        "print(json.dumps({'unlisted': sorted(set(tv.__all__) - listed), 'missing': missing,\n"
        "  'modules': modules, 'report': tv.report is tv.api.report, 'Report': tv.Report is Report,\n"
        "  'render': tv.render.html.__name__, 'load': tv.load.__module__}))",
        tmp_path,
    )
    assert got == {
        "unlisted": [],
        "missing": [],
        "modules": [],
        "report": True,
        "Report": True,
        "render": "traceview.render.html",
        "load": "traceview.load",
    }


def test_an_unknown_name_is_an_attribute_error(tmp_path):
    got = fresh(
        "import json, sys\nimport traceview as tv\n"
        "print(json.dumps({'has': hasattr(tv, 'no_such_name'), 'api': 'traceview.api' in sys.modules}))",
        tmp_path,
    )
    assert got == {"has": False, "api": False}


def test_import_traceview_imports_no_pandas_and_names_stay_the_functions(tmp_path):
    """``import traceview`` imports neither pandas nor numpy (the command line's replay answers
    before them, issue 35); ``load``, ``classify`` and ``report`` stay the functions however their
    submodules were first imported (an import sets the package attribute to the module)."""
    got = fresh(
        "import json, sys\nimport traceview as tv\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'numpy', 'click'))\n"
        "import traceview.load, traceview.classify, traceview.report, traceview.cli\n"
        "from traceview import load\n"
        "print(json.dumps({'heavy': heavy, 'names': [f.__module__ + '.' + f.__name__ for f in\n"
        "  (tv.load, tv.classify, tv.report, load)], 'Report': tv.Report.__module__,\n"
        "  'Trace': tv.Trace.__name__, 'LoadOptions': tv.LoadOptions.__name__}))",
        tmp_path,
    )
    assert got == {
        "heavy": [],
        "names": [
            "traceview.load.load",
            "traceview.classify.classify",
            "traceview.api.report",
            "traceview.load.load",
        ],
        "Report": "traceview.report",
        "Trace": "Trace",
        "LoadOptions": "LoadOptions",
    }


def test_the_command_line_parses_without_pandas(tmp_path):
    """Importing the command line and asking it for its help or a command's usage imports neither
    pandas, numpy nor pyarrow: click declares every option from plain data (``--format``'s names,
    the selection, the load options), and a command imports the library when it runs.
    ``traceview --help`` and a usage error then answer in a fraction of the time. ``--version``
    names the decoder, and looks it up when asked."""
    got = fresh(
        "import json, sys, contextlib, io\nimport traceview.cli\n"
        "from traceview.cli import main\nout = io.StringIO()\n"
        "codes = []\nHEAVY = ('pandas', 'numpy', 'pyarrow')\n"
        "ARGS = (['--help'], ['summary', '--help'], ['diff', '--format', 'x', 'a', 'b'], ['--version'])\n"
        "for args in ARGS:\n"
        "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):\n"
        "        try:\n"
        "            main(args, standalone_mode=True)\n"
        "        except SystemExit as e:\n"
        "            codes.append(e.code)\n"
        "    if args == ARGS[-2]:\n"
        "        heavy = sorted(m for m in sys.modules if m.split('.')[0] in HEAVY)\n"
        "print(json.dumps({'heavy': heavy, 'codes': codes, 'decoder': 'decoder:' in out.getvalue()}))",
        tmp_path,
    )
    assert got == {"heavy": [], "codes": [0, 0, 2, 0], "decoder": True}
