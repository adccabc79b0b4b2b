"""`servecap plan`, `blocks`, `models`, `devices` driven through the real CLI."""

import json
import re

CONTRACT = ("weights_bytes", "weight_metadata_bytes", "runtime_peak_bytes", "safety_bytes",
            "kv_bytes_per_token", "kv_bytes_per_request", "kv_bytes_total", "device_bytes",
            "committed_bytes", "free_bytes", "memory_ceiling_requests")


def test_plan_json_contract_for_the_teaching_case(run) -> None:
    result = run("plan", "teaching-7b", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in CONTRACT:
        assert isinstance(data[key], int), key
    assert data["weights_bytes"] == 14_000_000_000
    assert data["kv_bytes_total"] == 8 * 2**30
    assert data["committed_bytes"] == 14_000_000_000 + 15 * 2**30
    assert data["memory_ceiling_requests"] == 39


def test_plan_table_names_lines_units_and_sources(run) -> None:
    result = run("plan", "teaching-7b")
    assert result.exit_code == 0
    out = result.stdout
    for text in ("weights", "KV cache", "safety reserve", "GiB (2^30)", "13.04", "28.04",
                 "declared", "39"):
        assert text in out, text


def test_flags_override_the_model_files_serving_defaults(run) -> None:
    result = run("plan", "teaching-7b", "--device", "80GiB", "--safety", "10%",
                 "--runtime-peak", "0", "--concurrency", "1", "--json")
    data = json.loads(result.stdout)
    assert data["safety_bytes"] == 8 * 2**30
    assert data["memory_ceiling_requests"] == 117


def test_seed004_mha_case_via_a_config_json(run, tmp_path) -> None:
    cfg = {"num_parameters": 7_000_000_000}
    # config.json has no parameter count field, so the MHA variant is a YAML.
    path = tmp_path / "mha.yaml"
    path.write_text("name: mha\nsource: seed 004\nnum_parameters: 7000000000\n"
                    "num_hidden_layers: 32\nnum_key_value_heads: 32\nhead_dim: 128\n")
    result = run("plan", path, "--device", "80GiB", "--safety", "10%", "--runtime-peak", "0",
                 "--context", "4096", "--json")
    data = json.loads(result.stdout)
    assert data["kv_bytes_per_request"] == 2 * 2**30 and cfg
    assert data["memory_ceiling_requests"] == 29


def test_does_not_fit_exits_1_with_ceiling_zero(run) -> None:
    result = run("plan", "llama-3.1-8b", "--device", "10GiB", "--context", "4096", "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["memory_ceiling_requests"] == 0 and data["free_bytes"] < 0


def test_lengths_replace_context_times_concurrency(run) -> None:
    result = run("plan", "teaching-7b", "--lengths", "17,33,65", "--json")
    data = json.loads(result.stdout)
    assert data["kv_bytes_total"] == 160 * 131_072
    assert data["paging"]["num_blocks"] == 10


def test_kv_dtype_fp8_halves_kv_per_token(run) -> None:
    result = run("plan", "llama-3.1-8b", "--device", "h100-80gb", "--context", "8192",
                 "--kv-dtype", "fp8", "--json")
    assert json.loads(result.stdout)["kv_bytes_per_token"] == 65_536


def test_int4_weights_have_a_visible_metadata_line(run) -> None:
    result = run("plan", "llama-3.1-8b", "--device", "24GiB", "--context", "4096",
                 "--weight-dtype", "int4", "--json")
    data = json.loads(result.stdout)
    assert data["weight_metadata_bytes"] > 0
    assert data["weights_bytes"] < 16_060_522_496 // 2


def test_blocks_reproduces_the_seed_paging_example(run) -> None:
    result = run("blocks", "17", "33", "65", "--block-size", "16", "--block-size", "4",
                 "--json")
    rows = json.loads(result.stdout)
    assert [(r["num_blocks"], r["slot_tokens"], r["unused_slot_tokens"]) for r in rows][0] == \
        (10, 160, 45)
    assert (rows[1]["slot_tokens"], rows[1]["block_table_entries"]) == (124, 31)


def test_blocks_with_a_shared_prefix_adds_up_stored_and_unused_to_the_slots(run) -> None:
    """17, 33, 65 tokens with 16 shared at B=16: 10 table entries, one shared block stored once
    -> 8 blocks, 128 slots. The slots hold 115 - 2 x 16 = 83 tokens, so 45 are unused; the
    logical 115 + 45 would be 160, the slots without sharing."""
    rows = json.loads(run("blocks", "17", "33", "65", "--shared-prefix", "16", "--block-size",
                          "16", "--block-size", "4", "--json").stdout)
    at16, at4 = rows
    assert (at16["logical_tokens"], at16["stored_tokens"], at16["num_blocks"],
            at16["slot_tokens"], at16["unused_slot_tokens"]) == (115, 83, 8, 128, 45)
    assert (at4["stored_tokens"], at4["slot_tokens"], at4["unused_slot_tokens"]) == (83, 92, 9)
    for row in rows:
        assert row["stored_tokens"] + row["unused_slot_tokens"] == row["slot_tokens"]
    text = run("blocks", "17", "33", "65", "--shared-prefix", "16").stdout
    assert "stored" in text and "stored + unused = slot tokens" in " ".join(text.split())


def test_models_lists_every_bundled_model_with_a_source(run) -> None:
    data = json.loads(run("models", "--json").stdout)
    names = {row["name"] for row in data}
    assert {"teaching-7b", "llama-3.1-8b", "deepseek-v3", "gpt-oss-20b"} <= names
    assert len(names) >= 11 and all(row["source"] for row in data)


def test_devices_states_usable_bytes_apart_from_the_nominal_capacity(run) -> None:
    data = json.loads(run("devices", "--json").stdout)
    h100 = next(d for d in data if d["name"] == "h100-80gb")
    assert h100["nominal_gb"] == 80 and h100["marketing_bytes"] == 80 * 10**9  # kept key
    assert 79 * 2**30 < h100["usable_bytes"] < 80 * 2**30  # the driver reports ~79.2 GiB
    table = run("devices").stdout
    assert "10^9 B as sold" not in table  # 80 x 10^9 B is less than CUDA's 85,028,896,768 B
    assert "nominal: the GB in the vendor's name, a label, not 10^9 B" in " ".join(
        table.split())
    assert re.search(r"h100-80gb +│ +80GB │ +79\.19 │", table)


def test_help_teaches_the_flags(run) -> None:
    out = run("plan", "--help").stdout
    for flag in ("--device", "--context", "--concurrency", "--runtime-peak", "--safety",
                 "--weight-dtype", "--kv-dtype", "--activation-dtype", "--block-size",
                 "--lengths", "--json"):
        assert flag in out, flag


def test_hybrid_model_table_shows_both_layer_kinds(run) -> None:
    result = run("plan", "gemma-2-9b-it", "--device", "40GiB", "--context", "8192",
                 "--concurrency", "4")
    assert "full-attention" in result.stdout and "sliding-window" in result.stdout
    assert "4,096-token" in result.stdout
    data = json.loads(run("plan", "gemma-2-9b-it", "--device", "40GiB", "--context", "8192",
                          "--concurrency", "4", "--max-num-batched-tokens", "2048",
                          "--json").stdout)
    kinds = data["kv_bytes_total_by_layer_kind"]
    # 512 blocks per full layer; a windowed one at its prefill peak holds ceil((4,095 + 2,048)
    # / 16) + 1 = 385 (vLLM's SlidingWindowSpec), once decoding 257 (the window + 1 block)
    assert kinds["full"] * 385 == kinds["sliding"] * 512
    assert sum(kinds.values()) == data["kv_bytes_total"]
    assert data["kv_decode_hold_bytes_total"] == kinds["full"] + kinds["full"] * 257 // 512


def test_a_context_past_max_position_embeddings_is_noted_as_vllm_would_refuse_it(run) -> None:
    over = run("plan", "llama-3.1-8b", "--device", "80GiB", "--context", "200000")
    assert "200,000 tokens per request exceed max_position_embeddings 131,072" in over.stdout
    within = run("plan", "llama-3.1-8b", "--device", "80GiB", "--context", "131072")
    assert "max_position_embeddings" not in within.stdout


def test_a_decimal_device_size_plans_its_bytes_and_says_so(run) -> None:
    """'--device 80GB' is 80 x 10^9 bytes (74.51 GiB), 7 % under the 80 GiB an H100 sold as
    80GB has: planned as typed, with a note giving the binary spelling."""
    decimal = json.loads(run("plan", "llama-3.1-8b", "--device", "80GB", "--json").stdout)
    binary = json.loads(run("plan", "llama-3.1-8b", "--device", "80GiB", "--json").stdout)
    assert decimal["device_bytes"] == 80 * 10**9 and binary["device_bytes"] == 80 * 2**30
    assert any("write 80GiB" in note for note in decimal["notes"])
    assert not any("decimal" in note for note in binary["notes"])
