"""Workload validation, draws and trace parsing."""

import statistics

import pytest
import yaml

from servecap.ledger.errors import SpecError
from servecap.sim.sampling import draw_requests
from servecap.sim.trace import parse_trace
from servecap.sim.workload import workload_from_dict

BASE = {"num_requests": 10, "arrivals": {"kind": "poisson", "rate_per_s": 2},
        "prompt_tokens": {"kind": "fixed", "value": 100},
        "output_tokens": {"kind": "fixed", "value": 10}}


@pytest.mark.parametrize("patch, field", [
    ({"arrivals": {"kind": "poisson", "rate_per_s": -1}}, "arrivals.rate_per_s"),
    ({"arrivals": {"kind": "gamma", "rate_per_s": 1, "cv": 0}}, "arrivals.cv"),
    ({"arrivals": {"kind": "fixed", "times_s": []}}, "arrivals.times_s"),
    ({"arrivals": {"kind": "zipf"}}, "arrivals.kind"),
    ({"prompt_tokens": {"kind": "empirical", "values": []}}, "prompt_tokens.values"),
    ({"prompt_tokens": {"kind": "uniform", "low": 9, "high": 3}}, "prompt_tokens.low"),
    ({"output_tokens": {"kind": "fixed", "value": 0}}, "output_tokens.value"),
    ({"num_requests": -5}, "num_requests"),
    ({"prefix_groups": [{"name": "a", "tokens": 10, "share": 0.7},
                        {"name": "b", "tokens": 10, "share": 0.7}]}, "prefix_groups"),
    ({"rate": 3}, "rate"),
    ({"tenants": [{"name": "a", "share": 0.5, "priority": -1}]}, "tenants[0].priority"),
    ({"arrivals": {"kind": "gamma", "rate_per_s": 2, "cv": 1e-300}}, "arrivals.cv"),
    ({"arrivals": {"kind": "gamma", "rate_per_s": 2, "cv": 1e10}}, "arrivals.cv"),
    ({"arrivals": {"kind": "poisson", "rate_per_s": float("nan")}}, "arrivals.rate_per_s"),
    ({"num_requests": 10**11}, "num_requests"),
])
def test_bad_workloads_name_the_field(patch, field):
    with pytest.raises(SpecError) as err:
        workload_from_dict(BASE | patch)
    assert err.value.field == field


def test_draws_are_deterministic_per_seed():
    doc = BASE | {"num_requests": 200, "prompt_tokens": {"kind": "lognormal", "median": 200,
                                                         "sigma": 1.0}}
    first = draw_requests(workload_from_dict(doc | {"seed": 3}))
    assert first == draw_requests(workload_from_dict(doc | {"seed": 3}))
    assert first != draw_requests(workload_from_dict(doc | {"seed": 4}))


def test_gamma_arrivals_keep_rate_and_cv_without_clipping():
    doc = BASE | {"num_requests": 40_000, "seed": 5,
                  "arrivals": {"kind": "gamma", "rate_per_s": 10, "cv": 3.0}}
    times = [r.arrival_s for r in draw_requests(workload_from_dict(doc))]
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(0.1, rel=0.05)
    assert statistics.pstdev(gaps) / mean == pytest.approx(3.0, rel=0.1)


def test_bursts_and_fixed_lists():
    bursts = workload_from_dict(BASE | {"num_requests": 6, "arrivals": {
        "kind": "bursts", "burst_size": 3, "interval_s": 2.0}})
    assert [r.arrival_s for r in draw_requests(bursts)] == [0, 0, 0, 2, 2, 2]
    fixed = workload_from_dict(BASE | {"arrivals": {"kind": "fixed", "times_s": [0.5, 0.1]}})
    assert [r.arrival_s for r in draw_requests(fixed)] == [0.1, 0.5]


def test_prefix_groups_prepend_their_tokens():
    doc = BASE | {"num_requests": 400, "prefix_groups": [
        {"name": "sys", "tokens": 64, "share": 0.5}]}
    reqs = draw_requests(workload_from_dict(doc))
    with_prefix = [r for r in reqs if r.prefix_group == "sys"]
    assert 150 < len(with_prefix) < 250
    assert all(r.prompt_tokens == 164 and r.prefix_tokens == 64 for r in with_prefix)


def test_empirical_lengths_come_from_the_values():
    doc = BASE | {"num_requests": 100, "output_tokens": {"kind": "empirical",
                                                        "values": [5, 50], "weights": [1, 0]}}
    assert {r.output_tokens for r in draw_requests(workload_from_dict(doc))} == {5}


def test_trace_parses_and_rejects_missing_columns():
    rows = parse_trace(["arrival_s,prompt_tokens,output_tokens,user",
                        "0.5,100,20,a", "0.1,50,10,b"])
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in rows] == [
        (0.1, 50, 10), (0.5, 100, 20)]
    with pytest.raises(SpecError, match="missing column"):
        parse_trace(["arrival_s,prompt_tokens", "0,1"])
    with pytest.raises(SpecError, match="line 2, output_tokens"):
        parse_trace(["arrival_s,prompt_tokens,output_tokens", "0,10,-3"])


def test_trace_reads_optional_tenant_and_priority():
    rows = parse_trace(["arrival_s,prompt_tokens,output_tokens,tenant,priority",
                        "0,10,5,web,0", "1,10,5,,"])
    assert [(r.tenant, r.priority) for r in rows] == [("web", 0), (None, 0)]
    with pytest.raises(SpecError, match="priority"):
        parse_trace(["arrival_s,prompt_tokens,output_tokens,priority", "0,10,5,-1"])


def test_exponent_numbers_read_as_yaml_1_2_does():
    """PyYAML reads `5e-1` as text (YAML 1.1); a workload file means the number."""
    doc = yaml.safe_load("arrivals: {kind: poisson, rate_per_s: 5e-1}")
    assert doc["arrivals"]["rate_per_s"] == "5e-1"
    assert workload_from_dict(BASE | doc).arrivals.rate_per_s == 0.5
    with pytest.raises(SpecError):
        workload_from_dict(BASE | {"arrivals": {"kind": "poisson", "rate_per_s": "fast"}})


@pytest.mark.parametrize("rate", [-1, 0, 0.0, 1e-7, 2e9, "fast", float("inf"), None])
def test_a_bounded_number_has_one_rule_and_one_message(rate):
    """rate_per_s: -1 was told 'a finite number >= 0', and 0, which that allows, was then
    refused with 'a number in [1e-06, 1e+09]': every bad rate now gets the range it must be
    in, and the lognormal median and sigma the same way."""
    with pytest.raises(SpecError) as err:
        workload_from_dict(BASE | {"arrivals": {"kind": "poisson", "rate_per_s": rate}})
    assert err.value.field == "arrivals.rate_per_s"
    assert err.value.allowed == "a number in [1e-06, 1e+09]"
    assert workload_from_dict(BASE | {"arrivals": {"kind": "poisson", "rate_per_s": 1e-6}}) \
        .arrivals.rate_per_s == 1e-6
    with pytest.raises(SpecError) as err:
        workload_from_dict(BASE | {"prompt_tokens": {"kind": "lognormal", "median": -3,
                                                     "sigma": 1}})
    assert err.value.field == "prompt_tokens.median" and err.value.allowed.startswith(
        "a number in [0.001, ")
