"""Achieved fractions of peak by op kind, and fixed overheads, for every catalog device: a
measured table where one exists (sim/efficiency_tables.json), else a stated derating rule
(DERATED: a measured device's shares applied to this device's own peaks, printed as such);
and, for MoE kernels, the table of the vLLM release that ran them where one was measured."""

import json
from dataclasses import dataclass, replace
from pathlib import Path

TABLES = Path(__file__).with_name("efficiency_tables.json")
# The rule for a catalog device no public kernel database measured: the shares of peak of
# the measured device nearest it (compute: the same GPU architecture; bandwidth: the same
# memory technology), applied to the device's own vendor peaks (ledger/devices.py). Each is
# an estimate, printed as one: e.g. a 350 W H100 PCIe runs the same Hopper kernels as the
# SXM part at its own lower clocks, which its 756.5 TFLOPS and 2.0 TB/s peaks already carry.
HOPPER, ADA, AMPERE = "h100-80gb", "l40s-48gb", "a100-80gb"
DERATED = {
    "h100-pcie-80gb": (HOPPER, HOPPER, "Hopper GH100 with HBM2e"),
    "h100-nvl-94gb": (HOPPER, HOPPER, "Hopper GH100 with HBM3"),
    "h20-96gb": (HOPPER, "h200-141gb", "Hopper with HBM3 at 4 TB/s"),
    "l4-24gb": (ADA, ADA, "Ada (AD104) with GDDR6"),
    "l40-48gb": (ADA, ADA, "the L40S's AD102 board with GDDR6"),
    "rtx-4090-24gb": (ADA, ADA, "Ada (AD102) with GDDR6X"),
    "rtx-6000-ada-48gb": (ADA, ADA, "Ada (AD102) with GDDR6"),
    "rtx-5090-32gb": ("rtx-pro-6000-96gb", "rtx-pro-6000-96gb",
                      "the RTX PRO 6000's GB202 with GDDR7, at this card's own GeForce "
                      "peaks"),
    "a100-pcie-40gb": (AMPERE, AMPERE, "the A100 SXM's GA100 with HBM2 (a 250 W card: "
                                       "sustained clocks below the SXM's are not in these "
                                       "shares)"),
    "a100-pcie-80gb": (AMPERE, AMPERE, "the A100 SXM's GA100 with HBM2e (a 300 W card: "
                                       "sustained clocks below the SXM's are not in these "
                                       "shares)"),
    "a10-24gb": (AMPERE, ADA, "Ampere (GA102) compute as the A100's; GDDR6 as the L40S's"),
    "a10g-24gb": (AMPERE, ADA, "Ampere (GA102) compute as the A100's; GDDR6 as the L40S's"),
    "a6000-48gb": (AMPERE, ADA, "Ampere (GA102) compute as the A100's; GDDR6 as the L40S's"),
    "a40-48gb": (AMPERE, ADA, "Ampere (GA102) compute as the A100's; GDDR6 as the L40S's"),
    "rtx-3090-24gb": (AMPERE, ADA, "Ampere (GA102) compute as the A100's; GDDR6X as the "
                                   "L40S's GDDR6"),
    "t4-16gb": (AMPERE, ADA, "Turing: no Turing measured; the A100's compute shares, GDDR6 "
                             "as the L40S's"),
    "mi300x-192gb": (HOPPER, HOPPER, "CDNA3 with HBM3: no AMD kernels measured; the H100's "
                                     "shares (vLLM's ROCm kernels are not these)"),
    "mi325x-256gb": (HOPPER, HOPPER, "CDNA3 with HBM3E: no AMD kernels measured; the H100's "
                                     "shares (vLLM's ROCm kernels are not these)"),
}
COMPUTE = ("gemm_efficiency", "attention_efficiency", "gemm_efficiency_fp8",
           "moe_gemm_efficiency", "moe_layer_overhead_s", "layer_overhead_s", "step_overhead_s",
           "moe_eras")


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


def table_for(name: str, tables: dict) -> tuple[dict, str] | None:
    """The device's row (measured, or derated by DERATED) and what it is, or None."""
    rows = tables["devices"]
    if name in rows:
        return rows[name], f"measured: {tables['source']} ({name})"
    if name not in DERATED:
        return None
    compute, memory, why = DERATED[name]
    row = {k: v for k, v in rows[compute].items() if k in COMPUTE}
    row["bandwidth_efficiency"] = rows[memory]["bandwidth_efficiency"]
    return row, (f"derated: no kernel measurement of {name}; {why}: {compute}'s compute "
                 f"shares and {memory}'s bandwidth share of peak applied to its own peaks "
                 "(rule: sim/efficiency.py DERATED)")


def for_device(name: str | None, version: tuple[int, ...] | None = None) -> Efficiency | None:
    """The table of a catalog device (measured or derated), its MoE kernels those of the
    simulated vLLM release where measured (moe_era), or None for a device outside the
    catalog (then the step model is the speed-of-light roofline, labelled so)."""
    tables = load_tables()
    found = table_for(name or "", tables)
    if found is None:
        return None
    row, source = found
    moe, moe_fixed, era = moe_era(row, version)
    return Efficiency(row["gemm_efficiency"], row["attention_efficiency"],
                      row["bandwidth_efficiency"], row["step_overhead_s"],
                      row["layer_overhead_s"], f"{source}; {era}",
                      row.get("gemm_efficiency_fp8"), moe, moe_fixed)


def moe_era(row: dict, version: tuple[int, ...] | None) -> tuple[float | None, float, str]:
    """(moe_gemm_efficiency, moe_layer_overhead_s, note): the MoE kernels measured at the
    newest release at or before `version` (None: the newest measured); before the oldest
    measured release, the oldest, said so; a device measured at one release only says that
    no other release's kernels were measured. Dense GEMMs, attention and FP8 are one
    release's measurement everywhere (the table's)."""
    eras = row.get("moe_eras") or []
    base = (row.get("moe_gemm_efficiency"), row.get("moe_layer_overhead_s", 0.0))
    if not eras:
        return (*base, "kernels as measured at one vLLM release (the table's): no "
                       "measurement of other releases' kernels")
    key = _key(version) if version else None
    older = [e for e in eras if key is None or _key(_parse(e["vllm"])) <= key]
    pick = older[-1] if older else eras[0]
    note = f"MoE kernels of vLLM {pick['vllm']}"
    if not older:
        note = (f"no measurement of vLLM {'.'.join(map(str, version))}'s MoE kernels: the "
                f"oldest measured, vLLM {pick['vllm']}'s")
    return pick["moe_gemm_efficiency"], pick.get("moe_layer_overhead_s", base[1]), \
        note + "; dense, attention and FP8 kernels as measured at one release"


def _parse(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(".")[:3])


def _key(version: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(version) + (0,) * (3 - len(version))
