"""The HTML report in a real browser (Debian's chromium, headless, driven by playwright):
it renders, logs no console error, sends no request outside the file, has its tables and
figures, looks non-blank; trace text with markup in it shows as written and runs nothing."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from traceview.cli import main

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
DOCS = Path(__file__).resolve().parents[1] / "docs"
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="chromium not installed (apt-get install chromium; .ci/run does)"
)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
EVIL = '<script>window.pwned=1</script>" onload="window.pwned=2" [bold]x[/bold]'


def open_page(path: Path, tmp_path: Path, screenshot: Path | None = None) -> dict:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright not installed (pip install .[test])"
    )
    errors, requests = [], []
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=ARGS,
            viewport={"width": 1280, "height": 900},
        )
        page = ctx.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(path.resolve().as_uri())
        page.wait_for_function("document.documentElement.dataset.rendered === '1'")
        info = page.evaluate("""() => ({tables: document.querySelectorAll('table').length,
            svgs: document.querySelectorAll('figure svg').length, pwned: window.pwned || 0,
            text: document.body.innerText})""")
        if screenshot:
            page.screenshot(path=str(screenshot), full_page=False)
        shot = page.screenshot()
        ctx.close()
    info.update(errors=errors, requests=[u for u in requests if u != path.resolve().as_uri()], shot=shot)
    return info


def non_blank(png: bytes) -> bool:
    from io import BytesIO

    from matplotlib import image

    px = image.imread(BytesIO(png))
    return float(px[..., :3].std()) > 0.02


def test_sample_report_renders_offline(tmp_path):
    out = tmp_path / "report.html"
    r = CliRunner().invoke(
        main, ["report", *sorted(str(p) for p in SAMPLES.glob("*.json.gz")), "-o", str(out)]
    )
    assert r.exit_code == 0, r.output
    # TRACEVIEW_UPDATE_DOCS=1 refreshes the committed screenshot (docs/report-sample-traces.png)
    shot = (
        DOCS / "report-sample-traces.png"
        if os.environ.get("TRACEVIEW_UPDATE_DOCS")
        else tmp_path / "shot.png"
    )
    info = open_page(out, tmp_path, screenshot=shot)
    assert info["errors"] == [] and info["requests"] == []
    assert info["tables"] >= 3 and info["svgs"] >= 1 + 5
    assert "Findings" in info["text"] and "attention" in info["text"]
    assert non_blank(info["shot"])


def test_untrusted_text_shows_as_written(tmp_path):
    src = json.loads(gzip.decompress((SAMPLES / "sdpa_flash.json.gz").read_bytes()))
    src.setdefault("traceview", {})["variant"] = EVIL
    src["deviceProperties"] = [{"name": EVIL}]  # metadata shown as the device
    first = next(e for e in src["traceEvents"] if e.get("ph") == "X")
    src["traceEvents"].append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": EVIL,
            "pid": 0,
            "tid": 7,
            "ts": first["ts"],
            "dur": 5,
            "args": {"device": 0, "stream": 7, "correlation": 1},
        }
    )
    for e in src["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            e["name"] = EVIL
            break
    bad = tmp_path / "evil.json.gz"
    bad.write_bytes(gzip.compress(json.dumps(src).encode()))
    out = tmp_path / "evil.html"
    r = CliRunner().invoke(main, ["report", str(bad), str(SAMPLES / "naive.json.gz"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    info = open_page(out, tmp_path)
    assert info["pwned"] == 0 and info["errors"] == [] and info["requests"] == []
    assert EVIL in info["text"]
    r = CliRunner().invoke(main, ["summary", str(bad), "--format", "html"])
    page = tmp_path / "summary.html"
    page.write_text(r.stdout)  # the page only: stderr holds the warning (terminal text, not HTML)
    info = open_page(page, tmp_path)
    assert info["pwned"] == 0 and EVIL in info["text"]
