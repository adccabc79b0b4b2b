"""Each scheduler default is defined once, in ledger/serve.py, and every user of it agrees."""

import inspect
import re
from pathlib import Path

from servecap.cli.inputs import PlanFlags
from servecap.cli.sim_inputs import SimFlags
from servecap.cli.simulate_cmd import simulate
from servecap.cli.sweep_cmd import sweep
from servecap.ledger import serve
from servecap.ledger.engines import DEFAULT_BLOCK_TOKENS, VLLM
from servecap.sim.config import SchedulerConfig

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = {"max_num_seqs": serve.DEFAULT_MAX_NUM_SEQS,
            "max_num_batched_tokens": serve.DEFAULT_MAX_NUM_BATCHED_TOKENS,
            "watermark": serve.DEFAULT_WATERMARK}


def test_every_holder_of_a_scheduler_default_agrees_with_the_ledger():
    cfg, flags, plan = SchedulerConfig(), SimFlags(), PlanFlags()
    for name, value in DEFAULTS.items():
        assert getattr(cfg, name) == getattr(flags, name) == value
    assert cfg.block_size_tokens == flags.block_size == DEFAULT_BLOCK_TOKENS[VLLM] \
        == serve.DEFAULT_BLOCK_SIZE_TOKENS
    assert plan.max_num_seqs == serve.DEFAULT_MAX_NUM_SEQS
    for command in (simulate, sweep):
        params = inspect.signature(command).parameters
        for name, value in DEFAULTS.items():
            assert params[name].default == value, (command.__name__, name)


def test_no_second_literal_copy_in_cli_or_sim():
    """A default written out again as a number is a future disagreement."""
    pattern = re.compile(r"(max_num_seqs|max_num_batched_tokens|watermark|block_size\w*)"
                         r"\s*:[^=\n]*=\s*(256|8192|0\.01|16)\b")
    found = [f"{path.relative_to(ROOT)}: {m.group(0)}"
             for folder in ("cli", "sim") for path in (ROOT / folder).glob("*.py")
             for m in pattern.finditer(path.read_text())]
    assert found == []
