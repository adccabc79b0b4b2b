"""A Hub in one process: a threaded HTTP server on 127.0.0.1 that answers the endpoints
huggingface_hub reads (the revision listing, HEAD and ranged GET on /resolve/, the redirect to
a CDN) with the Hub's headers and error codes, and counts every body byte it serves. Used by
tests/hub and bench/hub_headers.py; nothing here touches the network."""

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GOOD_TOKEN = "hf_test_token_with_access"
LISTING = re.compile(r"/api/models/([^/]+/[^/]+)/revision/([^/?]+)")
RESOLVE = re.compile(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)")
CDN = re.compile(r"/cdn/([^/]+/[^/]+)/([0-9a-f]{40})/(.+)")


class SparseFile:
    """A safetensors file of `size` bytes that holds only its header: the tensor bytes read as
    zeros, so a repo of many gigabytes can be served from memory."""

    def __init__(self, header: bytes, size: int) -> None:
        self.header, self.size = header, size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, span: slice) -> bytes:
        start, stop, _ = span.indices(self.size)
        head = self.header[start:stop]
        return head + bytes(max(0, stop - max(start, len(self.header))))


@dataclass
class Repo:
    commits: dict[str, dict[str, bytes | SparseFile]]  # sha -> {file: content}
    refs: dict[str, str]  # branch -> sha
    gated: bool = False


@dataclass
class Hub:
    repos: dict[str, Repo] = field(default_factory=dict)
    served: dict[str, int] = field(default_factory=dict)  # file -> body bytes sent
    requests: list[str] = field(default_factory=list)
    url: str = ""
    token: str = GOOD_TOKEN  # the one token a gated repo accepts

    def add(self, repo_id: str, files: dict, gated: bool = False,
            branch: str = "main") -> str:
        """A new commit of `repo_id` holding exactly `files`; `branch` moves to it."""
        digest = hashlib.sha1()
        for name in sorted(files):
            digest.update(name.encode() + files[name][:1 << 16] + str(len(files[name])).encode())
        sha = digest.hexdigest()
        repo = self.repos.setdefault(repo_id, Repo({}, {}, gated))
        repo.commits[sha] = files
        repo.refs[branch] = sha
        return sha

    def served_bytes(self, suffix: str = "") -> int:
        return sum(n for f, n in self.served.items() if f.endswith(suffix))


def _handler(hub: Hub):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet test output
            pass

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def do_GET(self) -> None:
            self._answer(head=False)

        def _answer(self, head: bool) -> None:
            hub.requests.append(f"{self.command} {self.path}")
            path = self.path.split("?", 1)[0]
            if match := LISTING.fullmatch(path):
                return self._listing(*match.groups())
            if match := RESOLVE.fullmatch(path):
                return self._resolve(*match.groups(), head=head)
            if match := CDN.fullmatch(path):
                return self._resolve(*match.groups(), head=head, cdn=True)
            self._error(404, "EntryNotFound")

        def _commit(self, repo_id: str, rev: str) -> tuple[str, dict] | None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(404, "RepoNotFound")  # the Hub also says 401 for unknown repos
                return None
            sha = repo.refs.get(rev, rev)
            if sha not in repo.commits:
                self._error(404, "RevisionNotFound")
                return None
            return sha, repo.commits[sha]

        def _listing(self, repo_id: str, rev: str) -> None:
            found = self._commit(repo_id, rev)
            if found:
                sha, files = found
                body = json.dumps({"id": repo_id, "sha": sha, "gated": hub.repos[repo_id].gated,
                                   "siblings": [{"rfilename": f, "size": len(c)}
                                                for f, c in files.items()]}).encode()
                self._send(200, {"Content-Type": "application/json"}, body, "listing")

        def _resolve(self, repo_id: str, rev: str, name: str, head: bool,
                     cdn: bool = False) -> None:
            repo = hub.repos.get(repo_id)
            auth = self.headers.get("Authorization")
            if repo is not None and repo.gated and not cdn and auth != f"Bearer {hub.token}":
                return self._error(401 if auth is None else 403, "GatedRepo")
            found = self._commit(repo_id, rev)
            if not found:
                return
            sha, files = found
            if name not in files:
                return self._error(404, "EntryNotFound", {"X-Repo-Commit": sha})
            content = files[name]
            etag = hashlib.sha256(content[:1 << 16] + str(len(content)).encode()).hexdigest()
            headers = {"X-Repo-Commit": sha, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
            if name.endswith(".safetensors"):  # LFS files: the Hub adds the linked headers
                headers |= {"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(content))}
            if name.endswith(".safetensors") and not head and not cdn:
                # the Hub answers LFS files with a redirect to its CDN, which serves the ranges
                location = f"/cdn/{repo_id}/{sha}/{name}"
                return self._send(302, headers | {"Location": location}, b"", "redirect")
            status, body = 200, content
            if (rng := self.headers.get("Range")) and not head:
                start, _, end = rng.removeprefix("bytes=").partition("-")
                first, last = int(start), min(int(end or len(content) - 1), len(content) - 1)
                status, body = 206, content[first:last + 1]
                headers["Content-Range"] = f"bytes {first}-{last}/{len(content)}"
            self._send(status, headers, b"" if head else body, name,
                       length=len(content) if head else None)

        def _error(self, status: int, code: str, extra: dict | None = None) -> None:
            body = json.dumps({"error": code}).encode()
            self._send(status, {"X-Error-Code": code, "Content-Type": "application/json",
                                **(extra or {})}, body, "error")

        def _send(self, status: int, headers: dict, body: bytes, name: str,
                  length: int | None = None) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            self.end_headers()
            self.wfile.write(body)
            hub.served[name] = hub.served.get(name, 0) + len(body)

    return Handler


def serve(hub: Hub) -> ThreadingHTTPServer:
    """Start answering on 127.0.0.1 at a free port (hub.url); stop with .shutdown()."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    return server
