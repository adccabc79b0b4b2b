"""What the plan says matches what it computed: ceilings named by the request they count,
counts pluralised, declared values not called measured, a model directory's parameters."""

import json
import struct

import pytest

LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "vocab_size": 100}


def _text(result) -> str:
    return " ".join(result.stdout.split())


def test_a_mix_of_lengths_names_the_average_and_gives_the_longest_ceiling(run) -> None:
    args = ("plan", "qwen2.5-7b", "--device", "l40s-48gb", "--lengths", "512,2048,8192,8192,30000")
    mix = json.loads(run(*args, "--json").stdout)
    longest = json.loads(run("plan", "qwen2.5-7b", "--device", "l40s-48gb", "--context",
                             "30000", "--json").stdout)
    assert mix["memory_ceiling_longest_requests"] == longest["memory_ceiling_requests"]
    assert mix["memory_ceiling_longest_requests"] < mix["memory_ceiling_requests"]
    text = _text(run(*args))
    assert (f"{mix['memory_ceiling_requests']} requests of the mix's average (9,789 tokens), "
            f"{longest['memory_ceiling_requests']} requests of its longest (30,000 tokens)"
            in text)


def test_a_single_request_is_not_plural(run) -> None:
    text = _text(run("plan", "teaching-7b", "--lengths", "17"))
    assert "1 request," in text and "1 requests" not in text


def test_a_declared_runtime_peak_is_not_labelled_measured(run) -> None:
    text = _text(run("plan", "teaching-7b"))
    assert "declared peak" in text and "[measured]" not in text


def test_a_load_over_the_ceiling_says_by_how_much(run) -> None:
    result = run("plan", "teaching-7b", "--concurrency", "50")
    assert result.exit_code == 1 and "(declared 50 > ceiling 39)" in _text(result)


def test_a_model_directory_reports_its_parameter_count(run, tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    header = json.dumps({"w.weight": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}})
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header))
                                                 + header.encode() + b"\0" * 4)
    in_dir = json.loads(run("plan", tmp_path, "--device", "1GiB", "--context", "8",
                            "--json").stdout)
    alone = json.loads(run("plan", tmp_path / "config.json", "--device", "1GiB", "--context",
                           "8", "--json").stdout)
    assert in_dir["weights_bytes"] == 4  # the headers' bytes
    assert in_dir["num_parameters"] == 2  # counted from the headers' shapes
    assert alone["num_parameters"] > 0  # the architecture's, said beside the headers' count
    assert any(f"2 in the safetensors headers (planned), {alone['num_parameters']:,} from the "
               "architecture" in note for note in in_dir["notes"])


@pytest.mark.parametrize("device", ["40GiB", "h100-80gb"])
def test_plan_output_keeps_the_ceiling_contract(run, device) -> None:
    out = json.loads(run("plan", "teaching-7b", "--device", device, "--json").stdout)
    assert out["memory_ceiling_longest_requests"] is None
    assert isinstance(out["memory_ceiling_requests"], int)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3.2-1b-instruct",
                                   "llama-3.1-70b-instruct"])
def test_a_key_that_changes_nothing_gets_no_note(run, model) -> None:
    result = run("plan", model, "--device", "h100-80gb", "--context", "4096", "--json")
    assert not [n for n in json.loads(result.stdout)["notes"] if "mlp_bias" in n]


def test_the_default_safety_does_not_contradict_vllms_newer_default(run) -> None:
    """The default reserve read '10% of the device (vLLM gpu_memory_utilization=0.90)', while
    the releases from v0.20.0 default to 0.92 (--gpu-memory-utilization's help says so): the
    line now says whose headroom 10% is and where a release's own default is planned."""
    result = run("plan", "llama-3.1-8b", "--device", "24GiB", "--context", "8192", "--json")
    safety = next(line for line in json.loads(result.stdout)["lines"]
                  if line["key"] == "safety")
    assert safety["from"] == ("default: 10% of the device, vLLM's headroom at "
                              "gpu_memory_utilization 0.90 (--engine vllm plans its release's "
                              "own default)")
