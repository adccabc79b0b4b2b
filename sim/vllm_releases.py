"""What each vLLM release 0.8 - 0.33 does in scheduling, read from its source at the tag:
async scheduling (whether the host's work overlaps the GPU's), the CUDA-graph mode and its
largest captured batch, chunked prefill, and the batch limits it defaults to. Keyed by
release, not by ledger/vllm_versions.py's memory rows: a row there covers several releases
whose scheduling differs (0.13.0's row runs 0.13 - 0.17, async scheduling turned on at 0.14)."""

from dataclasses import dataclass

from servecap.ledger.vllm_batch import ARGS, LLM, SERVE, release_batch, rule_for

ABSENT, OPT_IN, DEFAULT_ON = "absent", "opt-in", "default"
PIECEWISE, FULL_AND_PIECEWISE = "PIECEWISE", "FULL_AND_PIECEWISE"
ASYNC = "vllm/config/scheduler.py SchedulerConfig.async_scheduling"


@dataclass(frozen=True)
class Scheduling:
    """One release's scheduling, from `version` up to the next row. async_scheduling: ABSENT
    (no such option), OPT_IN (--async-scheduling) or DEFAULT_ON (on unless a pooling model,
    an executor other than mp/uni, or what the row's flags say turn it off: off_under_pp,
    pipeline parallel; off_with_draft, a separate draft model). graph_max: the
    largest captured CUDA-graph batch (min(max_num_seqs x 2, this)); graph_max_blackwell on a
    data-center Blackwell GPU. The batch limits a release defaults to are ledger/vllm_batch.py's
    (the memory plan's profile reads the same rule). V1 chunks every prefill (no flag turns it
    off). source: the files read at `tag`."""

    version: tuple[int, ...]
    tag: str
    async_scheduling: str
    cudagraph_mode: str
    source: str
    graph_max: int = 512
    graph_max_blackwell: int = 512
    off_under_pp: bool = False
    off_with_draft: bool = False

    @property
    def async_source(self) -> str:
        """Where the release's async-scheduling default is set, at its tag."""
        return {ABSENT: "no async_scheduling option in its SchedulerConfig (vllm/config.py)",
                OPT_IN: "SchedulerConfig.async_scheduling defaults to False (vllm/config.py; "
                        "vllm/config/scheduler.py from v0.10.1)",
                DEFAULT_ON: "SchedulerConfig.async_scheduling defaults to None and "
                            "VllmConfig.__post_init__ sets it True (vllm/config/scheduler.py, "
                            "vllm/config/vllm.py)"}[self.async_scheduling]


CAPTURE = "capture sizes [1, 2, 4] + multiples of 8 up to 512, at most max_num_batched_tokens"
RELEASES: tuple[Scheduling, ...] = (
    Scheduling((0, 8, 0), "v0.8.0", ABSENT, PIECEWISE,
               f"no async scheduling option (vllm/config.py SchedulerConfig); V1 piecewise "
               f"CUDA graphs (vllm/config.py VllmConfig, {CAPTURE})"),
    Scheduling((0, 9, 0), "v0.9.0", ABSENT, PIECEWISE,
               "no async scheduling option; piecewise graphs (vllm/config.py CompilationConfig "
               "full_cuda_graph False)"),
    Scheduling((0, 10, 0), "v0.10.0", OPT_IN, PIECEWISE,
               "vllm/config.py SchedulerConfig async_scheduling: bool = False ('EXPERIMENTAL'), "
               "--async-scheduling to turn it on; piecewise graphs (full_cuda_graph False)"),
    Scheduling((0, 10, 1), "v0.10.1", OPT_IN, PIECEWISE,
               f"{ASYNC} = False; vllm/config/__init__.py VllmConfig.__post_init__: "
               "cudagraph_mode None -> PIECEWISE under V1 piecewise compilation"),
    Scheduling((0, 11, 0), "v0.11.0", OPT_IN, FULL_AND_PIECEWISE,
               f"{ASYNC} = False; vllm/config/__init__.py VllmConfig.__post_init__: "
               "cudagraph_mode None -> FULL_AND_PIECEWISE ('default to full and piecewise for "
               "most models': full graphs for decode batches, piecewise for mixed ones)"),
    Scheduling((0, 14, 0), "v0.14.0", DEFAULT_ON, FULL_AND_PIECEWISE,
               f"{ASYNC} = Field(default=None); vllm/config/vllm.py VllmConfig.__post_init__: "
               "None -> True ('Enable async scheduling unless there is an incompatible "
               "option': pipeline_parallel_size > 1, a draft whose method is not EAGLE/MTP/"
               "n-gram, an executor other than mp/uni/external_launcher) (vLLM PR #27614); "
               "v0.13.0's field was `async_scheduling: bool = False`. cudagraph_mode "
               "FULL_AND_PIECEWISE (vllm/config/vllm.py optimization-level defaults)",
               off_under_pp=True, off_with_draft=True),
    Scheduling((0, 15, 0), "v0.15.0", DEFAULT_ON, FULL_AND_PIECEWISE,
               f"{ASYNC} = None; vllm/config/vllm.py VllmConfig.__post_init__'s default "
               "branch no longer tests pipeline_parallel_size; a 'draft_model' method still "
               "turns it off ('Async scheduling not supported with %s-based speculative "
               "decoding')", off_with_draft=True),
    Scheduling((0, 28, 0), "v0.28.0", DEFAULT_ON, FULL_AND_PIECEWISE,
               f"{ASYNC} = None (on by default, as v0.14.0); vllm/config/vllm.py "
               "_set_cudagraph_sizes: default_max_graph_size 1024 on data-center Blackwell; "
               "VllmConfig.__post_init__ keeps async scheduling on with method 'draft_model'",
               graph_max_blackwell=1024),
)
NEWEST_READ = (0, 33, 0)  # the newest release whose source the rows were checked against
BLACKWELL = ("b200", "b300", "gb200", "gb300")


def scheduling_for(version: tuple[int, ...]) -> Scheduling | None:
    """The row covering `version` (the last at or before it), None before V1's first (0.8:
    V0 releases, which ledger/vllm_versions.py's rows and sim/vllm_engine.py price)."""
    key = tuple(version) + (0,) * (3 - len(version))
    rows = [r for r in RELEASES if r.version <= key]
    return rows[-1] if rows else None


@dataclass(frozen=True)
class Overlap:
    """Whether the host's scheduling work overlaps the GPU's, and why (the release's default
    with its source, or the flag that set it)."""

    overlap: bool
    why: str


def overlap(release: Scheduling, asked: bool | None, pipeline_parallel_size: int = 1,
            draft_model: bool = False) -> Overlap:
    """--async-scheduling / --no-async-scheduling decide where given (ABSENT releases have no
    such option: the caller refuses it); else the release's default, which pipeline parallel
    (off_under_pp) or a separate draft model (off_with_draft) turn off where the release
    would (vllm/config/vllm.py VllmConfig.__post_init__ at its tag)."""
    if asked is not None:
        return Overlap(asked, f"{'--async-scheduling' if asked else '--no-async-scheduling'} "
                       f"given ({release.tag}: {_words(release)})")
    default = release.async_scheduling == DEFAULT_ON
    turned_off = [why for why, hit in (
        ("pipeline parallel", release.off_under_pp and pipeline_parallel_size > 1),
        ("a draft model's speculative decoding", release.off_with_draft and draft_model))
        if hit and default]
    why = _words(release) + "".join(f"; off under {w}" for w in turned_off)
    return Overlap(default and not turned_off, f"{release.tag} default: {why}; "
                   f"{release.async_source} at {release.tag}")


def _words(release: Scheduling) -> str:
    return {ABSENT: "no async scheduling in this release",
            OPT_IN: "async scheduling off unless --async-scheduling",
            DEFAULT_ON: "async scheduling on by default"}[release.async_scheduling]


@dataclass(frozen=True)
class BatchLimits:
    """max_num_batched_tokens and max_num_seqs a release defaults to, and why."""

    tokens: int
    seqs: int
    why: str


def batch_limits(version: tuple[int, ...], device_bytes: int, device_label: str,
                 offline: bool = False) -> BatchLimits:
    """The release's defaults for this device and entrypoint (offline: the LLM class, else
    the OpenAI server): ledger/vllm_batch.py release_batch, the rule the plan's profile reads."""
    found = release_batch(version, device_bytes, device_label, LLM if offline else SERVE)
    entry = "LLM class" if offline else "OpenAI server"
    return BatchLimits(found.tokens, found.seqs, f"the {entry} default from {found.rule.tag} "
                       f"on {found.size} ({ARGS})")


def graph_max(release: Scheduling, device_label: str, max_num_seqs: int) -> int:
    """The largest CUDA-graph batch: min(max_num_seqs x 2, 512; 1024 on data-center
    Blackwell from v0.28)."""
    name = device_label.lower()
    cap = release.graph_max_blackwell if any(b in name for b in BLACKWELL) \
        else release.graph_max
    return min(max_num_seqs * 2, cap)


def table_rows() -> list[dict]:
    """Every row as a dict, for --json and the docs' table."""
    return [{"from": ".".join(map(str, r.version)), "tag": r.tag,
             "async_scheduling": r.async_scheduling, "cudagraph_mode": r.cudagraph_mode,
             "batch_defaults": rule_for(r.version).kind, "chunked_prefill": "always (V1)",
             "source": r.source} for r in RELEASES]
