"""The demo's scenario API takes exactly {"name": str, "active": bool, "duration": seconds|null}
as application/json (issue 19, item 5): "false" as a string used to switch a scenario on."""

from __future__ import annotations

import json

import aiohttp
from aiohttp.test_utils import TestServer

from infrapulse.http import make_app
from infrapulse.metrics import DaemonState, make_registry
from infrapulse.simulate.demo import known_scenarios, scenario_routes
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.store import Store

NAME = "pfc-storm"


async def _post(session: aiohttp.ClientSession, url: str, body: bytes | str,
                content_type: str = "application/json") -> tuple[int, dict]:
    data = body.encode() if isinstance(body, str) else body
    async with session.post(url, data=data, headers={"Content-Type": content_type}) as resp:
        return resp.status, await resp.json()


async def test_scenario_api_accepts_only_the_documented_shape():
    assert NAME in known_scenarios()
    board = ScenarioBoard()
    store = Store()
    state = DaemonState("testhost", "node")
    app = make_app(store, state, make_registry(store, state), [scenario_routes(board)])
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    url = str(server.make_url("/api/v1/scenarios"))
    refused = {
        '{"name": "pfc-storm", "active": "false"}': (400, "field 'active' must be a boolean"),
        '{"name": "pfc-storm", "active": 0}': (400, "field 'active' must be a boolean"),
        '{"name": "pfc-storm", "active": null}': (400, "field 'active' must be a boolean"),
        '{"name": "pfc-storm", "enabled": true}': (400, "unknown field 'enabled'"),
        '{"name": 7}': (400, "field 'name' must be a string"),
        '{"active": true}': (400, "missing field 'name'"),
        '{"name": "pfc-storm", "duration": "60"}': (400, "field 'duration' must be a number or null"),
        '{"name": "pfc-storm", "duration": true}': (400, "field 'duration' must be a number or null"),
        '{"name": "pfc-storm", "duration": NaN}': (400, "invalid JSON: NaN is not JSON"),
        '{"name": "pfc-storm", "duration": -5}': (400, "field 'duration' must be between 0 and"),
        '{"name": "pfc-storm", "duration": 1e300}': (400, "field 'duration' must be between 0 and"),
        '["pfc-storm"]': (400, "expected a JSON object, got list"),
        '{"name": "pfc-storm"': (400, "invalid JSON"),
        '{"name": "no-such-thing"}': (404, "unknown scenario 'no-such-thing'"),
    }
    try:
        async with aiohttp.ClientSession() as session:
            for body, (status, message) in refused.items():
                got = await _post(session, url, body)
                assert got[0] == status and got[1]["error"].startswith(message), (body, got)
                assert board.names() == [], body  # nothing refused switched anything on
            # A cross-site form post (or curl -d without -H) cannot reach it.
            got = await _post(session, url, "name=pfc-storm&active=true", "application/x-www-form-urlencoded")
            assert got == (415, {"error": "Content-Type must be application/json, "
                                          "got 'application/x-www-form-urlencoded'"})
            got = await _post(session, url, json.dumps({"name": NAME}), "text/plain")
            assert got[0] == 415 and board.names() == []
            assert await _post(session, url, b'{"name": "pfc-storm", "x": "\xff"}') == \
                (400, {"error": "invalid JSON: 'utf-8' codec can't decode byte 0xff in position 28: "
                                "invalid start byte"})
            # What it does accept.
            assert await _post(session, url, json.dumps({"name": NAME})) == (200, {"active": [NAME]})
            assert await _post(session, url, json.dumps({"name": NAME, "active": False})) == \
                (200, {"active": []})
            got = await _post(session, url, json.dumps({"name": NAME, "active": True, "duration": 30}))
            assert got == (200, {"active": [NAME]}) and board.elapsed(NAME) < 1
            assert await _post(session, url, json.dumps({"name": NAME, "active": True, "duration": None})) \
                == (200, {"active": [NAME]})
            async with session.post(url, data=b"{" * 70_000,
                                    headers={"Content-Type": "application/json"}) as resp:
                assert resp.status == 413  # over the 64 KiB body limit
    finally:
        await server.close()
