"""A real headless browser for the tests of what a person sees: Debian's Chromium, driven
over its DevTools protocol with the ``websockets`` client pytest-hud already depends on (no
driver binary, nothing downloaded; Selenium's dependencies are kept out of the test venv,
whose every pytest start they would slow). Everything stays on 127.0.0.1."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from needs import require
from websockets.sync.client import connect

WAIT = 60.0  # seconds: the bound on every wait for the page (never an assertion on time)


class Browser:
    """One headless Chromium with one page."""

    def __init__(self, width: int = 1000, height: int = 800) -> None:
        chromium = shutil.which("chromium")
        require(chromium, "Chromium", "apt-get install chromium (scripts/setup installs it)")
        self.profile = tempfile.mkdtemp(prefix="hud-chromium-")
        self.proc = subprocess.Popen(
            [
                str(chromium), "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", f"--window-size={width},{height}", "--no-first-run",
                "--no-proxy-server", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-extensions",
                "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}", "about:blank",
            ],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "TMPDIR": self.profile},  # its singleton socket's dir too
        )  # fmt: skip
        port = self._devtools_port()
        deadline = time.monotonic() + WAIT
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=WAIT) as r:
                pages = [t for t in json.load(r) if t.get("type") == "page"]
            if pages:
                break
            assert time.monotonic() < deadline, "Chromium opened no page"
            time.sleep(0.1)
        self.stack = contextlib.ExitStack()
        self.ws = self.stack.enter_context(
            connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=WAIT)
        )
        self.seq = 0

    def _devtools_port(self) -> int:
        assert self.proc.stderr is not None
        lines = []
        for line in self.proc.stderr:  # Chromium says where DevTools listens, then goes on
            lines.append(line)
            found = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if found:
                return int(found.group(1))
        raise AssertionError("Chromium exited before serving DevTools:\n" + "".join(lines))

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.seq += 1
        self.ws.send(json.dumps({"id": self.seq, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv(timeout=WAIT))
            if reply.get("id") == self.seq:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return dict(reply.get("result") or {})

    def js(self, expression: str) -> Any:
        """The value of ``expression`` in the page (promises awaited)."""
        out = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in out:
            raise AssertionError(f"{expression}: {out['exceptionDetails']}")
        return out.get("result", {}).get("value")

    def get(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        until(self, lambda: self.js("document.readyState") == "complete", "the page loaded")

    def get_screenshot_as_png(self) -> bytes:
        return base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"])

    def quit(self) -> None:
        try:
            self.stack.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)


def until(browser: Browser, check: Callable[[], object], what: str) -> None:
    """Poll ``check`` until it holds (bounded by :data:`WAIT`)."""
    deadline = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"the page never showed {what}:\n{page_text(browser)}")
        time.sleep(0.1)


def _element(element_id: str) -> str:
    return f"document.getElementById({json.dumps(element_id)})"


def page_text(browser: Browser) -> str:
    """What the page shows (rendered text only)."""
    return str(browser.js("document.body.innerText") or "")


def shown(browser: Browser, element_id: str) -> bool:
    """Whether the element is rendered (not hidden, with a box)."""
    return bool(
        browser.js(
            f"(e => !!e && e.getClientRects().length > 0 && "
            f"getComputedStyle(e).visibility !== 'hidden')({_element(element_id)})"
        )
    )


def click(browser: Browser, element_id: str) -> None:
    """Click what a person could click: the element must be shown and enabled."""
    assert shown(browser, element_id), f"#{element_id} is not shown: a person could not click it"
    assert browser.js(f"!{_element(element_id)}.disabled"), f"#{element_id} is disabled"
    browser.js(f"{_element(element_id)}.click()")


def type_into(browser: Browser, element_id: str, text: str) -> None:
    assert shown(browser, element_id), f"#{element_id} is not shown"
    browser.js(
        f"(e => {{ e.focus(); e.value = {json.dumps(text)};"
        f" e.dispatchEvent(new Event('input', {{bubbles: true}})); }})({_element(element_id)})"
    )


def element_text(browser: Browser, element_id: str) -> str:
    return str(browser.js(f"{_element(element_id)}.innerText") or "")
