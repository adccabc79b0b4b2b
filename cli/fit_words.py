"""fit's candidates as a person reads them, shared by its JSON and its view."""

from servecap.ledger.ranks import Parallel
from servecap.ledger.units import plural


def candidate(question: str, value) -> str:
    """A candidate as a person reads it: '12,352 tokens', 'tp 2', 'tp 4 x pp 2 = 8'."""
    if isinstance(value, Parallel):
        return {"tp": f"tp {value.tensor_parallel_size}",
                "pp": f"pp {value.pipeline_parallel_size}"}.get(
            question, f"tp {value.tensor_parallel_size} x pp {value.pipeline_parallel_size} = "
                      f"{value.world_size}")
    if question == "concurrency":
        return plural(value, "request")
    return f"{value:,} tokens" if question == "context" else str(value)
