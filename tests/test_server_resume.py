# ruff: noqa: F811  (the fixtures imported from server_support are test arguments)
"""A turn in flight survives a dropped WebSocket: the server keeps the connection with
its numbered frames, the client comes back with its cursor, each side resends what the
other lacks and nothing else. A raw resumable client and ``iac-kernel acp --remote``
against a real ``jupyter server``; the socket is cut under them (TCP closed without a
WebSocket close)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from acp import text_block

from server_support import (  # noqa: F401  (fixtures)
    JupyterServer,
    bridge,
    free_port,
    root,
    server,
    store_of,
    user_texts,
    work,
)
from test_acp_support import WAIT, RecordingClient, wait_until

ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


class Resumable:
    """A raw client of the resumable profile: counts the frames it gets (acknowledging
    none, so the server keeps them all), keeps the frames it sends."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.frames: list[str] = []  # counted frames received, in order
        self.sent: list[str] = []
        self.link: str | None = None
        self.conn: Any = None
        self.headers: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def connect(self, has: int | None = None) -> None:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        has = len(self.frames) if has is None else has
        headers = {"Authorization": f"Bearer {self.token}", "Acp-Received": str(has)}
        if self.link:
            headers["Acp-Connection-Id"] = self.link
        del self.frames[has:]  # what the client says it lacks, it forgets
        self.conn = await websocket_connect(HTTPRequest(self.url, headers=headers))
        self.headers = self.conn.headers
        self.link = self.headers["Acp-Connection-Id"]
        self._reader = asyncio.ensure_future(self._read(self.conn))

    async def _read(self, conn: Any) -> None:
        while (frame := await conn.read_message()) is not None:
            if '"_iac/received"' not in frame:
                self.frames.append(frame)

    def cut(self) -> None:
        """Close the TCP connection under the WebSocket (no close frame)."""
        self.conn.protocol.stream.close()

    async def send(self, message: dict[str, Any]) -> None:
        text = json.dumps({"jsonrpc": "2.0", **message})
        self.sent.append(text)
        await self.conn.write_message(text)

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(f) for f in self.frames]

    def answer(self, request_id: str) -> list[dict[str, Any]]:
        return [m for m in self.messages() if m.get("id") == request_id and "method" not in m]

    async def call(self, request_id: str, method: str, params: Any) -> dict[str, Any]:
        await self.send({"id": request_id, "method": method, "params": params})
        (answer,) = await wait_until(lambda: self.answer(request_id), method)
        return answer

    def text(self) -> str:
        return "".join(
            m["params"]["update"]["content"]["text"]
            for m in self.messages()
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )

    def questions(self) -> list[dict[str, Any]]:
        return [m for m in self.messages() if m.get("method") == "session/request_permission"]

    def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self.conn is not None:
            self.conn.close(1000)


async def test_a_question_asked_before_a_drop_is_answered_after_it(
    server: JupyterServer, work: Path
) -> None:
    client = Resumable(server.acp_url, server.token)
    await client.connect()
    try:
        first_link = client.link
        assert client.headers["Acp-Received"] == "0"
        await client.call("i", "initialize", {"protocolVersion": 1})
        created = await client.call("n", "session/new", {"cwd": str(work), "mcpServers": []})
        sid = created["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "write the plan note"}]}
        await client.send({"id": "p", "method": "session/prompt", "params": prompt})
        (question,) = await wait_until(client.questions, "the permission question")
        count = len(client.frames)
        tail = client.frames[-2:]

        client.cut()
        # Back with a cursor two frames short (as if they were lost in the drop).
        await client.connect(has=count - 2)
        assert client.link == first_link
        assert client.headers["Acp-Received"] == str(len(client.sent))
        await wait_until(lambda: len(client.frames) >= count, "the two frames again")
        assert client.frames[count - 2 : count] == tail  # the same frames, once each
        assert len(client.frames) == count  # and nothing else: the turn waits

        await client.send({"id": question["id"], "result": ALLOW})
        (answer,) = await wait_until(lambda: client.answer("p"), "the turn's answer")
        assert answer["result"]["stopReason"] == "end_turn"
        assert client.text() == "Writing the note.Done with the note."
        assert len(client.questions()) == 1
        assert (work / "plan.txt").read_text() == "reviewed from the editor\n"
    finally:
        client.close()


async def test_updates_sent_while_away_arrive_once_after_the_drop(
    server: JupyterServer, work: Path, tmp_path: Path
) -> None:
    client = Resumable(server.acp_url, server.token)
    await client.connect()
    try:
        await client.call("i", "initialize", {"protocolVersion": 1})
        created = await client.call("n", "session/new", {"cwd": str(work), "mcpServers": []})
        sid = created["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "count the ticks"}]}
        await client.send({"id": "p", "method": "session/prompt", "params": prompt})
        (question,) = await wait_until(client.questions, "the permission question")
        await client.send({"id": question["id"], "result": ALLOW})
        await wait_until(lambda: "Counting." in client.text(), "the turn to go on")
        client.cut()
        store = store_of(tmp_path)

        def finished() -> bool:
            messages = store.read(sid).messages
            return bool(messages) and "Three ticks counted." in json.dumps(messages[-1])

        # The whole turn ends while the client is away; nothing of it is lost.
        await wait_until(finished, "the turn to end on the server")
        assert not client.answer("p")
        await client.connect()
        (answer,) = await wait_until(lambda: client.answer("p"), "the turn's answer")
        assert answer["result"]["stopReason"] == "end_turn"
        assert client.text() == "Counting.Three ticks counted."
        updates = [
            m["params"]["update"] for m in client.messages() if m.get("method") == "session/update"
        ]
        starts = [u["toolCallId"] for u in updates if u.get("sessionUpdate") == "tool_call"]
        assert len(starts) == 1
        finals = [u for u in updates if u.get("toolCallId") == starts[0]]
        finals = [u for u in finals if u.get("status") == "completed"]
        assert len(finals) == 1
        assert "tick 3" in json.dumps(finals[0])
    finally:
        client.close()


async def test_a_connection_not_resumed_in_time_ends_and_frees_its_sessions(
    root: Path, work: Path, tmp_path: Path, isolated_runtime_dir: Path
) -> None:
    from server_support import SCRIPT, server_env

    jupyter = JupyterServer(
        root,
        server_env(tmp_path, isolated_runtime_dir, SCRIPT),
        args=("--IacKernelServer.resume_window=1",),
    )
    await asyncio.to_thread(jupyter.start)
    client = Resumable(jupyter.acp_url, jupyter.token)
    try:
        await client.connect()
        first_link = client.link
        await client.call("i", "initialize", {"protocolVersion": 1})
        created = await client.call("n", "session/new", {"cwd": str(work), "mcpServers": []})
        sid = created["result"]["sessionId"]
        store = store_of(tmp_path)
        assert store.lock_holder(sid) is not None
        client.cut()
        await wait_until(lambda: store.lock_holder(sid) is None, "the connection to end")
        await client.connect()
        assert client.link != first_link
        assert client.headers["Acp-Received"] == "0"
    finally:
        client.close()
        await asyncio.to_thread(jupyter.stop)


class Cuttable:
    """A TCP relay between the bridge and the server that the test can cut."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.listen = free_port()
        self.pairs: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self.server: asyncio.AbstractServer | None = None
        #: When False, new connections are closed at once (the network is down).
        self.up = True

    async def start(self) -> Cuttable:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", self.listen)
        return self

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.pairs.append((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        for down, up in self.pairs:
            down.transport.abort()
            up.transport.abort()
        self.pairs.clear()

    def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


async def test_the_bridge_resumes_a_turn_across_cuts(
    server: JupyterServer, work: Path, tmp_path: Path
) -> None:
    relay = await Cuttable(server.port).start()
    url = f"ws://127.0.0.1:{relay.listen}/iac-kernel/acp"
    log = tmp_path / "bridge.log"
    client = RecordingClient()
    client.answers.extend(["hold", "allow_once"])
    try:
        async with bridge(url, server.token, log, client) as (conn, process, *_):
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            turn = asyncio.ensure_future(
                conn.prompt(session_id=sid, prompt=[text_block("write the plan note")])
            )
            await wait_until(lambda: client.held is not None, "the permission question")
            relay.cut()  # the question is open in the editor
            await wait_until(lambda: "resumed" in log.read_text(), "the bridge to resume")
            assert "the connection resumed" in log.read_text()
            client.release("allow_once")
            answer = await asyncio.wait_for(turn, WAIT)
            assert answer.stop_reason == "end_turn"
            assert client.text(sid) == "Writing the note.Done with the note."
            assert len(client.permissions) == 1
            assert (work / "plan.txt").read_text() == "reviewed from the editor\n"

            client.clear()
            turn = asyncio.ensure_future(
                conn.prompt(session_id=sid, prompt=[text_block("count the ticks")])
            )
            (call,) = await wait_until(lambda: client.tool_ids(sid), "the tool call")
            ticks = work / "ticks.txt"
            await wait_until(ticks.exists, "the command to run (its question answered)")
            relay.up = False
            relay.cut()  # mid-turn, and the network stays down until the turn ended
            store = store_of(tmp_path)
            await wait_until(
                lambda: "Three ticks counted." in json.dumps(store.read(sid).messages[-1:]),
                "the turn to end on the server",
            )
            assert not turn.done()
            relay.up = True
            answer = await asyncio.wait_for(turn, WAIT)
            assert answer.stop_reason == "end_turn"
            assert client.text(sid) == "Counting.Three ticks counted."
            assert client.tool_ids(sid) == [call]
            assert client.final_status(sid, call) == "completed"
            assert log.read_text().count("the connection resumed") == 2
            assert process.returncode is None
    finally:
        relay.close()


async def test_a_retried_prompt_with_its_operation_id_runs_once(
    server: JupyterServer, work: Path, tmp_path: Path
) -> None:
    first = Resumable(server.acp_url, server.token)
    await first.connect()
    retry = Resumable(server.acp_url, server.token)
    try:
        await first.call("i", "initialize", {"protocolVersion": 1})
        created = await first.call("n", "session/new", {"cwd": str(work), "mcpServers": []})
        sid = created["result"]["sessionId"]
        prompt = {
            "sessionId": sid,
            "prompt": [{"type": "text", "text": "count the ticks"}],
            "_meta": {"operationId": "op-ticks-1"},
        }
        await first.send({"id": "p", "method": "session/prompt", "params": prompt})
        (question,) = await wait_until(first.questions, "the permission question")
        await first.send({"id": question["id"], "result": ALLOW})
        await wait_until((work / "ticks.txt").exists, "the command to run")
        first.cut()

        # A client that lost its connection (and its cursor) sends the prompt again on
        # a new one, with the same operation id: it gets the first run's answer.
        await retry.connect()
        await retry.call("i", "initialize", {"protocolVersion": 1})
        resumed = {"sessionId": sid, "cwd": str(work), "mcpServers": []}
        assert "result" in await retry.call("r", "session/resume", resumed)
        answer = await retry.call("p2", "session/prompt", prompt)
        assert answer["result"]["stopReason"] == "end_turn"
        assert (work / "ticks.txt").read_text().splitlines() == ["tick 1", "tick 2", "tick 3"]
        assert retry.questions() == []  # nothing ran again: no second question
        # Sent again once more, after the end: the same answer, still nothing run.
        again = await retry.call("p3", "session/prompt", prompt)
        assert again["result"] == answer["result"]
        # Another operation id is another prompt (once this client took control: the
        # first connection, kept for its return, still holds the session's lease).
        claim = {"sessionId": sid, "claim": True}
        assert (await retry.call("c", "_iac/session/control", claim))["result"]["controller"]
        other = {**prompt, "_meta": {"operationId": "op-other"}}
        other["prompt"] = [{"type": "text", "text": "editor follow-up"}]
        assert (await retry.call("p4", "session/prompt", other))["result"]["stopReason"] == (
            "end_turn"
        )
    finally:
        first.close()
        retry.close()
    texts = user_texts(store_of(tmp_path), sid)
    assert texts == ["count the ticks", "editor follow-up"]
