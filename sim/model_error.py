"""Prediction intervals: the simulator's sampling interval of a figure (the *_ci keys, from
the run's own batches) widened by the model's own error, which leave-one-source-out
cross-validation on the published vLLM runs measured (sim/engine_fit.json model_error: the
95 % range of ln(predicted / measured) per family, out of sample, kept as log_q025 / log_q975:
the median -/+ 2.5 robust standard deviations, bench/vllm_fit.py K_ROBUST).

    low = sampling low x e^-q975,  high = sampling high x e^-q025

(a measured value m = predicted x e^-r with r in [q025, q975] 95 % of the time out of sample;
the sampling interval stands for the predicted value's own spread). Figures without a
sampling interval take the estimate itself. The error was measured on medians, means and
throughputs, so only those get a prediction interval; tails (p99) do not."""

import json
import math

from .vllm_engine import FIT_FILE

# simulate's figure -> the family of the published comparisons that measured its error
FIGURES = {"ttft_ms": "ttft", "tpot_ms": "tpot", "itl_ms": "tpot", "e2e_ms": "tpot",
           "achieved_rps": "throughput", "output_tokens_per_s": "throughput"}
STATS = ("p50", "mean")


def load_model_error() -> dict:
    """The fitted file's model_error block and what it was measured on."""
    data = json.loads(FIT_FILE.read_text(encoding="utf-8")) if FIT_FILE.exists() else {}
    error = data.get("model_error") or {}
    oos = data.get("summary_out_of_sample") or {}
    return {"families": error, "date": data.get("date"), "runs": oos.get("runs"),
            "sources": oos.get("sources")}


MODEL_ERROR = load_model_error()


def prediction_interval(entry: dict, engine: str | None) -> dict:
    """The policy entry's 95 % prediction intervals, or why there are none (the model's error
    was measured with a vLLM release's engine terms: plain runs have no estimate)."""
    error = MODEL_ERROR["families"]
    if engine is None or not engine.startswith("vllm") or not error:
        return {"confidence": 0.95, "available": False,
                "why": "the model's error was measured for --engine vllm==X runs only "
                       "(bench/vllm_latency.py --leave-one-source-out); none for plain"}
    out = {"confidence": 0.95, "available": True,
           "model_error": error,
           "source": f"out-of-sample errors of bench/vllm_latency.py --leave-one-source-out "
                     f"over {MODEL_ERROR['runs']} published runs from "
                     f"{MODEL_ERROR['sources']} sources ({MODEL_ERROR['date']}; "
                     "sim/engine_fit.json), combined with the sampling interval"}
    for key, family in FIGURES.items():
        if family in error and entry.get(key) is not None:
            out[key] = _widen(entry[key], entry.get(f"{key}_ci"), error[family])
    return out


def _widen(value, ci, fam: dict):
    """[low, high] of a scalar, or {stat: [low, high]} of a latency's median and mean."""
    lo_f, hi_f = math.exp(-fam["log_q975"]), math.exp(-fam["log_q025"])
    if not isinstance(value, dict):
        low, high = ci if isinstance(ci, list | tuple) and None not in ci else (value, value)
        return [round(low * lo_f, 6), round(high * hi_f, 6)]
    out = {}
    for stat in STATS:
        if value.get(stat) is None:
            continue
        pair = (ci or {}).get(stat) if isinstance(ci, dict) else None
        low, high = pair if pair and None not in pair else (value[stat], value[stat])
        out[stat] = [round(low * lo_f, 3), round(high * hi_f, 3)]
    return out
