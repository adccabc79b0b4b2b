"""Achieved fractions of peak by op kind, and fixed overheads, per device: the default tables."""

import json
from dataclasses import dataclass, replace
from pathlib import Path

TABLES = Path(__file__).with_name("efficiency_tables.json")


@dataclass(frozen=True)
class Efficiency:
    """What a device achieves of its peaks: GEMMs, attention, memory bandwidth; the fixed time
    per step and per layer (launches, norms, sampling, scheduling); where the figures come
    from."""

    gemm_efficiency: float
    attention_efficiency: float
    bandwidth_efficiency: float
    step_overhead_s: float
    layer_overhead_s: float
    source: str
    gemm_efficiency_fp8: float | None = None
    moe_gemm_efficiency: float | None = None
    moe_layer_overhead_s: float = 0.0

    def apply(self, coef, weight_dtype: str = "bf16"):
        """The factors on top of coef; FP8 GEMMs take their own measured share where the
        table has one (they reach less of their doubled peak)."""
        gemm = self.gemm_efficiency_fp8 if weight_dtype in ("fp8", "fp4") \
            and self.gemm_efficiency_fp8 else self.gemm_efficiency
        return replace(coef, gemm_efficiency=gemm,
                       moe_gemm_efficiency=self.moe_gemm_efficiency or gemm,
                       moe_layer_overhead_s=self.moe_layer_overhead_s,
                       attention_efficiency=self.attention_efficiency,
                       bandwidth_efficiency=self.bandwidth_efficiency,
                       step_overhead_s=coef.step_overhead_s + self.step_overhead_s,
                       layer_overhead_s=self.layer_overhead_s, efficiency_source=self.source)


def load_tables() -> dict:
    """The shipped tables: {"source": ..., "devices": {name: {field: value}}}."""
    if not TABLES.exists():
        return {"source": "", "devices": {}}
    return json.loads(TABLES.read_text(encoding="utf-8"))


def for_device(name: str | None) -> Efficiency | None:
    """The measured table of a catalog device, or None (then the step model is the
    speed-of-light roofline)."""
    tables = load_tables()
    row = tables["devices"].get(name or "")
    if row is None:
        return None
    return Efficiency(row["gemm_efficiency"], row["attention_efficiency"],
                      row["bandwidth_efficiency"], row["step_overhead_s"],
                      row["layer_overhead_s"], f"{tables['source']} ({name})",
                      row.get("gemm_efficiency_fp8"), row.get("moe_gemm_efficiency"),
                      row.get("moe_layer_overhead_s", 0.0))
