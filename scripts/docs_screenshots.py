"""Screenshots of the documentation site (``docs/screenshots/``): its home page and one API page,
taken in headless Chromium (Debian's, driven by Playwright) from a fresh ``mkdocs build``.

    python scripts/docs_screenshots.py
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = {"home.png": "", "api.png": "api/train/#groundrl.train.export"}


def main() -> int:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no Chromium: apt-get install chromium")
    with tempfile.TemporaryDirectory() as site:
        subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", site], cwd=ROOT, check=True)
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=site)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            with sync_playwright() as driver:
                browser = driver.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                for name, path in PAGES.items():
                    page.goto(f"http://127.0.0.1:{server.server_port}/{path}")
                    page.wait_for_load_state("networkidle")
                    page.screenshot(path=str(ROOT / "docs" / "screenshots" / name))
                    print(f"docs/screenshots/{name}")
                browser.close()
        finally:
            server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
