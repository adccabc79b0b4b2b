"""A multimodal model's encoder cache on a pasted vLLM line: its own lines (encoder_cache_bytes)
inside vLLM's profiled peak, the same from plan's flags, and bad input as one line, exit 2."""

import json
from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
QWEN = str(CONFIGS / "Qwen--Qwen3.6-35B-A3B" / "config.json")
LINE = ("--device", "h100-80gb", "--json", "--", "vllm", "serve", QWEN, "--max-model-len",
        "200000", "--max-num-seqs", "8", "--max-num-batched-tokens", "32768")


def _plan(run, *args):
    result = run("plan", *args)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_the_encoder_cache_comes_out_of_vllms_pool(run):
    base = _plan(run, *LINE)
    mm = _plan(run, *LINE, "--limit-mm-per-prompt", '{"image": 2, "video": 0}')
    line = next(item for item in mm["lines"] if item["key"] == "encoder_cache")
    # 2 images x 16,384 tokens x 2,048 wide x 2 B: the log's 'budget of 32768 tokens, and
    # profiled with 2 image items' (tests/fixtures/encoder)
    assert base["encoder_cache_bytes"] == 0
    assert mm["encoder_cache_bytes"] == line["bytes"] == 2 * 16384 * 2048 * 2
    assert "budget of 32768 tokens, and profiled with 2 image items" in " ".join(mm["notes"])
    held = mm["encoder_cache_bytes"] + mm["encoder_profile_bytes"]
    pool = {p["key"]: p["bytes"] for p in base["lines"]}
    pool_mm = {p["key"]: p["bytes"] for p in mm["lines"]}
    assert (pool["kv_cache"] + pool["kv_pool_spare"]) - (
        pool_mm["kv_cache"] + pool_mm["kv_pool_spare"]) >= held - 22_282_240  # one block


def test_plan_flags_match_the_pasted_line(run):
    pasted = _plan(run, *LINE, "--limit-mm-per-prompt", "image=2,video=0",
                   "--skip-mm-profiling")
    flags = _plan(run, QWEN, "--device", "h100-80gb", "--json", "--engine", "vllm",
                  "--context", "200000", "--max-num-batched-tokens", "32768",
                  "--max-num-seqs", "8", "--limit-mm-per-prompt", '{"image": 2, "video": 0}',
                  "--skip-mm-profiling")
    assert pasted["encoder_cache_bytes"] == flags["encoder_cache_bytes"] == 0
    assert any("--skip-mm-profiling" in n for n in pasted["notes"])
    assert pasted["kv_bytes_total"] == flags["kv_bytes_total"]


def test_max_pixels_shrinks_the_images_not_the_videos(run):
    """max_pixels is the image processor's: with videos allowed their 12,288 tokens lead."""
    kwargs = ("--mm-processor-kwargs", '{"max_pixels": 1003520}')
    video = _plan(run, *LINE, "--limit-mm-per-prompt", '{"image": 2}', *kwargs)
    assert video["encoder_cache_bytes"] == 2 * 12288 * 2048 * 2
    image = _plan(run, *LINE, "--limit-mm-per-prompt", '{"image": 2, "video": 0}', *kwargs)
    # 1003520 / 32^2 = 980 tokens; min(32768 // 980, 8 seqs x 2 a prompt) = 16 images
    assert image["encoder_cache_bytes"] == 16 * 980 * 2048 * 2


@pytest.mark.parametrize(("extra", "needle"), [
    (("--limit-mm-per-prompt", "{image: 2}"), "--limit-mm-per-prompt"),
    (("--limit-mm-per-prompt", "sound=1"), "a modality: image, video, audio"),
    (("--mm-processor-kwargs", "[1]"), "a JSON object"),
    (("--mm-encoder-tp-mode", "rows"), "weights or data"),
])
def test_bad_multimodal_flags_are_one_line_errors(run, extra, needle):
    result = run("plan", *LINE, *extra)
    assert result.exit_code == 2, result.output
    assert needle in result.output and "Traceback" not in result.output


def test_a_text_only_model_refuses_the_encoder_flags(run):
    result = run("plan", "llama-3.1-8b", "--device", "h100-80gb", "--limit-mm-per-prompt",
                 "image=1")
    assert result.exit_code == 2 and "no vision_config" in result.output


def test_image_size_flag(run):
    result = run("plan", QWEN, "--device", "h100-80gb", "--engine", "vllm", "--context",
                 "32768", "--image-size", "1024x1024,bad")
    assert result.exit_code == 2 and "WIDTHxHEIGHT" in result.output
    ok = _plan(run, QWEN, "--device", "h100-80gb", "--json", "--engine", "vllm", "--context",
               "32768", "--image-size", "1024x1024")
    assert any("a 1024x1024 image is 1,024 tokens" in n for n in ok["notes"])


def test_diff_shows_both_encoder_lines(run):
    result = run("diff", "--device", "h100-80gb", "--against", "vllm==0.22", "--json", "--",
                 *LINE[4:], "--limit-mm-per-prompt", '{"image": 2}')
    assert result.exit_code in (0, 1), result.output
    lines = {f["key"]: f for f in json.loads(result.stdout)["lines"]}
    assert lines["encoder_cache"]["a"] == lines["encoder_cache"]["b"] == 2 * 16384 * 2048 * 2
    assert "encoder_profile" in lines


def test_a_tower_field_missing_refuses_only_the_encoder_flags(run, tmp_path):
    data = json.loads((CONFIGS / "Qwen--Qwen3-VL-8B-Instruct" / "config.json").read_text())
    del data["vision_config"]["out_hidden_size"]
    (tmp_path / "config.json").write_text(json.dumps(data))
    text_only = _plan(run, str(tmp_path / "config.json"), "--device", "h100-80gb", "--json")
    assert any("vision_config.out_hidden_size" in n for n in text_only["notes"])
    refused = run("plan", str(tmp_path / "config.json"), "--device", "h100-80gb",
                  "--limit-mm-per-prompt", "image=1")
    assert refused.exit_code == 2 and "no vision_config" in refused.output


def test_vllms_default_profile_is_named_where_not_planned(run):
    """vLLM profiles a vision model's encoder even without multimodal flags: the plan says what
    that holds and how to plan it, and does not guess it silently."""
    notes = " ".join(_plan(run, *LINE)["notes"])
    assert "not planned: vLLM also profiles this model's vision encoder" in notes
    assert "2 image items, an encoder cache of 134,217,728 B" in notes
    assert '\'{"image": 0, "video": 0}\' serves text only' in notes
    plain = _plan(run, QWEN, "--device", "h100-80gb", "--context", "8192", "--json")
    assert not any("vision encoder" in n for n in plain["notes"])


def test_reconcile_reads_the_logged_budget_and_items(run):
    """The 0.22.0 log end to end: its own flags (32,768 batched tokens, 8 sequences, 200,000
    tokens) and vLLM's default limits give the budget and items it logged."""
    log = Path(__file__).resolve().parents[1] / "fixtures" / "encoder" / \
        "qwen3.6-35b-a3b_v0.22.0.log"
    result = run("reconcile", str(log), "--model", QWEN, "--device", "rtx-pro-6000-96gb",
                 "--weight-dtype", "int4", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["key"]: r for r in json.loads(result.stdout)["rows"]}
    assert (rows["encoder_budget_tokens"]["predicted"], rows["encoder_budget_tokens"]["logged"]) \
        == (32768, 32768)
    assert (rows["encoder_profiled_items"]["predicted"],
            rows["encoder_profiled_items"]["logged"]) == (2, 2)


def test_llama4_and_internvl_plan_their_encoder_cache(run):
    """Llama-4 Scout: 17 tiles x 144 tokens an image, 5,120 wide; at 8,192 batched tokens vLLM
    profiles 3 of them. InternVL3-1B: 13 tiles x 256 tokens an image; with videos allowed its
    video dummy (max_model_len less one image, 256 tokens a frame) leads."""
    scout = str(CONFIGS / "meta-llama--Llama-4-Scout-17B-16E-Instruct" / "config.json")
    plan = _plan(run, "--device", "h200-141gb", "--json", "--", "vllm", "serve", scout,
                 "--tensor-parallel-size", "2", "--max-model-len", "32768",
                 "--max-num-batched-tokens", "8192", "--limit-mm-per-prompt", '{"image": 4}')
    assert plan["encoder_cache_bytes"] == 3 * 2448 * 5120 * 2
    assert "budget of 8192 tokens, and profiled with 3 image items" in " ".join(plan["notes"])
    internvl = str(CONFIGS / "OpenGVLab--InternVL3-1B" / "config.json")
    base = ("--device", "h100-80gb", "--json", "--engine", "vllm", "--context", "16384",
            "--max-num-batched-tokens", "8192")
    images = _plan(run, internvl, *base, "--limit-mm-per-prompt", '{"image": 2, "video": 0}')
    assert images["encoder_cache_bytes"] == 2 * 3328 * 896 * 2
    video = _plan(run, internvl, *base, "--limit-mm-per-prompt", '{"image": 2}')
    # (16384 - 3328) // 256 = 51 frames of 256 tokens: one video fills the 13,056-token budget
    assert video["encoder_cache_bytes"] == 51 * 256 * 896 * 2
    sizes = _plan(run, internvl, *base, "--limit-mm-per-prompt", '{"image": 2, "video": 0}',
                  "--image-size", "896x448")
    assert any("a 896x448 image is 768 tokens" in n for n in sizes["notes"])


def _encoder_weights(plan: dict) -> int:
    return next(item["bytes"] for item in plan["lines"] if item["key"] == "encoder_weights")


def test_data_mode_keeps_a_supporting_tower_whole_on_every_rank(run):
    """mllama4.py sets supports_encoder_tp_data: with --mm-encoder-tp-mode data its linear
    layers are replicated, so each of 2 ranks holds the tower the single GPU does."""
    scout = str(CONFIGS / "meta-llama--Llama-4-Scout-17B-16E-Instruct" / "config.json")
    line = ("--device", "h200-141gb", "--json", "--", "vllm", "serve", scout,
            "--max-model-len", "16384", "--limit-mm-per-prompt", '{"image": 1}')
    one = _encoder_weights(_plan(run, *line))
    split = _encoder_weights(_plan(run, *line, "-tp", "2"))
    data = _encoder_weights(_plan(run, *line, "-tp", "2", "--mm-encoder-tp-mode", "data"))
    assert data == one > split


def test_data_mode_on_a_model_without_it_falls_back_to_weights_and_says_so(run):
    """gemma3_mm.py does not support it: vLLM warns and splits the tower as in weights mode."""
    gemma = str(CONFIGS / "google--gemma-3-27b-it" / "config.json")
    line = ("--device", "h100-80gb", "--json", "--", "vllm", "serve", gemma, "-tp", "2",
            "--max-model-len", "16384", "--limit-mm-per-prompt", '{"image": 1}')
    weights = _plan(run, *line)
    data = _plan(run, *line, "--mm-encoder-tp-mode", "data")
    assert _encoder_weights(data) == _encoder_weights(weights)
    assert data["encoder_cache_bytes"] == weights["encoder_cache_bytes"]
    assert any("does not support it, so vLLM falls back to weights" in n for n in data["notes"])
