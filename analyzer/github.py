"""The sticky pull-request comment, over GitHub's REST API (standard library only).

Behaviour follows Infracost's `update` mode: the body starts with a hidden marker naming the tool
(and a tag, so several jobs can keep one comment each) and a valid-at time (the commit the run
scanned). Only comments written by the token's own identity count (`GET /user`; the default
Actions token cannot read it and writes as github-actions[bot]), so a marker pasted by someone
else is ignored. The newest such comment carrying the marker is edited in place; it is left alone when its
body is byte-identical, or when it is valid at a later time (a newer run finished first). No
comment is ever deleted. A 403 that is not a rate limit means the token may not write (a fork's
read-only token): that is an outcome, not an error. The token is only ever sent to the API host:
never after a redirect to another host, nor to a `Link` URL that points elsewhere. 5xx answers, 429 and rate-limit 403s are
retried a bounded number of times, waiting as GitHub asks (Retry-After, x-ratelimit-reset).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from . import __version__

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
MAX_PAGES = 50  # 5,000 comments: far beyond any pull request we should be reading
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')
_VALID_AT = re.compile(r"<!-- neuron-ready-valid-at: (\S+) -->")
ACTIONS_BOT = "github-actions[bot]"  # who the default GITHUB_TOKEN writes as


class GitHubError(Exception):
    """The API answered with an error we cannot work around, or never answered: one line."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Forbidden(GitHubError):
    """403 that is not a rate limit: the token may not do this (e.g. a fork's read-only token)."""


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # names in lower case
    data: Any


def _header(headers: Any, name: str) -> str | None:
    return headers.get(name) if headers is not None else None


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


class _SameHostRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect, but never carry the token to another host (urllib would)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            new.headers.pop("Authorization", None)
            new.unredirected_hdrs.pop("Authorization", None)
        return new


_OPENER = urllib.request.build_opener(_SameHostRedirects)


class GitHubClient:
    def __init__(self, token: str, api_url: str | None = None, *, max_attempts: int = 5, max_wait: float = 60.0,
                 timeout: float = 30.0, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time) -> None:
        self.token = token
        self.api_url = (api_url or DEFAULT_API_URL).rstrip("/")
        self.max_attempts = max_attempts
        self.max_wait = max_wait
        self.timeout = timeout
        self.sleep = sleep
        self.clock = clock

    def _url(self, path_or_url: str) -> str:
        if "://" not in path_or_url:
            return f"{self.api_url}{path_or_url}"
        if _origin(path_or_url) != _origin(self.api_url):  # e.g. a Link header naming another host
            raise GitHubError(f"refusing to send the token to {_origin(path_or_url)[1] or path_or_url!r}, "
                              f"which is not the API host {_origin(self.api_url)[1]}")
        return path_or_url

    def _wait_for(self, status: int, headers: Any, body: str, attempt: int) -> float | None:
        """Seconds to wait before retrying, or None when this answer is not worth retrying."""
        retry_after = _header(headers, "Retry-After")
        remaining = _header(headers, "x-ratelimit-remaining")
        reset = _header(headers, "x-ratelimit-reset")
        rate_limited = status == 429 or (
            status == 403 and (retry_after is not None or remaining == "0" or "rate limit" in body.lower())
        )
        if not (rate_limited or status >= 500):
            return None
        if retry_after is not None and retry_after.strip().isdigit():
            return float(retry_after)
        if remaining == "0" and reset and reset.strip().isdigit():
            return max(0.0, float(reset) - self.clock()) + 1.0
        if rate_limited:  # GitHub: without a hint, wait at least a minute before a retry
            return 60.0
        return float(2 ** attempt)  # 5xx: 1, 2, 4, 8 s

    def request(self, method: str, path_or_url: str, payload: Any = None) -> Response:
        url = self._url(path_or_url)
        data = json.dumps(payload).encode("utf-8") if payload is not None else None
        last = ""
        for attempt in range(self.max_attempts):
            req = urllib.request.Request(url, data=data, method=method, headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {self.token}",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": f"neuron-ready/{__version__}",
                **({"Content-Type": "application/json"} if data is not None else {}),
            })
            try:
                with _OPENER.open(req, timeout=self.timeout) as resp:
                    raw = resp.read().decode("utf-8") or "null"
                    return Response(resp.status, {k.lower(): v for k, v in resp.headers.items()}, json.loads(raw))
            except urllib.error.HTTPError as e:
                body = e.read().decode("utf-8", "replace")
                wait = self._wait_for(e.code, e.headers, body, attempt)
                last = f"{e.code} {_message(body) or e.reason}"
                if wait is None:
                    if e.code == 403:
                        raise Forbidden(f"{method} {url}: {last}", e.code) from None
                    raise GitHubError(f"{method} {url}: {last}", e.code) from None
            except (urllib.error.URLError, OSError, json.JSONDecodeError) as e:
                reason = getattr(e, "reason", e)
                last = f"{type(e).__name__}: {reason}"
                wait = float(2 ** attempt)
            if attempt + 1 == self.max_attempts:
                break
            if wait > self.max_wait:
                raise GitHubError(f"{method} {url}: {last}; GitHub asks to wait {wait:.0f} s, more than {self.max_wait:.0f} s")
            self.sleep(wait)
        raise GitHubError(f"{method} {url}: {last} (gave up after {self.max_attempts} attempts)")

    def login(self) -> str:
        """Who this token writes as. The default Actions token may not read /user (403)."""
        try:
            data = self.request("GET", "/user").data
        except Forbidden:
            return ACTIONS_BOT
        except GitHubError as e:
            if e.status == 404:
                return ACTIONS_BOT
            raise
        login = data.get("login") if isinstance(data, dict) else None
        if not isinstance(login, str) or not login:
            raise GitHubError("GET /user: no login in the answer")
        return login

    def paginate(self, path: str) -> list[Any]:
        items: list[Any] = []
        url: str | None = path
        for _ in range(MAX_PAGES):
            if url is None:
                return items
            resp = self.request("GET", url)
            if not isinstance(resp.data, list):
                raise GitHubError(f"GET {self._url(url)}: expected a list, got {type(resp.data).__name__}")
            items.extend(resp.data)
            m = _NEXT.search(resp.headers.get("link", ""))
            url = m.group(1) if m else None
        return items


def _message(body: str) -> str:
    try:
        return str(json.loads(body).get("message", ""))
    except (ValueError, AttributeError):
        return body.strip()[:200]


# ---------------------------------------------------------------------------------------------
# The sticky comment


def marker(tag: str) -> str:
    return f"<!-- neuron-ready-comment: {tag} -->"


def format_time(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime | None:
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def comment_body(body: str, tag: str, valid_at: datetime | None) -> str:
    head = marker(tag) + "\n"
    if valid_at is not None:
        head += f"<!-- neuron-ready-valid-at: {format_time(valid_at)} -->\n"
    return head + body


def valid_at_of(body: str) -> datetime | None:
    """The valid-at time in our header (the line after the marker); text further down is content."""
    lines = body.split("\n", 2)
    m = _VALID_AT.fullmatch(lines[1]) if len(lines) > 1 else None
    return parse_time(m.group(1)) if m else None


def is_ours(comment: Any, tag: str, login: str) -> bool:
    """A comment this identity wrote, starting with this tag's marker."""
    if not isinstance(comment, dict) or not isinstance(comment.get("body"), str):
        return False
    user = comment.get("user") if isinstance(comment.get("user"), dict) else {}
    return user.get("login") == login and comment["body"].startswith(marker(tag) + "\n")


@dataclass
class Outcome:
    action: str  # created, updated, unchanged, newer-exists, forbidden
    message: str
    url: str = ""
    comment_id: int | None = None


def upsert_comment(client: GitHubClient, repo: str, number: int, body: str, tag: str = "neuron-ready",
                   valid_at: datetime | None = None) -> Outcome:
    """Create or update this tool's one comment on pull request (or issue) `number`."""
    full = comment_body(body, tag, valid_at)
    try:
        me = client.login()
        comments = client.paginate(f"/repos/{repo}/issues/{number}/comments?per_page=100")
        mine = [c for c in comments if is_ours(c, tag, me)]
        if not mine:
            c = client.request("POST", f"/repos/{repo}/issues/{number}/comments", {"body": full}).data
            return Outcome("created", f"created comment {c.get('html_url', c.get('id'))}", c.get("html_url", ""), c.get("id"))
        latest = max(mine, key=lambda c: (c.get("created_at") or "", c.get("id") or 0))
        url = latest.get("html_url", "")
        if latest.get("body") == full:
            return Outcome("unchanged", f"comment {url} already says this; left as it is", url, latest.get("id"))
        theirs = valid_at_of(latest.get("body") or "")
        if theirs is not None and valid_at is not None and theirs > valid_at:
            return Outcome("newer-exists",
                           f"comment {url} is from a newer run (valid at {format_time(theirs)}); not overwritten",
                           url, latest.get("id"))
        client.request("PATCH", f"/repos/{repo}/issues/comments/{latest['id']}", {"body": full})
        return Outcome("updated", f"updated comment {url}", url, latest.get("id"))
    except Forbidden as e:
        return Outcome("forbidden", f"the token may not comment on this pull request ({e}); "
                       "a pull request from a fork gets a read-only token: the job summary has the report")
