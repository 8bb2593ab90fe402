"""The HTML page in a real browser: headless Chromium draws it without console errors, and
the screenshot is a page, not a blank canvas."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kveval.cli.cli import main
from tests.report_fixtures import three_runs

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--no-first-run", "--enable-logging=stderr", "--v=0", *args],
        capture_output=True, text=True, timeout=180, check=False)


def colours(png: Path) -> tuple[int, float]:
    """Distinct colours in the screenshot, and the share of pixels that are not white."""
    image_module = pytest.importorskip("PIL.Image", reason="Pillow decodes the screenshot")
    with image_module.open(png) as image:
        rgb = image.convert("RGB")
        counts = rgb.getcolors(maxcolors=rgb.width * rgb.height)
    white = sum(n for n, colour in counts if colour == (255, 255, 255))
    return len(counts), 1 - white / (rgb.width * rgb.height)


def screenshot(page: Path, png: Path) -> str:
    done = chromium(f"--screenshot={png}", "--window-size=1280,2000", page.as_uri())
    assert png.is_file(), done.stderr[-2000:]
    return done.stderr


def console_errors(log: str) -> list[str]:
    return [line for line in log.splitlines()
            if "CONSOLE" in line or "Uncaught" in line or "Failed to load resource" in line]


def test_page_renders_in_chromium(tmp_path):
    runs = three_runs(tmp_path)
    page = tmp_path / "report.html"
    with pytest.raises(SystemExit):
        main(["report", "--baseline", runs["bf16a"], "--candidate", runs["fp8"],
              "--noise", runs["bf16b"], "-o", str(page)])
    log = screenshot(page, tmp_path / "page.png")
    assert console_errors(log) == []
    distinct, inked = colours(tmp_path / "page.png")
    assert distinct > 200 and inked > 0.05  # banner, charts and text, not a blank canvas

    blank = tmp_path / "blank.html"  # the same check on an empty page tells it apart
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    screenshot(blank, tmp_path / "blank.png")
    assert colours(tmp_path / "blank.png")[0] < 5

    dom = chromium("--dump-dom", page.as_uri()).stdout
    assert 'class="banner regression"' in dom and "Changed answers" in dom
