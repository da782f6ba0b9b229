"""Render a report to PNG with headless Chromium, to look at it as a reader sees it.

    python scripts/screenshot_report.py report.html report.png [--width 1400] [--height 6000]

Needs ``chromium`` (Debian: ``apt-get install chromium``) or ``chromium-browser`` /
``google-chrome`` on PATH. The page is taken at a fixed window size; long reports are cut at
``--height`` (use several heights, or a tall one, to see everything).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def screenshot(html: Path, png: Path, *, width: int = 1400, height: int = 6000) -> Path:
    """Write a PNG of ``html`` rendered ``width`` pixels wide; returns ``png``."""
    browser = next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)
    if browser is None:
        raise FileNotFoundError("no chromium on PATH (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        command = [browser, "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                   "--disable-background-networking", "--disable-component-update",
                   "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
                   f"--window-size={width},{height}", f"--screenshot={png.resolve()}",
                   html.resolve().as_uri()]
        if os.geteuid() == 0:  # Chromium refuses to run as root with its sandbox
            command.insert(1, "--no-sandbox")
        subprocess.run(command, check=True, capture_output=True, timeout=120)
    return png


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=6000)
    options = parser.parse_args()
    print(screenshot(options.html, options.png, width=options.width, height=options.height))


if __name__ == "__main__":
    sys.exit(main())
