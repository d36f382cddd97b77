"""The sticky-comment poster against a real HTTP server on 127.0.0.1 that speaks GitHub's REST API."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from cli import run_cli
from github_server import FakeGitHub, Failure
from neuron_ready.github import GitHubClient, GitHubError, comment_body, marker, upsert_comment

REPO = "acme/trainer"
T1 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
T2 = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def gh():
    with FakeGitHub() as server:
        yield server


def client(gh, token="write-token", **kw) -> GitHubClient:
    return GitHubClient(token, gh.url, **kw)


def test_create_then_update_then_leave_identical_body_alone(gh):
    gh.add_comment(REPO, 7, "LGTM")  # someone else's comment is never touched
    first = upsert_comment(client(gh), REPO, 7, "score 40", valid_at=T1)
    assert first.action == "created" and first.url.endswith(f"#issuecomment-{first.comment_id}")
    assert gh.bodies(REPO, 7) == ["LGTM", comment_body("score 40", "neuron-ready", T1)]

    second = upsert_comment(client(gh), REPO, 7, "score 35", valid_at=T2)
    assert second.action == "updated" and second.comment_id == first.comment_id
    assert gh.bodies(REPO, 7)[1].endswith("score 35") and len(gh.bodies(REPO, 7)) == 2

    patches = len(gh.calls("PATCH"))
    third = upsert_comment(client(gh), REPO, 7, "score 35", valid_at=T2)
    assert third.action == "unchanged"
    assert len(gh.calls("PATCH")) == patches  # an identical body is not rewritten
    assert len(gh.calls("POST")) == 1


def test_body_carries_hidden_marker_and_valid_at(gh):
    upsert_comment(client(gh), REPO, 1, "hello", tag="nightly", valid_at=T1)
    body = gh.bodies(REPO, 1)[0]
    assert body.startswith(marker("nightly") + "\n<!-- neuron-ready-valid-at: 2026-03-01T12:00:00Z -->\n")
    # a different tag is a different comment (two jobs, two sticky comments)
    assert upsert_comment(client(gh), REPO, 1, "hello", tag="main", valid_at=T1).action == "created"
    assert len(gh.bodies(REPO, 1)) == 2


def test_an_older_run_never_overwrites_a_newer_comment(gh):
    upsert_comment(client(gh), REPO, 3, "from the newer commit", valid_at=T2)
    late = upsert_comment(client(gh), REPO, 3, "from the older commit", valid_at=T1)
    assert late.action == "newer-exists"
    assert gh.bodies(REPO, 3)[0].endswith("from the newer commit")
    assert not gh.calls("PATCH")


def test_finds_its_comment_on_a_later_page(gh):
    gh.page_size = 10
    for i in range(23):
        gh.add_comment(REPO, 9, f"chatter {i}")
    gh.add_comment(REPO, 9, comment_body("old report", "neuron-ready", T1), login="github-actions[bot]")
    for i in range(5):
        gh.add_comment(REPO, 9, f"more chatter {i}")
    out = upsert_comment(client(gh), REPO, 9, "new report", valid_at=T2)
    assert out.action == "updated"
    gets = gh.calls("GET")
    assert gets[0].path == "/user"  # who am I: the Actions token may not say (403), so github-actions[bot]
    assert len(gets) == 4 and "page=3" in gets[-1].path  # followed the Link header to the end
    bodies = gh.bodies(REPO, 9)
    assert len(bodies) == 29 and bodies[23].endswith("new report")


def test_read_only_token_is_an_outcome_not_a_crash(gh):
    out = upsert_comment(client(gh, token="read-token"), REPO, 5, "report", valid_at=T1)
    assert out.action == "forbidden" and "read-only" in out.message
    assert gh.bodies(REPO, 5) == []


def test_retries_server_errors_then_succeeds(gh):
    gh.fail_next(Failure(502, message="Bad Gateway"), Failure(503, {"Retry-After": "0"}))
    out = upsert_comment(client(gh), REPO, 2, "report", valid_at=T1)
    assert out.action == "created"
    statuses = [c.status for c in gh.log]
    assert statuses[:4] == [502, 503, 403, 200]  # the 403: GET /user, which the Actions token may not read


def test_waits_as_told_on_rate_limits(gh):
    reset = int(time.time()) + 1
    gh.fail_next(
        Failure(429, {"Retry-After": "1"}, "rate limited"),
        Failure(403, {"Retry-After": "1"}, "You have exceeded a secondary rate limit"),
        Failure(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}, "API rate limit exceeded"),
    )
    out = upsert_comment(client(gh), REPO, 4, "report", valid_at=T1)
    assert out.action == "created"
    times = [c.at for c in gh.log]
    assert [c.status for c in gh.log][:5] == [429, 403, 403, 403, 200]  # the last 403: GET /user
    assert times[1] - times[0] >= 0.9 and times[2] - times[1] >= 0.9  # honoured Retry-After


def test_gives_up_after_bounded_attempts(gh):
    gh.fail_next(*[Failure(500)] * 3)
    with pytest.raises(GitHubError, match=r"500 Server Error \(gave up after 2 attempts\)"):
        upsert_comment(client(gh, max_attempts=2), REPO, 4, "report", valid_at=T1)


def test_refuses_to_wait_longer_than_allowed(gh):
    gh.fail_next(Failure(429, {"Retry-After": "3600"}, "slow down"))
    started = time.monotonic()
    with pytest.raises(GitHubError, match="asks to wait 3600 s"):
        upsert_comment(client(gh, max_wait=5), REPO, 4, "report", valid_at=T1)
    assert time.monotonic() - started < 30


def test_bad_credentials_is_an_error(gh):
    with pytest.raises(GitHubError, match="401 Bad credentials"):
        upsert_comment(client(gh, token="nope"), REPO, 4, "report")


def test_comment_command(gh, tmp_path):
    body = tmp_path / "body.md"
    body.write_text("### readiness\n", encoding="utf-8")
    env = {"GITHUB_TOKEN": "write-token", "GITHUB_API_URL": gh.url, "GITHUB_REPOSITORY": REPO}
    r = run_cli("comment", str(body), "--pr", "12", "--valid-at", "2026-03-01T12:00:00Z", cwd=tmp_path, env=env)
    assert r.code == 0, r.err
    assert "created comment" in r.err
    r = run_cli("comment", str(body), "--pr", "12", "--valid-at", "2026-03-01T12:00:00Z", cwd=tmp_path, env=env)
    assert r.code == 0 and "already says this" in r.err
    assert len(gh.bodies(REPO, 12)) == 1

    fork = dict(env, GITHUB_TOKEN="read-token")
    r = run_cli("comment", str(body), "--pr", "13", cwd=tmp_path, env=fork)
    assert r.code == 0 and "may not comment" in r.err

    r = run_cli("comment", str(body), "--pr", "13", cwd=tmp_path, env=dict(env, GITHUB_TOKEN=""))
    assert r.code == 2 and r.err.strip() == "neuron-ready: error: no token: set $GITHUB_TOKEN"

    gh.fail_next(*[Failure(500, {"Retry-After": "0"})] * 5)
    r = run_cli("comment", str(body), "--pr", "14", cwd=tmp_path, env=env, timeout=120)
    assert r.code == 2 and "gave up after 5 attempts" in r.err and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_a_marker_from_someone_else_is_neither_edited_nor_obeyed(gh):
    """Anyone may comment: a pasted marker (valid at 2099) must not be hijacked nor freeze ours."""
    far = datetime(2099, 1, 1, tzinfo=timezone.utc)
    gh.add_comment(REPO, 6, comment_body("forged", "neuron-ready", far), login="mallory")
    gh.add_comment(REPO, 6, "quoting it: " + comment_body("x", "neuron-ready", far), login="github-actions[bot]")
    first = upsert_comment(client(gh), REPO, 6, "real report", valid_at=T1)
    assert first.action == "created" and not gh.calls("PATCH")
    assert gh.bodies(REPO, 6)[0].endswith("forged")
    second = upsert_comment(client(gh), REPO, 6, "next report", valid_at=T2)
    assert second.action == "updated" and second.comment_id == first.comment_id
    # a personal token writes as its user: the Actions bot's comments are not its own
    pat = upsert_comment(client(gh, token="pat-token"), REPO, 6, "from the PAT", valid_at=T2)
    assert pat.action == "created" and len(gh.bodies(REPO, 6)) == 4


def test_the_token_never_leaves_the_api_host(gh):
    with FakeGitHub() as other:
        # a redirect to another host: followed without the token (the other host sees none: 401)
        gh.fail_next(Failure(302, {"Location": f"{other.url}/user"}, "moved"))
        with pytest.raises(GitHubError, match="401"):
            client(gh).request("GET", "/user")
        assert [c.status for c in other.log] == [401]
        # a Link header naming another host is refused before any request goes there
        gh.page_size = 1
        for i in range(3):
            gh.add_comment(REPO, 8, f"c{i}")
        gh.url = other.url
        with pytest.raises(GitHubError, match="refusing to send the token"):
            GitHubClient("write-token", f"http://127.0.0.1:{gh.server.server_address[1]}").paginate(
                f"/repos/{REPO}/issues/8/comments?per_page=1")
        assert len(other.log) == 1
