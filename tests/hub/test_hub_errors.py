"""Every way reading a Hub id fails is one line on stderr, exit 2, saying what to do next."""

import json
import socket

import pytest

from servecap.model_configs.hub import is_hub_id

CONFIG = json.dumps({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
                     "max_position_embeddings": 256}).encode()


def one_line_error(result) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("servecap: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_gated_model_without_a_token_says_how_to_log_in(hub, servecap):
    hub.add("meta/gated", {"config.json": CONFIG}, gated=True)
    line = one_line_error(servecap("plan", "meta/gated", "--device", "1GiB"))
    assert "gated" in line and "huggingface-cli login" in line and "HF_TOKEN" in line
    assert f"{hub.url}/meta/gated" in line


def test_gated_model_with_a_token_lacking_access_says_so(hub, servecap):
    hub.add("meta/gated", {"config.json": CONFIG}, gated=True)
    line = one_line_error(servecap("plan", "meta/gated", "--device", "1GiB",
                                   HF_TOKEN="hf_no_access"))
    assert "this token has no access" in line


def test_gated_model_with_an_accepted_token_plans(hub, servecap):
    hub.add("meta/gated", {"config.json": CONFIG}, gated=True)
    result = servecap("plan", "meta/gated", "--device", "1GiB", "--json", HF_TOKEN=hub.token)
    assert result.returncode == 0, result.stderr


def test_unknown_repo_and_revision(hub, servecap):
    hub.add("acme/tiny", {"config.json": CONFIG})
    line = one_line_error(servecap("plan", "acme/nope", "--device", "1GiB"))
    assert "no such model on" in line and "no such local file or directory" in line
    line = one_line_error(servecap("plan", "acme/tiny@v9", "--device", "1GiB"))
    assert "revision = 'v9'" in line


def test_no_network_suggests_offline_mode_only_when_cached(hub, servecap):
    hub.add("acme/tiny", {"config.json": CONFIG})
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed: nothing listens
    line = one_line_error(servecap("plan", "acme/tiny", "--device", "1GiB", HF_ENDPOINT=dead))
    assert "cannot reach" in line and "not cached" in line
    assert servecap("plan", "acme/tiny", "--device", "1GiB").returncode == 0
    line = one_line_error(servecap("plan", "acme/tiny", "--device", "1GiB", HF_ENDPOINT=dead))
    assert "it is cached: run with HF_HUB_OFFLINE=1" in line


def test_offline_and_not_cached(hub, servecap):
    line = one_line_error(servecap("plan", "acme/tiny", "--device", "1GiB",
                                   HF_HUB_OFFLINE="1"))
    assert "HF_HUB_OFFLINE=1 and it is not in the cache" in line
    assert hub.requests == []


def test_repo_without_config_json(hub, servecap):
    hub.add("acme/weights-only", {"model.safetensors": b"\x02\0\0\0\0\0\0\0{}"})
    assert "config.json" in one_line_error(servecap("plan", "acme/weights-only", "--device",
                                                    "1GiB"))


@pytest.mark.parametrize("ref,expected", [
    ("Qwen/Qwen3-32B", True), ("org/model@a1b2c3d", True), ("org/m@refs/pr/1", True),
    ("teaching-7b", False), ("./org/model", False), ("/abs/path", False), ("a/b/c", False),
    ("models/x.yaml", False), ("dir/config.json", False), ("", False)])
def test_what_counts_as_a_hub_id(ref, expected):
    assert is_hub_id(ref) is expected


def test_an_index_naming_files_outside_the_repo_is_refused(hub, servecap, tmp_path):
    index = {"metadata": {}, "weight_map": {"w": "../../escape.safetensors"}}
    hub.add("acme/odd", {"config.json": CONFIG,
                         "model.safetensors.index.json": json.dumps(index).encode()})
    line = one_line_error(servecap("plan", "acme/odd", "--device", "1GiB"))
    assert "weight_map = '../../escape.safetensors'" in line
    assert not list(tmp_path.rglob("escape.safetensors"))
