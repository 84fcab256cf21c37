"""The LLM proxy's services against a real daemon: per-run keys, the archive, the live follow.

The daemon's proxy answers from a replay script (no model), called with a
per-run key as an OpenAI client outside any sandbox would.
"""

from __future__ import annotations

import io
import json
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent2env import BadRequestError, Client
from agent2env.models import LLMExchangeEvent, LLMExchangeState, LLMPart

from .conftest import Daemon, _require, _serve

pytestmark = pytest.mark.integration

ANSWER = "hello from the replay provider"


@pytest.fixture(scope="module")
def llm_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A daemon whose LLM proxy serves the model ``scripted`` from a replay script."""
    d = tmp_path_factory.mktemp("llm")
    (d / "script.yaml").write_text(f"turns:\n  - text: {json.dumps(ANSWER)}\n")
    (d / "llm.yaml").write_text(
        "providers:\n  - {name: scripted, type: replay, script: script.yaml}\n"
        "models:\n  - {name: scripted, provider: scripted}\n"
    )
    with _serve(_require(), "--llm-config", str(d / "llm.yaml")) as daemon:
        yield daemon


def chat(daemon: Daemon, key: str, text: str) -> httpx.Response:
    """Call the proxy as an OpenAI client outside a sandbox, with a per-run key."""
    root = daemon.url.removesuffix("/api/v1")
    return httpx.post(
        f"{root}/llm/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}"},
        json={"model": "scripted", "messages": [{"role": "user", "content": text}]},
        timeout=30,
    )


def test_keys_archive_and_follow(llm_daemon: Daemon, tmp_path: Path) -> None:
    with Client(llm_daemon.url) as client:
        # A per-run key names a run of the daemon's (its own API key's).
        submitted = httpx.post(
            f"{llm_daemon.url}/runs",
            json={"task": "name: py\nagent: custom\ngoal: g\nentrypoint: 'true'\n"},
            timeout=30,
        )
        assert submitted.status_code == 201, submitted.text
        run_py = submitted.json()["runs"][0]["id"]
        key = client.llm_keys.create(name="py", run=run_py, budget_tokens=100_000, expires_in=600)
        assert key.key is not None
        assert key.key.startswith("a2e_llm_")

        # Follow from just before a list: the call made after reaches the follower.
        mark = client.llm.list(run=run_py).follow_cursor
        events: queue.Queue[LLMExchangeEvent | BaseException] = queue.Queue()
        follow = client.llm.follow(run=run_py, after=mark)

        def read() -> None:
            try:
                events.put(next(follow))
            except BaseException as e:  # handed to the test
                events.put(e)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        resp = chat(llm_daemon, key.key, "say hello")
        assert resp.status_code == 200, resp.text
        assert resp.json()["choices"][0]["message"]["content"] == ANSWER

        got = events.get(timeout=15)
        assert isinstance(got, LLMExchangeEvent), got
        reader.join(timeout=5)
        follow.close()
        x = got.exchange
        assert (x.run_id, x.key_id, x.model, x.status) == (run_py, key.id, "scripted", 200)
        assert x.state == LLMExchangeState.COMPLETE
        assert got.cursor

        # The archive's read API.
        page = client.llm.list(run=run_py, status="2xx", limit=10)
        assert [e.id for e in page.items] == [x.id]
        assert [e.id for e in client.llm.list_all(run=run_py)] == [x.id]
        detail = client.llm.get(x.id)
        assert detail.request is not None
        assert "say hello" in detail.request.body
        assert ANSWER.encode() in client.llm.raw(x.id, LLMPart.RESPONSE)
        buf = io.BytesIO()
        assert client.llm.export(buf, run=run_py) == len(buf.getvalue()) > 0
        assert [json.loads(line)["id"] for line in buf.getvalue().splitlines()] == [x.id]
        assert [e.id for e in client.llm.iter_export(run=run_py)] == [x.id]
        assert client.llm.list(run="run-none").items == []

        # Keys: listed without the secret, then revoked.
        listed = {k.id: k for k in client.llm_keys.list()}
        assert listed[key.id].key is None
        assert listed[key.id].run == run_py
        # A page at a time, newest first, each key once.
        pages, cursor = [], None
        while True:
            page = client.llm_keys.list_page(limit=1, cursor=cursor)
            pages.append([k.id for k in page.items])
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert pages == [[k.id] for k in client.llm_keys.list()]
        client.llm_keys.revoke(key.id)
        assert client.llm_keys.list()[0].revoked_at is not None
        assert chat(llm_daemon, key.key, "again").status_code == 401

        with pytest.raises(BadRequestError):
            next(iter(client.llm.follow(status="in_progress")))
