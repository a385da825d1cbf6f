"""Stand in for a teammate on the stand-in forge (08-pull-request): review and merge a pull
request as that person, with their own token.

Usage: ``python review_as.py LOGIN approve NUMBER [--merge] [--body TEXT] [--show-body]`` or
``python review_as.py LOGIN merge NUMBER``. It talks to the forge's GitHub API at
``$GH_HOST`` (``/api/v3``) as a person would through the forge's web page: the review
approves the request's current head commit; the merge is the forge's own merge commit.
The person's token is read from ``LOGIN.token`` in the forge's people folder
(``notebooks/.scratch/forge/people``, written by ``stand_in_forge.py``), never from the
engineer's environment. Standard library only (it runs in the agent's sandbox, through
the egress proxy).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

PEOPLE = Path(__file__).resolve().parent.parent / ".scratch" / "forge" / "people"
PROJECT = "octo/infra"


class Forge:
    """The forge's GitHub API as one person."""

    def __init__(self, host: str, token: str, project: str) -> None:
        self.base = f"http://{host}/api/v3/repos/{project}"
        self.token = token

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Authorization", f"token {self.token}")
        request.add_header("Accept", "application/vnd.github+json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read() or b"null")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("login", help="the teammate this stands in for (bob)")
    parser.add_argument("action", choices=("approve", "merge"))
    parser.add_argument("number", type=int, help="the pull request's number")
    parser.add_argument("--merge", action="store_true", help="merge after approving")
    parser.add_argument("--body", default="Looks good: the plan matches the change.")
    parser.add_argument("--project", default=PROJECT)
    parser.add_argument("--show-body", action="store_true", help="print the request's body")
    args = parser.parse_args(argv)
    host = os.environ.get("GH_HOST")
    token_file = PEOPLE / f"{args.login}.token"
    if not host:
        print("review_as: GH_HOST is not set (the stand-in forge's host:port)", file=sys.stderr)
        return 2
    if not token_file.is_file():
        print(f"review_as: no token for {args.login} in {PEOPLE}", file=sys.stderr)
        return 2
    forge = Forge(host, token_file.read_text().strip(), args.project)
    number = args.number
    try:
        pull = forge.call("GET", f"/pulls/{number}")
        head = pull["head"]["sha"]
        print(f"{args.login} reads pull request #{number}: {pull['title']!r}, head {head}")
        if args.show_body:
            print("---- its body, as the forge shows it ----")
            print((pull.get("body") or "").strip())
            print("----")
        if args.action == "approve":
            body = {"event": "APPROVE", "commit_id": head, "body": args.body}
            review = forge.call("POST", f"/pulls/{number}/reviews", body)
            print(f"{args.login} approved commit {review['commit_id']}: {args.body}")
        if args.action == "merge" or args.merge:
            merged = forge.call("PUT", f"/pulls/{number}/merge", {"merge_method": "merge"})
            print(f"{args.login} merged pull request #{number}: merge commit {merged['sha']}")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:200]
        print(f"review_as: the forge answered {exc.code}: {detail}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"review_as: cannot reach the forge at {host}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
