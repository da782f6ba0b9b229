"""The report as a person sees it: rendered by a real browser (Playwright driving the
system's Chromium; no browser is downloaded)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import htm_analytics as ha

CHROMIUM = next((path for path in (os.environ.get("HTM_CHROMIUM"), "/usr/bin/chromium",
                                   shutil.which("chromium"), shutil.which("chromium-browser"),
                                   shutil.which("google-chrome"))
                 if path and Path(path).is_file()), None)
WIDTH = 1400

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium, or "
                                                "HTM_CHROMIUM=/path/to/chrome)"),
]

# What the page reports about itself, measured in the browser.
_INSPECT = """() => {
  const images = [...document.images].map(i => ({alt: i.alt.slice(0, 60),
      complete: i.complete, width: i.naturalWidth}));
  const anchors = [...document.querySelectorAll("a[href^='#']")].map(a => a.getAttribute("href"));
  const missing = anchors.filter(h => !document.getElementById(decodeURIComponent(h.slice(1))));
  const page = document.documentElement.clientWidth;
  const wide = [...document.querySelectorAll("body *")].filter(e => {
      const box = e.getBoundingClientRect();
      if (box.width === 0 || box.right <= page + 1) return false;
      // inside a scrolling container the overflow is reachable, not cut off
      for (let p = e.parentElement; p; p = p.parentElement) {
          const style = getComputedStyle(p);
          if (["auto", "scroll"].includes(style.overflowX) &&
              p.getBoundingClientRect().right <= page + 1) return false;
      }
      return true;
  }).map(e => `${e.tagName.toLowerCase()}.${e.className} right=${Math.round(
      e.getBoundingClientRect().right)}`);
  return {images, anchors, missing, wide, page,
          scrollWidth: document.documentElement.scrollWidth,
          sections: document.querySelectorAll("section").length};
}"""


def render(html: Path, png: Path) -> tuple[dict[str, Any], list[str]]:
    """Open ``html`` in Chromium at 1400 px; return what the page says of itself and every
    console error or page error, and write a full-page screenshot to ``png``."""
    sync_api = pytest.importorskip("playwright.sync_api")
    problems: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox"] if os.geteuid() == 0
                                             else [])
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
            page.on("console", lambda message: problems.append(
                f"console {message.type}: {message.text}")
                if message.type == "error" else None)
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on("requestfailed", lambda request: problems.append(
                f"request failed: {request.url[:80]}"))
            page.goto(html.resolve().as_uri(), wait_until="load")
            page.evaluate("() => Promise.all([...document.images].map(i => i.decode()"
                          ".catch(() => null)))")
            facts = page.evaluate(_INSPECT)
            page.screenshot(path=str(png), full_page=True)
        finally:
            browser.close()
    return facts, problems


def check(facts: dict[str, Any], problems: list[str]) -> None:
    assert problems == []
    assert facts["images"], "no figures"
    undecoded = [i["alt"] for i in facts["images"] if not (i["complete"] and i["width"] > 0)]
    assert undecoded == []
    assert facts["anchors"] and facts["missing"] == []
    assert facts["scrollWidth"] <= facts["page"], facts["wide"]
    assert facts["wide"] == []


def test_the_demo_report_renders_whole_in_a_browser(demo: dict, tmp_path: Path) -> None:
    facts, problems = render(demo["path"], tmp_path / "demo.png")
    check(facts, problems)
    assert facts["sections"] >= 8
    assert len(facts["images"]) >= 10 and len(facts["anchors"]) == facts["sections"]


def test_long_names_wrap_or_scroll_instead_of_widening_the_page(ltm: ha.LongTermMemory,
                                                                 tmp_path: Path) -> None:
    from PIL import Image

    robot = ltm.register_robot("robot-" + "x" * 64)
    for i in range(30):
        ltm.add(content=f"memory {i} " + "y" * 300, robot_id=robot, tags=[f"topic:{i % 7}"])
    html = ha.build_report(ltm, benchmark=False).write_html(tmp_path / "report.html")
    facts, problems = render(html, tmp_path / "report.png")
    check(facts, problems)
    with Image.open(tmp_path / "report.png") as image:
        assert image.width == WIDTH
