"""A real headless Chromium for the HTML report tests, driven over its DevTools protocol.

Chromium is started with `--remote-debugging-pipe`: it reads protocol commands from file
descriptor 3 and writes replies and events to descriptor 4, each a JSON message ended by a
NUL byte (the Chrome DevTools Protocol, https://chromedevtools.github.io/devtools-protocol/).
No websocket client is needed and no port is opened. The flags are those this machine's
Chromium needs without a network (no background fetches, no sandbox as root).

    with Browser() as browser:
        page = browser.open(path)     # loads file://path, waits for the load event
        page.evaluate("document.title")
        page.problems                 # console errors, exceptions, log errors, requests made
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--remote-debugging-pipe",
]
TIMEOUT_S = 30.0


def chromium() -> str | None:
    """The Chromium executable on PATH (Debian's package: /usr/bin/chromium), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    pass


class Browser:
    """One Chromium process with a fresh profile, closed on exit."""

    def __enter__(self) -> Browser:
        executable = chromium()
        if executable is None:
            raise BrowserError("chromium is not installed")
        self._profile = tempfile.TemporaryDirectory(prefix="kvplan-chromium-")
        commands_read, self._commands = os.pipe()  # we write, Chromium reads (fd 3)
        self._replies, replies_write = os.pipe()  # Chromium writes (fd 4), we read

        def wire() -> None:
            # Chromium's protocol pipe is fds 3 and 4 in the child: move both ends above
            # them first (close-on-exec), so neither is overwritten by the other's dup2.
            # Python's own descriptors are not inherited (PEP 446); dup2's copies are.
            high_read = fcntl.fcntl(commands_read, fcntl.F_DUPFD_CLOEXEC, 10)
            high_write = fcntl.fcntl(replies_write, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(high_read, 3)
            os.dup2(high_write, 4)

        self._process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,  # else fds 3 and 4, set up by `wire`, would be closed
            preexec_fn=wire,
        )
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        return self

    def __exit__(self, *exc_info: object) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close")
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._commands)
        os.close(self._replies)
        self._profile.cleanup()

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise BrowserError("no answer from Chromium in time")
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                raise BrowserError("Chromium closed its protocol pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its reply; events that arrive meanwhile are kept."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> dict[str, Any]:
        """The first event `method` of `session` (already received, or the next ones)."""
        deadline = time.monotonic() + TIMEOUT_S
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event
            seen = len(self.events)
            self.events.append(self._read_message(deadline))

    def open(self, path: Path, width: int = 1400, height: int = 1000) -> Page:
        """A new tab showing `path`, loaded, with its console and network watched."""
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session)
        url = path.resolve().as_uri()
        page = Page(self, session, len(self.events), url)  # watches what follows
        page.resize(width, height)
        self.send("Page.navigate", session, url=url)
        self.wait_for("Page.loadEventFired", session)
        return page


class Page:
    """One loaded tab: evaluate script, emulate print, take a screenshot or a PDF."""

    def __init__(self, browser: Browser, session: str, start: int, url: str) -> None:
        self.browser, self.session, self._start, self.url = browser, session, start, url

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression evaluated in the page."""
        result = self.browser.send(
            "Runtime.evaluate", self.session, expression=expression, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    @property
    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, browser log errors (a blocked
        load, a bad stylesheet) and any request other than the page itself."""
        found = []
        for event in self.browser.events[self._start :]:
            if event.get("sessionId") != self.session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "warning"):
                found.append(f"console {params['type']}: {params['args']}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails']}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                found.append(f"log {params['entry']['level']}: {params['entry']['text']}")
            elif method == "Network.requestWillBeSent" and params["request"]["url"] != self.url:
                found.append(f"request: {params['request']['url']}")
        return found

    def resize(self, width: int, height: int) -> None:
        """The window's size in CSS pixels."""
        self.browser.send(
            "Emulation.setDeviceMetricsOverride",
            self.session,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def emulate(self, media: str) -> None:
        """Lay the page out for `media`: "print" (its print stylesheet) or "screen"."""
        self.browser.send("Emulation.setEmulatedMedia", self.session, media=media)

    def screenshot(self, path: Path) -> None:
        """A PNG of the whole page (beyond the window's height)."""
        data = self.browser.send(
            "Page.captureScreenshot", self.session, format="png", captureBeyondViewport=True
        )["data"]
        path.write_bytes(base64.b64decode(data))

    def pdf(self) -> bytes:
        """The page printed as Chromium prints it (the page's own @page size)."""
        data = self.browser.send(
            "Page.printToPDF", self.session, preferCSSPageSize=True, printBackground=True
        )["data"]
        return base64.b64decode(data)
