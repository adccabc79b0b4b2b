"""The server's time outside its engine step (load/server_terms.py) from /metrics means."""

import pytest

from servecap.load.server_terms import HOST, QUEUE, TTFT, server_terms

HISTOGRAMS = {TTFT: {"sum": 0.2, "count": 100}, QUEUE: {"sum": 0.05, "count": 100},
              HOST: {"sum": 0.3, "count": 1000}}


def test_the_api_server_time_is_the_client_ttft_less_the_servers_and_the_host_step():
    terms = server_terms([0.006, 0.008], HISTOGRAMS)  # client mean 7 ms, server 2 ms
    assert terms["coefficients"] == pytest.approx({"frontend_s": 0.0047, "cpu_step_s": 0.0003})
    # a first-token sample keeps its prefill step: frontend, host and the 0.5 ms queue off
    assert terms["first_token_offset_s"] == pytest.approx(0.0047 + 0.0003 + 0.0005)
    assert terms["decode_offset_s"] == pytest.approx(0.0003) and not terms["not_fitted"]


def test_without_the_host_histogram_only_the_api_server_time_is_fitted():
    terms = server_terms([0.007], {TTFT: HISTOGRAMS[TTFT]})
    assert terms["coefficients"] == pytest.approx({"frontend_s": 0.005})
    assert "step_overhead_s" in terms["not_fitted"]["cpu_step_s"]
    assert terms["decode_offset_s"] == 0 and terms["first_token_offset_s"] == pytest.approx(0.005)


def test_nothing_is_fitted_without_histograms_or_when_the_client_is_not_slower():
    bare = server_terms([0.007], None)
    assert bare["coefficients"] == {} and set(bare["not_fitted"]) == {"frontend_s", "cpu_step_s"}
    assert "--metrics" in bare["not_fitted"]["frontend_s"] and bare["first_token_offset_s"] == 0
    fast = server_terms([0.001], HISTOGRAMS)
    assert "frontend_s" not in fast["coefficients"]
    assert "not above" in fast["not_fitted"]["frontend_s"]
    assert fast["first_token_offset_s"] == 0
