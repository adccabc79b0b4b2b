"""What servecap keeps from a Hub repo beside huggingface_hub's own cache: which commit a
revision named, the commit's file listing, and each safetensors file's header (never weights).

Layout under $HF_HOME/servecap/models--ORG--NAME/:
    refs/REVISION          the commit sha that REVISION named when last read online
    SHA/listing.json       {"sha": ..., "siblings": [{"rfilename": ..., "size": ...}, ...]}
    SHA/headers/FILE       the 8-byte length and the JSON header of FILE: itself a valid
                           safetensors file with no tensor data, read by the one header parser
"""

import json
import os
import re
from pathlib import Path
from urllib.parse import quote

COMMIT_SHA = re.compile(r"[0-9a-f]{40}")


class HubCache:
    """One repo's entries; `root` is the servecap folder under HF_HOME."""

    def __init__(self, root: Path, repo_id: str) -> None:
        self.repo_dir = root / ("models--" + repo_id.replace("/", "--"))

    def sha_for(self, revision: str) -> str | None:
        """The commit a revision named when last read online; a full sha names itself."""
        if COMMIT_SHA.fullmatch(revision):
            return revision
        ref = self.repo_dir / "refs" / quote(revision, safe="")
        return ref.read_text().strip() if ref.is_file() else None

    def listing(self, sha: str) -> dict | None:
        """None when absent or unreadable: then it is simply not cached."""
        try:
            return json.loads((self.repo_dir / sha / "listing.json").read_text())
        except (OSError, ValueError):
            return None

    def header_path(self, sha: str, filename: str) -> Path:
        return self.repo_dir / sha / "headers" / filename

    def remember(self, revision: str, listing: dict) -> None:
        sha = listing["sha"]
        _write(self.repo_dir / sha / "listing.json", json.dumps(listing).encode())
        if revision != sha:
            _write(self.repo_dir / "refs" / quote(revision, safe=""), sha.encode())

    def store_header(self, sha: str, filename: str, raw: bytes) -> Path:
        path = self.header_path(sha, filename)
        _write(path, raw)
        return path


def _write(path: Path, data: bytes) -> None:
    """Write then rename, so an interrupted run never leaves half a header to be trusted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
