"""GGUF files planned from their header alone (llama.cpp users' question): the architecture
from the metadata, each tensor's bytes from its ggml type's block size, never a tensor read."""

import json

import pytest
from checkpoint_files import GGUF_SIZES, write_gguf

Q4_K, Q6_K, F32, Q8_0 = 12, 14, 0, 8
H, INTER, LAYERS, VOCAB, HEADS, KV = 512, 1536, 2, 1024, 8, 2


def llama_gguf(path, arch: str = "llama", output: bool = True) -> int:
    """A Llama-shaped file as llama.cpp's quantize writes Q4_K_M: attention and MLP in Q4_K,
    ffn_down and output in Q6_K, norms in F32 (ggml shapes list ne0 = the input dim first)."""
    meta = {"general.architecture": arch, "general.name": "tiny",
            f"{arch}.block_count": LAYERS, f"{arch}.embedding_length": H,
            f"{arch}.feed_forward_length": INTER, f"{arch}.context_length": 4096,
            f"{arch}.attention.head_count": HEADS, f"{arch}.attention.head_count_kv": KV,
            "tokenizer.ggml.tokens": [f"t{i}" for i in range(8)]}
    d = H // HEADS
    tensors = [("token_embd.weight", (H, VOCAB), Q4_K), ("output_norm.weight", (H,), F32)]
    if output:
        tensors.append(("output.weight", (H, VOCAB), Q6_K))
    for n in range(LAYERS):
        tensors += [(f"blk.{n}.attn_q.weight", (H, HEADS * d), Q4_K),
                    (f"blk.{n}.attn_k.weight", (H, KV * d), Q4_K),
                    (f"blk.{n}.attn_v.weight", (H, KV * d), Q6_K),
                    (f"blk.{n}.attn_output.weight", (HEADS * d, H), Q4_K),
                    (f"blk.{n}.ffn_gate.weight", (H, INTER), Q4_K),
                    (f"blk.{n}.ffn_up.weight", (H, INTER), Q4_K),
                    (f"blk.{n}.ffn_down.weight", (INTER, H), Q6_K),
                    (f"blk.{n}.attn_norm.weight", (H,), F32),
                    (f"blk.{n}.ffn_norm.weight", (H,), F32)]
    write_gguf(path, meta, tensors)
    total = 0
    for _, shape, kind in tensors:
        block, size = GGUF_SIZES[kind]
        numel = 1
        for dim in shape:
            numel *= dim
        total += numel // block * size
    return total


def test_a_gguf_plans_from_its_header_with_each_ggml_types_bytes(run, tmp_path) -> None:
    path = tmp_path / "tiny-Q4_K_M.gguf"
    expected = llama_gguf(path)
    out = json.loads(run("plan", path, "--device", "24GiB", "--context", "4096",
                         "--json").stdout)
    assert out["weights_bytes"] == expected and out["weight_metadata_bytes"] == 0
    assert out["kv_bytes_per_token"] == 2 * LAYERS * KV * (H // HEADS) * 2
    formats = {f["format"]: f for f in out["checkpoint_formats"]["formats"]}
    assert set(formats) == {"Q4_K", "Q6_K", "F32"}
    assert formats["Q6_K"]["value_bytes"] == (LAYERS * (KV * H // HEADS * H + INTER * H)
                                              + H * VOCAB) // 256 * 210
    assert out["checkpoint_formats"]["producer"] == "gguf"
    assert out["lines"][0]["from"].startswith("GGUF header: ")


def test_vllm_reads_gguf_until_0_23(run, tmp_path) -> None:
    path = tmp_path / "tiny.gguf"
    llama_gguf(path, output=False)  # tied: llama.cpp reuses token_embd as the output
    old = json.loads(run("plan", path, "--device", "h100-80gb", "--engine", "vllm==0.23",
                         "--context", "4096", "--json").stdout)
    rows = {r["generation"]: r for r in old["checkpoint_formats"]["resident_by_generation"]}
    assert rows["hopper"]["runs"] and "GGUF blocks kept as stored" in \
        rows["hopper"]["kernel_or_refusal"]
    new = run("plan", path, "--device", "h100-80gb", "--engine", "vllm==0.24", "--context",
              "4096")
    assert new.exit_code == 2 and "reads no GGUF files" in new.stderr


@pytest.mark.parametrize(("content", "needle"), [
    (b"NOPE" + b"\0" * 40, "no GGUF magic"), (b"GGUF\x07\0\0\0" + b"\0" * 16, "version 7")])
def test_a_file_that_is_not_gguf_is_one_line(run, tmp_path, content, needle) -> None:
    path = tmp_path / "broken.gguf"
    path.write_bytes(content)
    result = run("plan", path, "--device", "24GiB")
    assert result.exit_code == 2 and needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_architecture_it_does_not_map_is_refused_by_name(run, tmp_path) -> None:
    path = tmp_path / "other.gguf"
    llama_gguf(path, arch="rwkv7")
    result = run("plan", path, "--device", "24GiB")
    assert result.exit_code == 2 and "general.architecture = 'rwkv7'" in result.stderr
