"""`servecap sweep` (the capacity under SLOs, bisected; where latency fails first) and
`servecap speculate` (where a draft model stops helping), through the CLI with real files."""

import json

from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.vllm_versions import NEWEST
from servecap.sim.sweep import sweep_rates

INLINE = ["--device", "80GiB", "--bandwidth", "2000GB/s", "--flops", "990TFLOPS"]


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_sweep_finds_capacity_and_stops_on_slo(small_workload):
    out = _invoke("sweep", "teaching-7b", *INLINE, "--workload", small_workload(),
                  "--slo-ttft", "300ms", "--slo-itl", "40ms", "--rates", "2,8,32,128,512",
                  "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    points = report["points"]
    assert report["stopped_on_slo"] and len(points) < 5
    assert points[0]["meets_slo"] and not points[-1]["meets_slo"]
    # bisected past the last passing rate, to its tolerance, and never to saturation
    assert points[-2]["rate_per_s"] <= report["capacity_rps"] < report["saturation_rps"]
    low, high = report["capacity_rps_ci"]  # high None: capped by saturation, not estimated
    assert low <= report["capacity_rps"] < report["saturation_rps"]
    assert (high is None) == (report["capacity_limited_by"] == "saturation")
    assert high is None or report["capacity_rps"] <= high < report["saturation_rps"]
    probes = sorted(p["rate_per_s"] for p in report["capacity_probes"])
    above = [r for r in probes if r > report["capacity_rps"]]
    assert not above or above[0] - report["capacity_rps"] <= \
        report["capacity_tolerance"] * report["capacity_rps"] or \
        report["capacity_limited_by"] == "saturation"


def test_a_capacity_capped_by_saturation_prints_its_high_end_as_unknown(small_workload):
    """SLOs every rate meets: the capacity is the last rate below saturation and its
    interval's high end was never estimated (null in --json, '?' on screen), where it used
    to read as zero width ('±0.00 (95 %: 19.60-19.60)')."""
    args = ("sweep", "teaching-7b", *INLINE, "--workload", small_workload(),
            "--slo-ttft", "100s", "--slo-itl", "10s", "--num-rates", "3")
    report = json.loads(_invoke(*args, "--json").stdout)
    assert report["capacity_limited_by"] == "saturation"
    low, high = report["capacity_rps_ci"]
    assert high is None and low <= report["capacity_rps"] < report["saturation_rps"]
    text = " ".join(_invoke(*args).stdout.split())
    assert f"capacity: {report['capacity_rps']:,.2f} ±? req/s" in text
    assert f"(95 %: {low:,.2f}-?;" in text and "±0.00" not in text


def test_sweep_stops_when_latency_fails_below_saturation(small_workload):
    # plain: the roofline's ITL grows with the batch; the default release overlaps its host
    # time with the GPU's (async scheduling), which keeps ITL flat up to saturation here
    out = _invoke("sweep", "teaching-7b", *INLINE, "--workload", small_workload(),
                  "--slo-itl", "8ms", "--num-rates", "8", "--engine", "plain", "--json")
    assert out.exit_code == 0, out.output
    points = json.loads(out.stdout)["points"]
    assert points[-1]["sustainable"] and points[-1]["slo_attainment"] < 0.9


def test_speculate_and_sweep_run_the_default_release_unless_plain(small_workload):
    """speculate: before 0.28 a draft model turns async scheduling off, so the release's host
    time is in every target step (one-stream decode slower than plain's); from 0.28 it stays
    on and the host's time hides under the GPU's; sweep: the release's scheduler is its
    default policy."""
    args = ("speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b-instruct", "--device",
            "h100-80gb", "--batches", "1,64", "--json")
    default, plain, before = (json.loads(_invoke(*args, *extra).stdout) for extra in
                              ([], ["--engine", "plain"], ["--engine", "vllm==0.27"]))
    assert default["engine"]["simulated"] == NEWEST.pin
    assert plain["engine"] == {"simulated": "plain", "given": "plain", "default": False,
                               "about": plain["engine"]["about"]}
    assert before["engine"]["host_gpu_overlap"] is False
    assert "draft model" in before["engine"]["overlap_why"]
    one, bare = before["rows"][0], plain["rows"][0]
    assert one["plain_tokens_per_s_per_seq"] < bare["plain_tokens_per_s_per_seq"]
    # the host's time per step is paid once per k + 1 verified tokens: speculation gains more
    assert one["speedup"] > bare["speedup"]
    newest = default["rows"][0]
    assert default["engine"]["host_gpu_overlap"] is (NEWEST.version >= (0, 28))
    assert newest["plain_tokens_per_s_per_seq"] <= bare["plain_tokens_per_s_per_seq"]
    sweep = ("sweep", "teaching-7b", *INLINE, "--workload", small_workload(),
             "--rates", "2", "--json")
    assert json.loads(_invoke(*sweep).stdout)["policy"] == "chunked-prefill"
    assert json.loads(_invoke(*sweep, "--engine", "plain").stdout)["policy"] == "continuous"


def test_speculate_finds_where_it_stops_helping():
    out = _invoke("speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b-instruct", "--device",
                  "h100-80gb", "--context", "512", "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["rows"][0]["speedup"] > 1.5
    assert report["break_even_batch"] is not None
    assert report["rows"][-1]["speedup"] < 1


def test_sweep_spans_synchronous_to_saturation():
    rates = sweep_rates(0.5, 31.3, 6)
    assert rates[0] == 0.5 and rates[-1] == 31.3 and len(rates) == 6
    assert rates == sorted(rates)
    assert sweep_rates(2.0, 1.0, 5) == [1.0]


def test_a_sweep_where_no_rate_meets_the_slo_exits_1_after_its_report(small_workload):
    """A script reading the exit code learns the deployment has no capacity at these SLOs, as
    plan's exit 1 says a load does not fit; the report is still printed, and bad input stays
    exit 2."""
    args = ("sweep", "teaching-7b", *INLINE, "--workload", small_workload(),
            "--slo-ttft", "1ms", "--rates", "1,2")
    out = _invoke(*args, "--json")
    assert out.exit_code == 1, out.output
    report = json.loads(out.stdout)
    assert report["capacity_rps"] == 0 and report["capacity_point"] is None
    assert not any(p["meets_slo"] for p in report["points"])
    assert "no swept rate met the SLO target" in out.stderr
    text = _invoke(*args)
    assert text.exit_code == 1 and "capacity:" in text.stdout
    assert _invoke(*args[:-2], "--rates", "0").exit_code == 2


def test_sweep_output_starts_with_its_report_not_a_progress_bars_blank_line(small_workload):
    """The progress bar wrote to stdout and, read through a pipe, left an empty first line
    before the report; it is on stderr now, and only on a terminal, as search's is."""
    out = _invoke("sweep", "teaching-7b", *INLINE, "--workload", small_workload(),
                  "--slo-ttft", "300ms", "--rates", "2,8")
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[0].startswith("teaching-7b on 80GiB"), out.stdout[:200]
    assert out.stderr == ""
