"""The runtime refuses, by name, every cache kind it does not run yet: nothing runs wrong."""

from pathlib import Path

import pytest

from servecap.ledger.errors import SpecError
from servecap.model_configs import load_model

pytest.importorskip("torch")
from servecap.runtime.model import check_buildable  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


@pytest.mark.parametrize(("name", "named"), [
    ("Qwen--Qwen3-Next-80B-A3B-Thinking", "linear"),
    ("nvidia--Nemotron-H-56B-Base-8K", "mamba"),
    ("meta-llama--Llama-4-Scout-17B-16E-Instruct", "chunked"),
    ("deepseek-ai--DeepSeek-V3.2", "index_head_dim"),
    ("google--gemma-4-26B-A4B", "global_head_dim"),
])
def test_each_unrun_kind_is_refused_by_name(name: str, named: str) -> None:
    spec = load_model(str(CONFIGS / name / "config.json")).spec
    with pytest.raises(SpecError, match=named):
        check_buildable(spec)
