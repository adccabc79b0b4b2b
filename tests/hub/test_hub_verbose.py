"""-v on simulate and verify prints plan -v's fetch report; verify says its weights come from
disk and gives the download command when a Hub id is all it has."""

import json

import pytest
from test_hub_plan import CONFIG, sharded_repo


def test_simulate_verbose_reports_what_was_fetched(hub, servecap, tmp_path):
    sha = hub.add("acme/tiny", sharded_repo())
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,100,5\n")
    result = servecap("simulate", "acme/tiny", "--device", "h100-80gb", "--trace", "t.csv",
                      "--json", "-v")
    assert result.returncode == 0, result.stderr
    fetched = sum(hub.served.values()) - hub.served.get("error", 0)
    assert f"hub: acme/tiny @ main = {sha} from {hub.url}" in result.stderr
    assert f"hub: {fetched:,} bytes fetched in all" in result.stderr
    assert json.loads(result.stdout)["policies"][0]["completed"] == 1  # stdout stays JSON


def test_simulate_without_verbose_says_nothing_of_the_hub(hub, servecap, tmp_path):
    hub.add("acme/tiny", sharded_repo())
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,100,5\n")
    result = servecap("simulate", "acme/tiny", "--device", "h100-80gb", "--trace", "t.csv",
                      "--json")
    assert result.returncode == 0 and "hub:" not in result.stderr


def test_verify_weights_given_a_hub_id_names_the_download(hub, servecap):
    result = servecap("verify", "tiny-llama", "--device", "cpu", "--weights",
                      "acme/tiny@v1.0")
    assert result.returncode == 2
    assert "verify needs the weights on disk" in result.stderr
    assert "hf download acme/tiny --revision v1.0 --local-dir tiny" in result.stderr
    assert "Traceback" not in result.stderr and not hub.requests  # refused before any fetch


def test_verify_of_a_hub_id_reports_and_notes_random_weights(hub, servecap):
    pytest.importorskip("torch")
    config = {**CONFIG, "vocab_size": 256, "torch_dtype": "float32"}
    sha = hub.add("acme/tiny", {"config.json": json.dumps(config).encode()})
    result = servecap("verify", "acme/tiny", "--device", "cpu", "--device-memory", "16MiB",
                      "--context", "256", "--concurrency", "4", "--runtime-peak", "12MiB",
                      "--no-probe", "--json", "-v", OMP_NUM_THREADS="1")
    assert result.returncode == 0, result.stderr
    assert f"hub: acme/tiny @ main = {sha}" in result.stderr
    assert "verify runs seeded random weights" in result.stderr
    assert f"hf download acme/tiny --revision {sha} --local-dir tiny" in result.stderr
    json.loads(result.stdout)
