"""`load` and `serve` with --save-scenario, then --scenario, against a real `servecap serve`:
the same requests are sent again (ids, lengths, planned arrivals; the timings are measured
anew), the same server starts again, and a flag beside the file wins (-v says so)."""

import csv
import json
import re
import urllib.request

import yaml
from serve_process import Server, servecap

WORKLOAD = ("name: small\nseed: 3\nnum_requests: 40\narrivals: {kind: poisson, rate_per_s: 5}\n"
            "prompt_tokens: {kind: uniform, low: 16, high: 64}\n"
            "output_tokens: {kind: uniform, low: 2, high: 8}\n")
PLANNED = ("model", "source", "mode", "offered", "not_sent", "completed", "failed",
           "output_token_mismatches")


def _load(url: str, records, *args, cwd=None) -> tuple[dict, list[dict], str]:
    run = servecap("load", url + "/v1", "--json", "--records", str(records), *map(str, args),
                   timeout=120, cwd=cwd)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout), list(csv.DictReader(records.open())), run.stderr


def _sent(rows: list[dict], turns: int = 1) -> list[tuple]:
    """What was planned per request: its id and lengths; the arrival of a conversation's
    first turn (a later turn is sent when the answer before it came back: measured)."""
    return [(r["request_id"], r["prompt_tokens"], r["output_tokens"],
             r["arrival_s"] if int(r["request_id"]) % turns == 0 else None) for r in rows]


def test_load_saved_then_run_from_the_file_sends_the_same_requests(server, tmp_path):
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    (tmp_path / "conf").mkdir()
    saved = tmp_path / "conf" / "l.yaml"
    first, rows, _ = _load(server.url, tmp_path / "a.csv", "--workload", "w.yaml",
                           "--rate", "20", "--num-requests", "6", "--turns", "2",
                           "--shared-prefix", "8", "--timeout", "90s", "--slo-ttft", "2s",
                           "--save-scenario", saved, cwd=tmp_path)
    data = yaml.safe_load(saved.read_text())
    assert data["workload"]["file"] == "../w.yaml"  # relative to the scenario file
    assert data["workload"]["rate"] == 20 and data["client"]["turns"] == 2
    assert data["client"]["timeout"] == "90s" and data["load"]["shared_prefix"] == 8
    assert data["server"]["served_model_name"] is None  # asked of the server each run
    assert "# in effect: tiny-llama" in saved.read_text()
    assert "127.0.0.1" not in saved.read_text()  # the server's address is the run's
    again, rows2, _ = _load(server.url, tmp_path / "b.csv", "--scenario", "l.yaml",
                            cwd=tmp_path / "conf")  # the file finds its workload from there
    assert again["source"] == "../w.yaml" and first["source"] == "w.yaml"
    planned = [k for k in PLANNED if k != "source"]
    assert {k: again[k] for k in planned} == {k: first[k] for k in planned}
    assert first["offered"] == 12 and first["slo_target_attainment"] == 0.9
    assert again["slo_meets"] is not None
    assert _sent(rows2, 2) == _sent(rows, 2) and len(rows) == 12
    assert int(rows[0]["prompt_tokens"]) > 8  # the shared prefix is in the first turn


def test_a_flag_beside_a_load_scenario_wins_and_verbose_says_so(server, tmp_path):
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    saved = tmp_path / "l.yaml"
    _, rows, _ = _load(server.url, tmp_path / "a.csv", "--workload", tmp_path / "w.yaml",
                       "--num-requests", "5", "--save-scenario", saved)
    report, fewer, err = _load(server.url, tmp_path / "b.csv", "--scenario", saved,
                               "--num-requests", "3", "-v")
    assert report["offered"] == 3 and len(fewer) == 3
    assert "workload.num_requests: --num-requests 3 (command line) over" in err
    assert "l.yaml's 5" in err
    _, direct, _ = _load(server.url, tmp_path / "c.csv", "--workload", tmp_path / "w.yaml",
                         "--num-requests", "3")
    assert _sent(fewer) == _sent(direct) and len(rows) == 5


def test_a_simulate_scenario_sends_its_fixed_shape(server, tmp_path):
    """One description for simulate and load: simulate's --input-len/--output-len/--rate
    scenario, sent to the server, is that many requests of those lengths."""
    saved = tmp_path / "s.yaml"
    sim = servecap("simulate", "tiny-llama", "--device", "h100-80gb", "--input-len", "24",
                   "--output-len", "6", "--rate", "20", "--num-requests", "5", "--json",
                   "--save-scenario", str(saved))
    assert sim.returncode == 0, sim.stderr
    report, rows, _ = _load(server.url, tmp_path / "a.csv", "--scenario", saved)
    assert report["offered"] == report["completed"] == 5
    assert {(r["prompt_tokens"], r["output_tokens"]) for r in rows} == {("24", "6")}
    assert report["output_token_mismatches"] == 0


def _startup(server: Server) -> str:
    server.stop()
    out = server.proc.stdout.read()
    line = next(x for x in out.splitlines() if x.startswith("servecap serve: "))
    return line.replace(str(server.port), "PORT")


def _models(server: Server) -> dict:
    with urllib.request.urlopen(server.url + "/v1/models", timeout=30) as resp:
        return json.loads(resp.read())["data"][0]


def _cache_config(server: Server) -> str:
    with urllib.request.urlopen(server.url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return re.search(r'block_size="\d+",num_gpu_blocks="\d+"', text).group(0)


def test_serve_saved_then_started_from_the_file_is_the_same_server(tmp_path):
    saved = tmp_path / "serve.yaml"
    first = Server("--max-model-len", "512", "--max-num-seqs", "3", "--num-kv-blocks", "40",
                   "--max-waiting", "7", "--served-model-name", "chat", "--block-size", "8",
                   "--body-timeout", "12", "--save-scenario", str(saved))
    models, cache = _models(first), _cache_config(first)
    line = _startup(first)
    data = yaml.safe_load(saved.read_text())
    assert data["server"] == {"served_model_name": "chat", "tokenizer": None,
                              "max_waiting": 7, "max_request_bytes": 4 * 2**20,
                              "header_timeout": 10.0, "body_timeout": 12.0,
                              "shutdown_timeout": 5.0}  # every default spelled out
    assert data["memory"]["num_gpu_blocks_override"] == 40
    assert data["scheduler"]["max_model_len"] == 512 and data["runtime"]["run_on"] == "cpu"
    assert "port" not in saved.read_text() and "api_key" not in saved.read_text()
    again = Server("--scenario", str(saved), "-v")  # serve_process names the model too
    try:
        assert _models(again) == models and models["id"] == "chat"
        assert models["max_model_len"] == 512
        assert _cache_config(again) == cache == 'block_size="8",num_gpu_blocks="40"'
    finally:
        assert _startup(again) == line
    assert "max_num_seqs 3; up to 7 waiting" in line
