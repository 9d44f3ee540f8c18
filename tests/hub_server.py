"""A local stand-in for the Hugging Face Hub: the part of its HTTP protocol huggingface_hub's
`hf_hub_download` and `get_safetensors_metadata` use, on 127.0.0.1 (standard library only).

    GET|HEAD /{org}/{name}/resolve/{revision}/{path}

answers with the file (a Range request gets 206 and the asked bytes), `X-Repo-Commit` and an
`ETag`; errors carry the `X-Error-Code` the Hub sends (RepoNotFound, GatedRepo,
RevisionNotFound, EntryNotFound), which the client turns into its error types.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<path>.+)$")


@dataclass
class Repo:
    """Files per commit, branch and tag names per commit, and who may read it."""

    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # sha -> path -> bytes
    refs: dict[str, str] = field(default_factory=dict)  # branch or tag -> sha
    gated_token: str | None = None  # gated: only this bearer token reads it

    def add(self, ref: str, files: dict[str, bytes]) -> str:
        sha = hashlib.sha1(repr(sorted(files.items())).encode()).hexdigest()
        self.commits[sha] = files
        self.refs[ref] = sha
        return sha


class HubStandIn:
    """The server: `repos` by id, delays before answering Range requests and config.json
    requests, a request log."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.delay_s = 0.0
        self.config_delay_s = 0.0  # before answering for config.json (HEAD or GET)
        self.requests: list[str] = []
        handler = type("Handler", (_Handler,), {"hub": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> HubStandIn:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    hub: HubStandIn

    def log_message(self, *_: object) -> None:  # keep pytest output clean
        pass

    def _error(self, status: int, code: str, commit: str | None = None) -> None:
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", code)
        if commit:
            self.send_header("X-Repo-Commit", commit)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _answer(self, with_body: bool) -> None:
        self.hub.requests.append(f"{self.command} {self.path}")
        if self.headers.get("range"):  # slow on the safetensors header reads only
            time.sleep(self.hub.delay_s)
        elif self.path.split("?")[0].endswith("/config.json"):
            time.sleep(self.hub.config_delay_s)
        match = _RESOLVE.match(self.path.split("?")[0])
        if match is None:
            return self._error(404, "EntryNotFound")
        repo = self.hub.repos.get(unquote(match["repo"]))
        if repo is None:
            return self._error(404, "RepoNotFound")
        if repo.gated_token and self.headers.get("authorization") != f"Bearer {repo.gated_token}":
            return self._error(401, "GatedRepo")
        revision = unquote(match["revision"])
        sha = repo.refs.get(revision, revision if revision in repo.commits else None)
        if sha is None:
            return self._error(404, "RevisionNotFound")
        body = repo.commits[sha].get(unquote(match["path"]))
        if body is None:
            return self._error(404, "EntryNotFound", sha)
        status, start, end = 200, 0, len(body) - 1
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("range", ""))
        if wanted:
            status, start = 206, int(wanted[1])
            end = min(int(wanted[2]) if wanted[2] else end, len(body) - 1)
        part = body[start : end + 1]
        self.send_response(status)
        self.send_header("X-Repo-Commit", sha)
        self.send_header("ETag", f'"{hashlib.sha256(body).hexdigest()}"')
        self.send_header("Content-Length", str(len(part) if with_body else len(body)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
        self.end_headers()
        if with_body:
            self.wfile.write(part)

    def do_HEAD(self) -> None:
        self._answer(with_body=False)

    def do_GET(self) -> None:
        self._answer(with_body=True)
