"""A model on the Hugging Face Hub by its id, org/name[@revision]: the commit it names, its
config.json, safetensors index and every safetensors header. Weights are never downloaded.

huggingface_hub (and its HTTP client) is imported only when an id is actually resolved, so
planning a bundled model or a local directory loads no HTTP client."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from servecap.ledger.errors import SpecError

from .safetensors_headers import HeaderBytes, header_bytes

if TYPE_CHECKING:  # imported when an id is resolved: a bundled plan loads neither
    from .hub_cache import HubCache

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@[\w./-]+)?")
LOCAL_SUFFIXES = (".yaml", ".yml", ".json", ".safetensors", ".gguf")
INDEX = "model.safetensors.index.json"
QUANT_FILES = ("quantize_config.json", "quant_config.json", "hf_quant_config.json")
OTHER_WEIGHTS = (".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack")
MAX_PARALLEL_HEADERS = 8


@dataclass(frozen=True)
class HubSource:
    """Where a Hub model came from and what reading it cost."""

    repo_id: str
    revision: str
    sha: str
    endpoint: str
    weights_read: str
    fetched: tuple[tuple[str, int], ...]  # (file, body bytes over the network this run)
    cached: tuple[tuple[str, int], ...]  # (file, bytes read from the cache instead)
    weight_files_bytes: int  # Σ sizes of the weight files the listing names (0: not stated)

    @property
    def label(self) -> str:
        return f"{self.endpoint}/{self.repo_id} at commit {self.sha}"

    @property
    def bytes_fetched(self) -> int:
        return sum(n for _, n in self.fetched)

    def as_dict(self) -> dict:
        return {"repo_id": self.repo_id, "revision": self.revision, "sha": self.sha,
                "endpoint": self.endpoint, "weights_read": self.weights_read,
                "bytes_fetched": self.bytes_fetched,
                "bytes_from_cache": sum(n for _, n in self.cached),
                "weight_files_bytes": self.weight_files_bytes,
                "files": [{"file": f, "bytes": n, "from": "network"} for f, n in self.fetched]
                + [{"file": f, "bytes": n, "from": "cache"} for f, n in self.cached]}


@dataclass(frozen=True)
class HubSnapshot:
    source: HubSource
    config_path: Path
    weights: HeaderBytes | None
    notes: tuple[str, ...]


def is_hub_id(ref: str) -> bool:
    """org/name or org/name@revision; paths (./x, /x, a/b/c) and model files are not ids."""
    return bool(HUB_ID.fullmatch(ref)) and not ref.lower().endswith(LOCAL_SUFFIXES)


def fetch_snapshot(ref: str) -> HubSnapshot:
    """Resolve `ref` to a commit and read its config and headers (from the cache when there)."""
    from huggingface_hub import constants
    from huggingface_hub.utils import disable_progress_bars

    from .hub_cache import HubCache
    from .hub_http import Fetcher, translated

    disable_progress_bars()  # a few kilobytes need no bar; stdout stays one JSON object
    repo_id, _, revision = ref.partition("@")
    revision = revision or "main"
    cache = HubCache(Path(constants.HF_HOME) / "servecap", repo_id)
    fetcher = Fetcher(repo_id)
    sha_cached = cache.sha_for(revision)
    with translated(ref, fetcher.endpoint, sha_cached is not None):
        listing = _listing(ref, revision, fetcher, cache, constants.is_offline_mode())
        sha = listing["sha"]
        sizes = {s["rfilename"]: s.get("size") or 0 for s in listing["siblings"]}
        if "config.json" not in sizes:
            raise SpecError("config.json", ref, "the repo has none: servecap plans "
                            "transformers checkpoints (config.json beside the weights)")
        config = fetcher.download("config.json", sha)
        quant = [fetcher.download(name, sha).name for name in QUANT_FILES if name in sizes]
        weights, read, files = _weights(ref, fetcher, cache, sha, sizes)
    source = HubSource(repo_id, revision, sha, fetcher.endpoint, read, _in_order(fetcher.fetched),
                       _in_order(fetcher.cached), sum(sizes[f] for f in files))
    return HubSnapshot(source, config, weights,
                       _notes(source, weights) + _quant_note(config, quant))


def _in_order(read: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """The order they were read in, shards (read in parallel) sorted by name."""
    shard = [item for item in read.items() if item[0].endswith(".safetensors")]
    return tuple([item for item in read.items() if item not in shard] + sorted(shard))


def _listing(ref: str, revision: str, fetcher, cache: HubCache, offline: bool) -> dict:
    if not offline:
        listing = fetcher.listing(revision)
        cache.remember(revision, listing)
        return listing
    sha = cache.sha_for(revision)
    listing = cache.listing(sha) if sha else None
    if listing is None:
        raise SpecError("model", ref, f"HF_HUB_OFFLINE=1 and it is not in the cache "
                        f"({cache.repo_dir}): run once with the network to cache its config "
                        "and headers")
    fetcher.cached["revision listing"] = len(json.dumps(listing))
    return listing


def _weights(ref: str, fetcher, cache: HubCache, sha: str,
             sizes: dict[str, int]) -> tuple[HeaderBytes | None, str, list[str]]:
    """Exact bytes from every shard's header; None (derived from config.json) when the repo
    holds no safetensors to read."""
    shards = (_index_shards(fetcher.download(INDEX, sha)) if INDEX in sizes else
              sorted(f for f in sizes if f.endswith(".safetensors") and "/" not in f))
    if unsafe := [f for f in shards if f.startswith("/") or ".." in f.split("/")]:
        raise SpecError("weight_map", unsafe[0], f"a file name inside the repo (in {ref})")
    if missing := [f for f in shards if f not in sizes]:
        raise SpecError("weight_map", missing[0], f"named in {INDEX} of {ref} but not in the repo")
    if not shards:
        others = sorted(f for f in sizes if f.lower().endswith(OTHER_WEIGHTS))
        what = ", ".join(others[:3]) + (" ..." if len(others) > 3 else "") if others else "none"
        return None, f"derived from config.json, not read (no safetensors; weight files: " \
                     f"{what})", others
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(MAX_PARALLEL_HEADERS, len(shards))) as pool:
        paths = list(pool.map(lambda f: _header_file(fetcher, cache, sha, f), shards))
    return header_bytes(paths), f"safetensors headers of {len(shards)} file(s)", shards


def _index_shards(index: Path) -> list[str]:
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SpecError("weight_map", str(index), f"unreadable index ({exc})") from None
    if not all(isinstance(f, str) for f in shards):
        raise SpecError("weight_map", str(index), "values must be file names")
    return shards


def _header_file(fetcher, cache: HubCache, sha: str, filename: str) -> Path:
    """The cached header (a valid safetensors file without tensor data), fetched if absent."""
    path = cache.header_path(sha, filename)
    if path.is_file():
        fetcher.cached[filename] = path.stat().st_size
        return path
    return cache.store_header(sha, filename, fetcher.header(filename, sha))


def _notes(source: HubSource, weights: HeaderBytes | None) -> tuple[str, ...]:
    notes = [f"read from the Hugging Face Hub: {source.repo_id} @ {source.revision} = commit "
             f"{source.sha} ({source.endpoint}); weights not downloaded (verify --weights needs "
             f"them on disk: hf download {source.repo_id} --revision {source.sha} "
             "--local-dir DIR)"]
    if weights is None:
        notes.append(f"weights {source.weights_read}")
    return tuple(notes)


def _quant_note(config: Path, quant_files: list[str]) -> tuple[str, ...]:
    """A separate quantization file of an older GPTQ/AWQ export is not read as the
    checkpoint's quantization (modelopt's hf_quant_config.json is, as vLLM reads it): say so
    rather than let the dtype labels pass for it."""
    try:
        stated = "quantization_config" in json.loads(config.read_text())
    except (OSError, ValueError, TypeError):  # the loader reports a bad config.json
        stated = True
    quant_files = [f for f in quant_files if f != "hf_quant_config.json"]  # read: modelopt's
    if not quant_files or stated:
        return ()
    return (f"{quant_files[0]} is in the repo but config.json has no quantization_config, "
            "the only place servecap reads quantization from: the dtype shown is the "
            "checkpoint's torch_dtype (weights read from headers are exact regardless)",)


def fetch_report(source: HubSource) -> list[str]:
    """What -v prints: every file read, its bytes and where from, against the weights' size."""
    lines = [f"hub: {source.repo_id} @ {source.revision} = {source.sha} from {source.endpoint}"]
    lines += [f"hub:   {f}: {n:,} bytes fetched" for f, n in source.fetched]
    lines += [f"hub:   {f}: {n:,} bytes from the cache" for f, n in source.cached]
    total = f"hub: {source.bytes_fetched:,} bytes fetched in all"
    if source.weight_files_bytes:
        total += (f", against {source.weight_files_bytes:,} bytes of weight files "
                  f"({source.bytes_fetched / source.weight_files_bytes:.2e} of them)")
    return lines + [total, f"hub: weights: {source.weights_read}"]
