"""A loopback OpenAI-compatible server for the LLM proposers' tests: real HTTP on 127.0.0.1 (an
`http.server` in a thread), answering POST /v1/chat/completions from a script, one step per request.

A step is a dict (a completion's JSON), `Status(code, body)`, `Raw(body, content_type)`, `Stall(seconds)`
(answers nothing for that long: the client must time out; the handler then gives up by itself), or a
callable taking the request (`{"headers", "json", "path"}`) and returning a step (to answer from what the
client sent). When
the script runs out, `after` answers (default: a garbage body). Every request is kept (`requests`:
headers and JSON) for the tests to assert on. Use as a context manager: the server stops on exit.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Status:
    code: int
    body: str = '{"error": {"message": "scripted failure"}}'
    headers: tuple = ()


@dataclass
class Raw:
    body: str
    content_type: str = "application/json"


@dataclass
class Stall:
    seconds: float


def completion(message: dict, finish: str = "stop", tokens: int = 100) -> dict:
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "test-model",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
            "usage": {"prompt_tokens": tokens - 10, "completion_tokens": 10, "total_tokens": tokens}}


def call(name: str, args, *, raw: str | None = None, tokens: int = 100, finish: str = "tool_calls") -> dict:
    """A completion calling tool `name` with `args` (JSON-encoded, or `raw` text as the arguments)."""
    arguments = raw if raw is not None else json.dumps(args)
    return completion({"content": None, "tool_calls": [
        {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": arguments}}]},
        finish=finish, tokens=tokens)


def prose(text: str) -> dict:
    return completion({"content": text})


class ScriptedServer:
    def __init__(self, script, after=None):
        self.script = list(script)
        self.after = after if after is not None else Raw("<html>not json</html>", "text/html")
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    server.requests.append({"headers": headers, "json": body, "path": self.path})
                    step = server.script.pop(0) if server.script else server.after
                if callable(step):
                    step = step(server.requests[-1])
                try:
                    self._answer(step)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a stall it timed out on)

            def _answer(self, step):
                if isinstance(step, Stall):
                    time.sleep(step.seconds)
                    step = prose("too late")
                if isinstance(step, Status):
                    self._send(step.code, step.body, "application/json", step.headers)
                elif isinstance(step, Raw):
                    self._send(200, step.body, step.content_type)
                else:
                    self._send(200, json.dumps(step), "application/json")

            def _send(self, code, body, content_type, headers=()):
                data = body.encode()
                self.send_response(code)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
