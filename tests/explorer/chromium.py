"""Debian's Chromium, headless and offline, for the tests that look at a page in a real browser
(`serve`, the HTML report) and for the pictures in docs/ (`make_images.py`).

Playwright drives it (`executable_path`); Playwright's own browsers are never fetched. `.ci/run`
installs the package; without it the browser tests skip.
"""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
# without the background-networking flags, Chromium's own connections on a closed network get
# the page's refused along with them; Playwright gives each launch a fresh --user-data-dir
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
