"""Post a report as one pull-request comment, updated in place on every later run.

Used by the GitHub Action (`.github/actions/abtest/`): `python -m abtest.reporting.pr_comment FILE`.
It reads what GitHub Actions provides: GITHUB_TOKEN (sent, never printed), GITHUB_REPOSITORY,
GITHUB_EVENT_PATH (the pull request's number; ABTEST_PR_NUMBER overrides) and GITHUB_API_URL.
The comment is found again by a hidden marker carrying `--key` (one comment per key, e.g. per
fixture); a marked comment the token may not edit is left alone and a new one is posted.
Standard library only: the action runs it before anything else is needed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

from abtest.errors import UserError

PER_PAGE = 100


class CommentError(UserError):
    """The comment could not be posted: what is missing or what GitHub answered (exit 2)."""


def marker(key: str) -> str:
    safe = "".join(ch for ch in key if ch.isalnum() or ch in "._/-")[:100] or "default"
    return f"<!-- abtest-pr-comment:{safe} -->"


class GitHub:
    def __init__(self, api: str, token: str):
        self.api, self._token = api.rstrip("/"), token

    def call(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.api + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self._token}", "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json",
            "User-Agent": "abtest-pr-comment"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                msg = json.loads(exc.read() or b"{}").get("message") or exc.reason
            except ValueError:
                msg = exc.reason
            return exc.code, {"message": str(msg)[:200]}
        except (urllib.error.URLError, OSError) as exc:
            raise CommentError(f"cannot reach {self.api}: {getattr(exc, 'reason', exc)}") from None


def post_or_update(gh: GitHub, repo: str, number: int, body: str, key: str) -> tuple[str, int]:
    """('updated'|'created', comment id): edit this key's newest comment, else post one."""
    mark = marker(key)
    text = f"{mark}\n{body}"
    mine = []
    page = 1
    while True:
        status, got = gh.call("GET", f"/repos/{repo}/issues/{number}/comments"
                                     f"?per_page={PER_PAGE}&page={page}")
        if status != 200 or not isinstance(got, list):
            raise CommentError(f"listing comments of #{number} failed: HTTP {status} "
                               f"{(got or {}).get('message', '')}".rstrip())
        mine += [c for c in got if isinstance(c, dict) and str(c.get("body") or "").startswith(mark)]
        if len(got) < PER_PAGE:
            break
        page += 1
    for c in sorted(mine, key=lambda c: c.get("id") or 0, reverse=True):
        status, got = gh.call("PATCH", f"/repos/{repo}/issues/comments/{c['id']}", {"body": text})
        if status == 200:
            return "updated", int(c["id"])
        if status not in (403, 404):  # someone else's marked comment: post our own instead
            raise CommentError(f"updating comment {c['id']} failed: HTTP {status} "
                               f"{got.get('message', '')}".rstrip())
    status, got = gh.call("POST", f"/repos/{repo}/issues/{number}/comments", {"body": text})
    if status != 201:
        raise CommentError(f"posting the comment failed: HTTP {status} "
                           f"{(got or {}).get('message', '')}".rstrip())
    return "created", int(got["id"])


def pr_number(env) -> int:
    if env.get("ABTEST_PR_NUMBER"):
        raw = env["ABTEST_PR_NUMBER"]
    else:
        path = env.get("GITHUB_EVENT_PATH")
        if not path:
            raise CommentError("no pull request: set GITHUB_EVENT_PATH (Actions does) or "
                               "ABTEST_PR_NUMBER")
        try:
            event = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CommentError(f"{path}: cannot read the event ({exc})") from None
        raw = ((event.get("pull_request") or {}).get("number")
               or (event.get("issue") or {}).get("number") or event.get("number"))
        if raw is None:
            raise CommentError(f"{path}: the event has no pull request number (run the action "
                               "on pull_request events, or set ABTEST_PR_NUMBER)")
    try:
        n = int(raw)
    except (TypeError, ValueError):
        raise CommentError(f"pull request number {raw!r} is not a number") from None
    if n <= 0:
        raise CommentError(f"pull request number {n} is not positive")
    return n


def main(argv=None, env=None) -> int:
    env = os.environ if env is None else env
    ap = argparse.ArgumentParser(prog="python -m abtest.reporting.pr_comment",
                                 description="Post or update the abtest comment on a pull request.")
    ap.add_argument("file", help="the comment (abtest report RUN --format github --out FILE)")
    ap.add_argument("--key", default="default", help="one comment per key (e.g. the fixture)")
    args = ap.parse_args(argv)
    try:
        token = env.get("GITHUB_TOKEN") or ""
        repo = env.get("GITHUB_REPOSITORY") or ""
        if not token:
            raise CommentError("GITHUB_TOKEN is not set (pass `github-token` to the action)")
        if repo.count("/") != 1 or not all(repo.split("/")):
            raise CommentError(f"GITHUB_REPOSITORY {repo!r} is not owner/name")
        try:
            body = Path(args.file).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommentError(f"{args.file}: {exc.strerror}") from None
        gh = GitHub(env.get("GITHUB_API_URL") or "https://api.github.com", token)
        action, cid = post_or_update(gh, repo, pr_number(env), body, args.key)
    except CommentError as exc:
        print(f"abtest pr-comment: error: {exc}", file=sys.stderr)
        return 2
    print(f"abtest pr-comment: {action} comment {cid}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
