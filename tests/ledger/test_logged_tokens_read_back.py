"""'GPU KV cache size: N tokens' printed by each release's rule (engines.logged_tokens) and read
back to blocks (engines.blocks_for_logged_tokens, reconcile's): the fewest blocks that print
the same count, for both rules vLLM has used (VllmRow.tokens_rule)."""

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from servecap.ledger.engines import (
    VLLM,
    Budget,
    EngineSpec,
    blocks_for_logged_tokens,
    logged_tokens,
)
from servecap.ledger.kv_blocks import max_concurrency
from servecap.ledger.vllm_versions import row


@pytest.mark.parametrize("release", ["0.19.0", "0.20.0", "0.33.0"])
@given(blocks=st.integers(1, 400_000), per_request=st.integers(1, 8_192),
       max_model_len=st.integers(16, 262_144), groups=st.integers(1, 3))
# CI's draw: vLLM's float product int(400,000 / 191 x 191) prints 399,999, one under the
# exact quotient, so the exact ceiling read back one block too few
@example(blocks=400_000, per_request=191, max_model_len=191, groups=1)
def test_a_token_count_reads_back_to_the_fewest_blocks_that_print_it(
        release, blocks, per_request, max_model_len, groups) -> None:
    engine = EngineSpec(name=VLLM, vllm_row=row(release))
    concurrency = max_concurrency(blocks, per_request, max_model_len, 16, engine.kv_formula)
    tokens = logged_tokens(engine, blocks, groups, 16, concurrency, max_model_len)
    budget = Budget(VLLM, 0, blocks, tokens, concurrency, 16, 1, per_request, "",
                    groups, tokens_rule=engine.vllm_row.tokens_rule)
    back = blocks_for_logged_tokens(budget, tokens, max_model_len)
    assert back <= blocks

    def printed(b: int) -> int:
        c = max_concurrency(b, per_request, max_model_len, 16, engine.kv_formula)
        return logged_tokens(engine, b, groups, 16, c, max_model_len)

    assert printed(back) == tokens  # prints the same count
    assert back == 0 or printed(back - 1) != tokens  # and is the fewest that do
