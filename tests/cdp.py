"""A small Chrome DevTools Protocol client over aiohttp, for tests that drive headless Chromium
(Debian `chromium`) page by page and read what the page saw."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0"]


class Browser:
    """One headless Chromium and one page (tab) in it, attached over the DevTools socket."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.session: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.page_session = ""
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._load: asyncio.Event = asyncio.Event()

    async def start(self, profile: Path) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        assert self.proc.stderr is not None
        url = ""
        while not url:
            line = (await asyncio.wait_for(self.proc.stderr.readline(), 30)).decode()
            if not line:
                raise RuntimeError("chromium exited before its DevTools socket was up")
            match = re.search(r"DevTools listening on (ws://\S+)", line)
            url = match.group(1) if match else ""
        asyncio.get_running_loop().create_task(self._drain(self.proc.stderr))
        self.session = aiohttp.ClientSession()
        self.ws = await self.session.ws_connect(url, max_msg_size=0)
        self._reader = asyncio.get_running_loop().create_task(self._read())
        target = await self.send("Target.createTarget", {"url": "about:blank"})
        attached = await self.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
        self.page_session = attached["sessionId"]
        for method in ("Page.enable", "Runtime.enable", "Log.enable"):
            await self.send(method, session=self.page_session)

    @staticmethod
    async def _drain(stream: asyncio.StreamReader) -> None:
        while await stream.readline():
            pass

    async def _read(self) -> None:
        assert self.ws is not None
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            else:
                self.events.append(data)
                if data.get("method") == "Page.loadEventFired":
                    self._load.set()

    async def send(self, method: str, params: dict[str, Any] | None = None, session: str = "",
                   timeout: float = 30.0) -> dict[str, Any]:
        assert self.ws is not None
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[self._next_id] = future
        await self.ws.send_str(json.dumps(message))
        reply = await asyncio.wait_for(future, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def page(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.send(method, params, session=self.page_session)

    async def navigate(self, url: str, timeout: float = 30.0) -> None:
        """Load `url` and wait for its load event."""
        self._load.clear()
        result = await self.page("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise RuntimeError(f"{url}: {result['errorText']}")
        await asyncio.wait_for(self._load.wait(), timeout)

    async def evaluate(self, expression: str) -> Any:
        result = await self.page("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return result["result"].get("value")

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.session is not None:
            await self.session.close()
        if self._reader is not None:
            self._reader.cancel()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
