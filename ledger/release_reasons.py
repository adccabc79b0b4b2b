"""Why a ledger figure moves between two vLLM releases: the rows crossed whose rules bear on it
(ledger/vllm_versions.py), each in words with its citation of vLLM's source at the tag."""

from dataclasses import dataclass

from .vllm_row import VllmRow

# The figures a rule moves: ledger line keys, and 'pool' / 'blocks_per_request' /
# 'kv_cache_tokens' / 'block_size' for the engine's own figures.
POOL_FIGURES = ("kv_pool_spare", "safety", "pool", "num_gpu_blocks", "kv_cache_tokens",
                "max_concurrency", "ceiling")
PAGING = ("kv_cache", "blocks_per_request", "max_concurrency", "kv_cache_tokens", "ceiling")
PROFILE = ("runtime_peak",) + POOL_FIGURES
GRAPHS = ("cuda_graphs",) + POOL_FIGURES
BLOCKS = ("block_size", "kv_pool_spare", "num_gpu_blocks") + PAGING


@dataclass(frozen=True)
class Rule:
    """One VllmRow field: the figures it moves, what it says in words, and when it bears on a
    deployment (a key of Context; '' always)."""

    figures: tuple[str, ...]
    words: str
    when: str = ""


RULES = {
    "default_gpu_memory_utilization": Rule(POOL_FIGURES, "default gpu_memory_utilization"),
    "formula": Rule(PROFILE + PAGING, "engine (V0 / V1)"),
    "profile": Rule(("non_torch",) + POOL_FIGURES, "how the profile pass is counted"),
    "graphs_subtracted": Rule(GRAPHS, "CUDA-graph estimate subtracted from the pool"),
    "tokens_rule": Rule(("kv_cache_tokens",), "how 'GPU KV cache size' is printed"),
    "sampler": Rule(PROFILE, "the V1 runner's top-k/top-p sampler", "v1_runner"),
    "moe_workspace_kept": Rule(PROFILE, "fused-MoE workspaces kept", "moe"),
    "mla": Rule(("kv_cache", "weights_resident") + PAGING + POOL_FIGURES, "MLA", "mla"),
    "block_sizes": Rule(("block_size",), "the block sizes taken"),
    "runner_rule": Rule(PROFILE + GRAPHS, "which models run on Model Runner V2",
                        "runner_changed"),
    "mrv2_archs": Rule(PROFILE + GRAPHS, "Model Runner V2's default architectures",
                       "runner_changed"),
    "mrv2_graphs_estimated": Rule(GRAPHS, "Model Runner V2 measures its CUDA graphs", "v2"),
    "mrv2_sampler_bytes": Rule(PROFILE, "Model Runner V2's profile sampler", "v2"),
    "window_in_flight": Rule(PAGING + POOL_FIGURES, "windows reserve the batches in flight",
                             "windows"),
    "batch_tier_160": Rule(PROFILE + GRAPHS, "16,384 batched tokens on >= 160 GiB GPUs",
                           "huge_gpu"),
    "graph_max_sm100": Rule(GRAPHS, "largest CUDA-graph capture on SM 10.x", "sm100"),
    "triton_min_batch": Rule(PROFILE, "Triton top-k/top-p batch sizes", "triton"),
    "mamba_all_chunk_aligned": Rule(BLOCKS, "mamba_cache_mode 'all' block alignment",
                                    "mamba_all"),
    "gdn_checkpoint_alignment": Rule(BLOCKS, "gated-DeltaNet prefill checkpoint pages",
                                     "gdn_hopper"),
    "startup_plan": Rule((), "VLLM_ENABLE_STARTUP_PLAN"),
    "compile_benchmarks_kernels": Rule(PROFILE, "a cold torch.compile benchmarks kernels in the "
                                       "profile (the embedding table's copy)", "cold_compile"),
}


@dataclass(frozen=True)
class Reason:
    """One release's rule change behind a figure: the row it starts at and what it changed."""

    tag: str
    changed: tuple[str, ...]  # the rules in words
    source: str

    def text(self) -> str:
        return f"{self.tag}: " + "; ".join(self.changed)


def reasons(rows: tuple[VllmRow, ...], a: VllmRow, b: VllmRow, figure: str,
            context: dict[str, bool], skip: tuple[str, ...] = ()) -> list[Reason]:
    """The rows between a and b (either order) whose changed rules move `figure` and bear on
    this deployment (context: which of Rule.when hold), oldest first; rules in `skip` are
    said another way (the model's move between runners)."""
    low, high = sorted((a, b), key=lambda r: r.version)
    out = []
    for before, row in zip(rows, rows[1:], strict=False):
        if not low.version < row.version <= high.version:
            continue
        changed = tuple(rule.words for name, rule in RULES.items()
                        if getattr(before, name) != getattr(row, name) and name not in skip
                        and figure in rule.figures and context.get(rule.when, True))
        if changed:
            out.append(Reason(row.tag, changed, row.source))
    return out


RUNNER_RULES = ("runner_rule", "mrv2_archs", "mrv2_graphs_estimated", "mrv2_sampler_bytes",
                "sampler")  # said once, as the model's move between runners
RUNNER_FIGURES = PROFILE + GRAPHS


def runner_moves(rows: tuple[VllmRow, ...], a: VllmRow, b: VllmRow,
                 runner_of) -> list[tuple[VllmRow, str]]:
    """The rows between a and b (oldest first) where this model changes model runner:
    (row, the runner from it); runner_of(row) gives the model's runner under a row."""
    low, high = sorted((a, b), key=lambda r: r.version)
    crossed = [r for r in rows if low.version <= r.version <= high.version]
    return [(row, runner_of(row)) for before, row in zip(crossed, crossed[1:], strict=False)
            if runner_of(before) != runner_of(row)]


def runner_words(row: VllmRow, runner: str, figure: str, v1_sampler: str = "") -> str:
    """What running on `runner` under `row` does to `figure`, in words (v1_sampler: the V1
    runner's sampler on the other side)."""
    if runner == "v1":
        return "the model moves back to the V1 model runner"
    if figure == "cuda_graphs":
        what = ("which measures its CUDA graphs" if row.mrv2_graphs_estimated else
                "whose profile estimates no CUDA graphs: none subtracted, captured after "
                "the pool")
    elif figure == "runtime_peak":
        what = (f"whose profile sampler holds {row.mrv2_sampler_bytes} B a logit (the V1 "
                f"runner's: {v1_sampler or row.sampler})")
    else:
        what = "with its own profile sampler and CUDA-graph rule"
    return f"the model moves to Model Runner V2, {what}"
