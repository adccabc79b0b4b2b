"""The API server's serial time per request at a run's load (sim/frontend.py): per request and
per prompt token, stretched by the event loop's share spent streaming tokens."""

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servecap.sim.config import SchedulerConfig
from servecap.sim.frontend import MAX_LOAD, api_server, expected_tokens_per_s, with_api_server
from servecap.sim.roofline import Coefficients
from servecap.sim.sampling import Request

COEF = Coefficients(weights_bytes=16_000_000_000, kv_bytes_per_token=131_072,
                    flops_per_token=16_000_000_000, bandwidth_bytes_per_s=3.35e12,
                    flops_per_s=989e12, num_layers=32, frontend_s=0.005,
                    frontend_prompt_token_s=2e-6, frontend_output_token_s=2e-5)


def _poisson(rate: float, n: int = 200, prompt: int = 500, output: int = 100) -> list:
    return [Request(i, i / rate, prompt, output) for i in range(n)]


def test_the_unloaded_serial_time_is_per_request_plus_per_prompt_token() -> None:
    quiet = replace(COEF, frontend_output_token_s=0.0)
    server = api_server(quiet, _poisson(1.0), SchedulerConfig())
    assert server.base_s == pytest.approx(0.005 + 2e-6 * 500)
    assert server.serial_s == server.base_s and server.load == 0.0


def test_streaming_load_stretches_the_serial_time_as_an_mm1_background_load() -> None:
    server = api_server(COEF, _poisson(4.0), SchedulerConfig())
    assert server.tokens_per_s == pytest.approx(4.0 * 100, rel=0.02)  # offered, below capacity
    assert server.load == pytest.approx(2e-5 * server.tokens_per_s)
    assert server.serial_s == pytest.approx(server.base_s / (1 - server.load))


def test_a_burst_and_a_closed_loop_stream_at_the_engines_capacity() -> None:
    burst = [Request(i, 0.0, 500, 100) for i in range(200)]
    cap = expected_tokens_per_s(COEF, burst, SchedulerConfig())
    assert cap > 1000 and cap == expected_tokens_per_s(COEF, _poisson(1e6), SchedulerConfig())
    closed = expected_tokens_per_s(COEF, _poisson(1.0), SchedulerConfig(concurrency=4))
    assert closed < cap  # four in flight stream fewer tokens than 200


@given(st.floats(0.1, 1e4), st.floats(0, 1e-2))
def test_the_load_is_bounded_and_the_serial_time_grows_with_it(rate, per_token) -> None:
    coef = replace(COEF, frontend_output_token_s=per_token)
    server = api_server(coef, _poisson(rate), SchedulerConfig())
    assert 0 <= server.load <= MAX_LOAD
    assert server.base_s <= server.serial_s <= server.base_s / (1 - MAX_LOAD) + 1e-12


def test_the_first_tokens_way_out_is_stretched_by_the_same_load() -> None:
    """V1's latency outside the queue runs on the same event loop: at load 0 it is the
    fitted latency, under streaming load latency / (1 - load), never a fixed delay."""
    coef = replace(COEF, frontend_latency_s=0.02)
    quiet = api_server(replace(coef, frontend_output_token_s=0.0), _poisson(4.0),
                       SchedulerConfig())
    assert quiet.latency_s == 0.02
    loaded = api_server(coef, _poisson(4.0), SchedulerConfig())
    assert loaded.load > 0
    assert loaded.latency_s == pytest.approx(0.02 / (1 - loaded.load))
    busier = api_server(coef, _poisson(40.0), SchedulerConfig())
    assert busier.load > loaded.load and busier.latency_s > loaded.latency_s
    stretched, server = with_api_server(coef, _poisson(4.0), SchedulerConfig())
    assert stretched.frontend_latency_s == server.latency_s
    assert stretched.frontend_s == server.serial_s
