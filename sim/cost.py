"""Dollars per million output tokens, self-hosted, and the break-even against an API price."""

import math

from servecap.ledger.errors import SpecError

SECONDS_PER_HOUR = 3600
TOKENS_PER_MILLION = 1_000_000


def cost_per_million(gpu_price_per_h: float, tokens_per_s: float,
                     utilization: float = 1.0) -> float:
    """$ / 1e6 tokens = price per hour / (tokens/s x 3600 x utilization / 1e6). Seed 004:
    $2/h at 1,000 tokens/s -> 2 / 3.6 = $0.56 at full load, 2 / 1.08 = $1.85 at 30 %."""
    _check(gpu_price_per_h, tokens_per_s, utilization)
    per_hour = tokens_per_s * SECONDS_PER_HOUR * utilization
    return gpu_price_per_h / (per_hour / TOKENS_PER_MILLION)


def api_usd_per_h(tokens_per_s: float, api_price_per_million: float,
                  input_tokens_per_s: float = 0.0, input_price_per_million: float = 0.0) -> float:
    """What the API bills for the deployment's full-load traffic, $ per hour = (output tok/s x
    output $/1e6 + input tok/s x input $/1e6) x 3600 / 1e6."""
    if not 0 < api_price_per_million < math.inf:
        raise SpecError("--api-price", api_price_per_million, "dollars per million, > 0")
    if not 0 <= input_price_per_million < math.inf:
        raise SpecError("--input-price", input_price_per_million,
                        "dollars per million input tokens, >= 0")
    per_s = tokens_per_s * api_price_per_million + input_tokens_per_s * input_price_per_million
    return per_s * SECONDS_PER_HOUR / TOKENS_PER_MILLION


def break_even_utilization(gpu_price_per_h: float, tokens_per_s: float,
                           api_price_per_million: float, input_tokens_per_s: float = 0.0,
                           input_price_per_million: float = 0.0) -> float:
    """The utilization at which self-hosting costs what the API bills for the same tokens:
    GPU $/h / API $/h at full load (without input pricing: full-load cost / API price).
    Above 1 means self-hosting never breaks even (an idle GPU still costs money)."""
    cost_per_million(gpu_price_per_h, tokens_per_s)  # checks the price and the rate
    return gpu_price_per_h / api_usd_per_h(tokens_per_s, api_price_per_million,
                                           input_tokens_per_s, input_price_per_million)


def cost_report(gpu_price_per_h: float, tokens_per_s: float, utilization: float,
                api_price_per_million: float | None, input_tokens_per_s: float | None = None,
                input_price_per_million: float | None = None) -> dict:
    """gpu_price_per_h: the whole deployment's $ per hour (every GPU)."""
    report = {
        "gpu_price_per_h": gpu_price_per_h, "output_tokens_per_s": tokens_per_s,
        "utilization": utilization,
        "usd_per_million_full_load": cost_per_million(gpu_price_per_h, tokens_per_s),
        "usd_per_million_at_utilization": cost_per_million(gpu_price_per_h, tokens_per_s,
                                                           utilization),
    }
    if input_tokens_per_s is not None:
        report["input_tokens_per_s"] = input_tokens_per_s
    if api_price_per_million is not None:
        inputs = (input_tokens_per_s or 0.0, input_price_per_million or 0.0)
        report["api_price_per_million"] = api_price_per_million
        report["api_usd_per_h_full_load"] = api_usd_per_h(tokens_per_s, api_price_per_million,
                                                          *inputs)
        report["break_even_utilization"] = break_even_utilization(
            gpu_price_per_h, tokens_per_s, api_price_per_million, *inputs)
    if input_price_per_million is not None:
        report["api_input_price_per_million"] = input_price_per_million
    return report


def reserved_report(reserved_price_per_h: float, report: dict) -> dict:
    """The same figures at a reserved (committed) price per hour, keys prefixed reserved_."""
    if not 0 < reserved_price_per_h < math.inf:
        raise SpecError("--reserved-price", reserved_price_per_h, "dollars per GPU-hour, > 0")
    tokens, share = report["output_tokens_per_s"], report["utilization"]
    out = {"reserved_usd_per_million_full_load": cost_per_million(reserved_price_per_h, tokens),
           "reserved_usd_per_million_at_utilization": cost_per_million(
               reserved_price_per_h, tokens, share)}
    if "api_usd_per_h_full_load" in report:
        out["reserved_break_even_utilization"] = \
            reserved_price_per_h / report["api_usd_per_h_full_load"]
    return out


def _check(price: float, tokens_per_s: float, utilization: float) -> None:
    if not 0 < price < math.inf:
        raise SpecError("--gpu-price", price, "dollars per GPU-hour, > 0")
    if not 0 < tokens_per_s < math.inf:
        raise SpecError("--tokens-per-s", tokens_per_s, "output tokens per second, finite "
                        "and > 0")
    if not 0 < utilization <= 1:
        pct = f" (for {utilization:g}% write {utilization / 100:g})" if 2 <= utilization <= 100 \
            else ""
        raise SpecError("--utilization", utilization, f"a share in (0, 1]{pct}")
