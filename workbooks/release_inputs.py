"""The Inputs cells a vLLM release and the GPU set (ledger/vllm_lines.pool_rules): what a windowed
layer holds beyond its window, and a hybrid's checkpoint alignment, pages and 'all' alignment."""

from servecap.ledger.engines import VLLM
from servecap.ledger.vllm_lines import PoolRules, pool_rules

from . import style
from .source import WorkbookSource

RELEASE_NAMES = ("window_in_flight_tokens", "state_checkpoint_alignment",
                 "state_checkpoint_pages", "mamba_all_chunk_aligned")  # read back where named


def window_row(src: WorkbookSource) -> tuple:
    """vLLM: the plan's in-flight tokens, a value; other engines: the batch, a formula."""
    value = src.resolved().plan.window_in_flight_tokens if src.engine.name == VLLM \
        else "=max_num_batched_tokens"
    return ("window_in_flight_tokens", value, style.TOKENS, "tokens",
            "T': tokens a windowed layer holds beyond W - 1: max_num_batched_tokens; vLLM its "
            "own batch, from 0.26 x its concurrent batches (2 with async scheduling, pp + 1 on "
            "Model Runner V2)")


def state_rule_rows(src: WorkbookSource) -> list[tuple]:
    rules = _rules(src)
    return [
        ("state_checkpoint_alignment", rules.checkpoint_alignment or 1, style.COUNT, "tokens",
         "align mode: the block a multiple of this too (vLLM 0.33, gated DeltaNet on Hopper: "
         "64; else 1)"),
        ("state_checkpoint_pages", 1 if rules.checkpoint_alignment else 0, style.COUNT,
         "pages", "align mode: prefill checkpoint pages a request holds beyond 2"),
        ("mamba_all_chunk_aligned", int(rules.all_chunk_aligned), style.COUNT, "1/0",
         "all mode: 1, the block a multiple of lcm(Mamba chunk, alignment) (vLLM to 0.31)")]


def _rules(src: WorkbookSource) -> PoolRules:
    if src.engine.name != VLLM:
        return PoolRules(0, 0, True, "")
    return pool_rules(src.engine, src.spec, src.resolved().plan.serve)
