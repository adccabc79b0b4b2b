"""The Hub's endpoints through huggingface_hub's own session, so HF_TOKEN / the login cache,
HF_ENDPOINT and HF_HUB_OFFLINE apply: the revision listing, small files into its cache, and
safetensors headers by range request. Its errors become one-line SpecErrors here."""

import importlib
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from servecap.ledger.errors import SpecError

from .hub_cache import COMMIT_SHA
from .safetensors_headers import MAX_HEADER_BYTES

TIMEOUT_S = 10.0
LOGIN = "log in with `huggingface-cli login` (or `hf auth login`) or set HF_TOKEN"


class Fetcher:
    """One repo's reads; counts the bytes of every response body, by file."""

    def __init__(self, repo_id: str) -> None:
        from huggingface_hub import constants

        self.repo_id = repo_id
        self.endpoint = constants.ENDPOINT
        self.fetched: dict[str, int] = {}  # file -> body bytes over the network this run
        self.cached: dict[str, int] = {}  # file -> bytes read from a cache instead

    def listing(self, revision: str) -> dict:
        """/api/models/REPO/revision/REV: the commit sha and every file with its size."""
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        url = f"{self.endpoint}/api/models/{self.repo_id}/revision/{quote(revision, safe='')}"
        response = get_session().get(url, headers=build_hf_headers(), params={"blobs": True},
                                     timeout=TIMEOUT_S)
        hf_raise_for_status(response)
        self.fetched["revision listing"] = len(response.content)
        try:
            data = response.json()
        except ValueError:
            data = None
        if not (isinstance(data, dict) and isinstance(data.get("siblings"), list)
                and COMMIT_SHA.fullmatch(str(data.get("sha")))):
            raise SpecError("revision listing", url, "not a Hub answer (a JSON object with a "
                            "commit sha and siblings): is HF_ENDPOINT a Hub?")
        return {"sha": data["sha"], "siblings": [
            {"rfilename": s["rfilename"], "size": _size(s.get("size"))} for s in data["siblings"]
            if isinstance(s, dict) and isinstance(s.get("rfilename"), str)]}

    def download(self, filename: str, sha: str) -> Path:
        """A small file into huggingface_hub's cache (shared with transformers and vLLM)."""
        from huggingface_hub import hf_hub_download, try_to_load_from_cache

        before = try_to_load_from_cache(self.repo_id, filename, revision=sha)
        path = Path(hf_hub_download(self.repo_id, filename, revision=sha,
                                    etag_timeout=TIMEOUT_S))
        (self.cached if isinstance(before, str) else self.fetched)[filename] = path.stat().st_size
        return path

    def header(self, filename: str, sha: str) -> bytes:
        """The 8-byte little-endian length, then exactly that many bytes of JSON: two range
        requests, never a byte of tensor data."""
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session

        url = hf_hub_url(self.repo_id, filename, revision=sha)
        headers = {**build_hf_headers(), "Accept-Encoding": "identity"}
        first = _range(get_session(), url, headers, 0, 8)
        (length,) = struct.unpack("<Q", first)
        if not 2 <= length <= MAX_HEADER_BYTES:
            raise SpecError("safetensors header", f"{self.repo_id}/{filename}",
                            f"header length {length} is implausible: not a safetensors file")
        raw = first + _range(get_session(), url, headers, 8, length)
        self.fetched[filename] = len(raw)
        return raw


def _size(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _range(session, url: str, headers: dict, start: int, count: int) -> bytes:
    """Bytes [start, start + count) by a Range request. A server that ignores Range (200) is
    read only as far as needed and then hung up on, so no whole shard is ever pulled."""
    from huggingface_hub.utils import hf_raise_for_status

    wanted = {**headers, "Range": f"bytes={start}-{start + count - 1}"}
    data = bytearray()
    with session.stream("GET", url, headers=wanted, timeout=TIMEOUT_S) as response:
        if response.status_code >= 400:
            response.read()
            hf_raise_for_status(response)
        skip = start if response.status_code == 200 else 0
        for chunk in response.iter_bytes():
            data += chunk
            if len(data) >= skip + count:
                break
    got = bytes(data[skip:skip + count])
    if len(got) != count:
        raise SpecError("safetensors header", url, f"the server sent {len(got)} of {count} "
                        "bytes asked for: a truncated file")
    return got


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Network failures of the HTTP library huggingface_hub runs on (httpx2, formerly httpx)."""
    for name in ("httpx2", "httpx"):
        try:
            return (importlib.import_module(name).TransportError,)
        except ImportError:
            continue
    return ()


@contextmanager
def translated(ref: str, endpoint: str, cached: bool) -> Iterator[None]:
    """huggingface_hub's exceptions as one line each, saying what to do next."""
    from huggingface_hub import errors, get_token

    repo_id = ref.partition("@")[0]
    try:
        yield
    except errors.GatedRepoError:
        terms = f"accept its terms at {endpoint}/{repo_id}"
        why = (f"this token has no access: {terms} with the token's account" if get_token()
               else f"no token was sent: {terms}, then {LOGIN}")
        raise SpecError("model", ref, f"gated on the Hub and {why}") from None
    except errors.RepositoryNotFoundError:
        raise SpecError("model", ref, f"no such model on {endpoint} and no such local file or "
                        f"directory (a private repo needs a token: {LOGIN})") from None
    except errors.RevisionNotFoundError:
        raise SpecError("revision", ref.partition("@")[2], f"not found in {repo_id} on "
                        f"{endpoint}: give a branch, tag or commit sha") from None
    except errors.RemoteEntryNotFoundError as exc:
        raise SpecError("file", _url_file(exc), f"missing from {repo_id} on {endpoint}") from None
    except (errors.OfflineModeIsEnabled, errors.LocalEntryNotFoundError) as exc:
        if not _offline():  # huggingface_hub also says "not in the cache" when it lost the network
            raise _unreachable(ref, endpoint, exc, cached) from None
        raise SpecError("model", ref, "HF_HUB_OFFLINE=1 and it is not (fully) in the cache: run "
                        "once with the network to cache its config and headers") from None
    except _transport_errors() as exc:
        raise _unreachable(ref, endpoint, exc, cached) from None
    except errors.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise SpecError("model", ref, f"{endpoint} answered HTTP {status}") from None


def _offline() -> bool:
    from huggingface_hub import constants

    return constants.is_offline_mode()


def _unreachable(ref: str, endpoint: str, exc: BaseException, cached: bool) -> SpecError:
    hint = ("it is cached: run with HF_HUB_OFFLINE=1" if cached else "it is not cached either: "
            "check the network, HF_ENDPOINT and proxy settings")
    return SpecError("model", ref, f"cannot reach {endpoint} ({exc.__class__.__name__}); {hint}")


def _url_file(exc) -> str:
    url = str(exc.response.url) if getattr(exc, "response", None) is not None else "?"
    return url.split("/resolve/", 1)[-1].split("/", 1)[-1]
