"""A real HTTP server on 127.0.0.1 that implements the GitHub REST endpoints the poster calls.

Issue comments are kept in memory: list (paginated with a Link header, like GitHub), create and
update. Tokens are checked; a read-only token gets GitHub's 403 on writes (the fork case).
Failures can be queued (`fail_next`) to exercise retries: 5xx, 429 and rate-limit 403s.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

LIST = re.compile(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/comments$")
ONE = re.compile(r"^/repos/([^/]+/[^/]+)/issues/comments/(\d+)$")


@dataclass
class Failure:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "Server Error"


@dataclass
class Logged:
    method: str
    path: str
    status: int
    at: float
    body: dict | None = None


class FakeGitHub:
    """State and behaviour; `url` is the API base to give the client (like GITHUB_API_URL)."""

    def __init__(self, tokens: dict[str, str] | None = None, page_size: int = 30,
                 users: dict[str, str] | None = None) -> None:
        self.tokens = tokens if tokens is not None else {"write-token": "write", "read-token": "read", "pat-token": "write"}
        # token -> login for GET /user; the others act like the Actions token: 403, and they write
        # as github-actions[bot]
        self.users = users if users is not None else {"pat-token": "release-bot"}
        self.page_size = page_size  # the server's cap on per_page, so pagination is exercised
        self.comments: dict[tuple[str, int], list[dict]] = {}
        self.failures: list[Failure] = []
        self.log: list[Logged] = []
        self.lock = threading.Lock()
        self.next_id = 1000
        self.clock = 0
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "FakeGitHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    # -- state helpers for tests -------------------------------------------------------------

    def add_comment(self, repo: str, number: int, body: str, login: str = "someone") -> dict:
        with self.lock:
            return self._create(repo, number, body, login)

    def bodies(self, repo: str, number: int) -> list[str]:
        return [c["body"] for c in self.comments.get((repo, number), [])]

    def fail_next(self, *failures: Failure) -> None:
        with self.lock:
            self.failures.extend(failures)

    def calls(self, method: str | None = None) -> list[Logged]:
        return [c for c in self.log if method is None or c.method == method]

    def _create(self, repo: str, number: int, body: str, login: str) -> dict:
        self.next_id += 1
        self.clock += 1
        stamp = f"2026-01-01T00:{self.clock // 60:02d}:{self.clock % 60:02d}Z"
        c = {"id": self.next_id, "body": body, "user": {"login": login}, "created_at": stamp, "updated_at": stamp,
             "html_url": f"https://github.example/{repo}/pull/{number}#issuecomment-{self.next_id}"}
        self.comments.setdefault((repo, number), []).append(c)
        return c

    # -- the HTTP side -----------------------------------------------------------------------

    def _handler(self):
        gh = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _send(self, status: int, data, headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                payload = json.loads(self.rfile.read(length)) if length else None
                parts = urlsplit(self.path)
                status, data, headers = gh._route(method, parts.path, parse_qs(parts.query), payload,
                                                  self.headers.get("Authorization", ""), self.headers.get("Accept", ""))
                with gh.lock:
                    gh.log.append(Logged(method, self.path, status, time.monotonic(), payload))
                self._send(status, data, headers)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PATCH(self) -> None:
                self._handle("PATCH")

        return Handler

    def _route(self, method, path, query, payload, auth, accept):
        with self.lock:
            if self.failures:
                f = self.failures.pop(0)
                return f.status, {"message": f.message}, f.headers
            token = auth.removeprefix("Bearer ").strip()
            if token not in self.tokens:
                return 401, {"message": "Bad credentials"}, {}
            if "application/vnd.github+json" not in accept:
                return 415, {"message": "Unsupported Accept header"}, {}
            if path == "/user" and method == "GET":
                if token in self.users:
                    return 200, {"login": self.users[token], "type": "User"}, {}
                return 403, {"message": "Resource not accessible by integration"}, {}
            m = LIST.match(path)
            if m and method == "GET":
                return self._list(m.group(1), int(m.group(2)), query)
            if method in ("POST", "PATCH") and self.tokens[token] != "write":
                return 403, {"message": "Resource not accessible by integration"}, {}
            if m and method == "POST":
                if not isinstance(payload, dict) or not isinstance(payload.get("body"), str):
                    return 422, {"message": "Invalid request: body is required"}, {}
                if len(payload["body"]) > 65536:
                    return 422, {"message": "Body is too long (maximum is 65536 characters)"}, {}
                login = self.users.get(token, "github-actions[bot]")
                return 201, self._create(m.group(1), int(m.group(2)), payload["body"], login), {}
            m = ONE.match(path)
            if m and method == "PATCH":
                for comments in self.comments.values():
                    for c in comments:
                        if c["id"] == int(m.group(2)):
                            if len(payload.get("body", "")) > 65536:
                                return 422, {"message": "Body is too long (maximum is 65536 characters)"}, {}
                            c["body"] = payload["body"]
                            return 200, c, {}
                return 404, {"message": "Not Found"}, {}
            return 404, {"message": "Not Found"}, {}

    def _list(self, repo: str, number: int, query):
        per_page = min(int(query.get("per_page", ["30"])[0]), self.page_size)
        page = int(query.get("page", ["1"])[0])
        items = self.comments.get((repo, number), [])
        chunk = items[(page - 1) * per_page: page * per_page]
        links = []
        last = max(1, -(-len(items) // per_page))
        base = f"{self.url}/repos/{repo}/issues/{number}/comments?per_page={per_page}"
        if page < last:
            links.append(f'<{base}&page={page + 1}>; rel="next"')
            links.append(f'<{base}&page={last}>; rel="last"')
        return 200, chunk, ({"Link": ", ".join(links)} if links else {})
