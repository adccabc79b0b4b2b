"""Bytes `servecap plan ORG/NAME` fetches for a real-sized checkpoint, against its size.

    python bench/hub_headers.py        # llama-3.1-8b (4 shards), qwen3-30b-a3b (16 shards)

Each bundled model's config becomes a Hub repo served from this process (tests/hub's server):
config.json, the index and safetensors shards whose headers name every tensor the checkpoint
holds with its real shape (BF16), the tensor bytes served as zeros. The plan runs as a real
process with HF_ENDPOINT pointed there, so every byte it downloads is counted by the server.
The weights from the headers are checked against the published index's total_size.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "hub"))
from hub_server import Hub, SparseFile, serve  # noqa: E402

from servecap.model_configs import load_model  # noqa: E402
from servecap.model_configs.loader import BUNDLED_DIR  # noqa: E402
from servecap.model_configs.schema import HFConfig  # noqa: E402

MODELS = {"llama-3.1-8b": 4, "qwen3-30b-a3b": 16}  # bundled name -> shards in the real repo


def tensors(spec) -> list[tuple[str, list[int]]]:
    """Every tensor of a llama / qwen3_moe checkpoint, in layer order, with its shape."""
    att, h, moe = spec.attention, spec.hidden_size, spec.moe
    q, kv = att.num_heads * att.head_dim, att.num_kv_heads * att.head_dim
    out = [("model.embed_tokens.weight", [spec.vocab_size, h])]
    for i in range(spec.num_layers):
        p = f"model.layers.{i}."
        out += [(p + "self_attn.q_proj.weight", [q, h]), (p + "self_attn.k_proj.weight", [kv, h]),
                (p + "self_attn.v_proj.weight", [kv, h]), (p + "self_attn.o_proj.weight", [h, q]),
                (p + "input_layernorm.weight", [h]), (p + "post_attention_layernorm.weight", [h])]
        if att.qk_norm:
            out += [(p + "self_attn.q_norm.weight", [att.head_dim]),
                    (p + "self_attn.k_norm.weight", [att.head_dim])]
        if moe is None:
            out += _mlp(p + "mlp.", h, spec.intermediate_size)
            continue
        out.append((p + "mlp.gate.weight", [moe.num_experts, h]))
        for e in range(moe.num_experts):
            out += _mlp(f"{p}mlp.experts.{e}.", h, moe.expert_intermediate_size)
    out.append(("model.norm.weight", [h]))
    return out + ([] if spec.tie_word_embeddings else [("lm_head.weight", [spec.vocab_size, h])])


def _mlp(prefix: str, h: int, inter: int) -> list[tuple[str, list[int]]]:
    return [(prefix + "gate_proj.weight", [inter, h]), (prefix + "up_proj.weight", [inter, h]),
            (prefix + "down_proj.weight", [h, inter])]


def shards(items: list[tuple[str, list[int]]], count: int) -> dict[str, SparseFile]:
    """Split in order into `count` files of about equal size; each a safetensors header
    (8-byte length, JSON padded with spaces to 8 bytes, as safetensors writes it)."""
    sizes = [2 * _numel(shape) for _, shape in items]
    target, files, start = sum(sizes) / count, [], 0
    for k in range(count):
        end = start
        while end < len(items) and (k == count - 1 or sum(sizes[start:end + 1]) <= target):
            end += 1
        files.append(items[start:end])
        start = end
    out = {}
    for k, group in enumerate(files, 1):
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for name, shape in group:
            header[name] = {"dtype": "BF16", "shape": shape,
                            "data_offsets": [offset, offset + 2 * _numel(shape)]}
            offset += 2 * _numel(shape)
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        out[f"model-{k:05d}-of-{count:05d}.safetensors"] = SparseFile(
            len(text).to_bytes(8, "little") + text, 8 + len(text) + offset)
    return out


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def repo(name: str, count: int) -> tuple[dict, int]:
    data = yaml.safe_load((BUNDLED_DIR / f"{name}.yaml").read_text())
    config = {k: v for k, v in data.items() if k in HFConfig.model_fields}
    files = shards(tensors(load_model(name).spec), count)
    index = {"metadata": {"total_size": data["weights_total_size_bytes"]}, "weight_map": {
        t: f for f, sparse in files.items() for t in json.loads(sparse.header[8:])
        if t != "__metadata__"}}
    return ({"config.json": json.dumps(config).encode(),
             "model.safetensors.index.json": json.dumps(index).encode(), **files},
            data["weights_total_size_bytes"])


def main() -> None:
    hub = Hub()
    server = serve(hub)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    with tempfile.TemporaryDirectory() as home:
        env |= {"HF_ENDPOINT": hub.url, "HF_HOME": home, "HF_HUB_DISABLE_TELEMETRY": "1"}
        for name, count in MODELS.items():
            files, published = repo(name, count)
            hub.add(f"bench/{name}", files)
            out = subprocess.run([sys.executable, "-m", "servecap.cli", "plan", f"bench/{name}",
                                  "--device", "h200-141gb", "--json"], env=env, capture_output=True,
                                 text=True)
            if out.returncode:
                sys.exit(f"{name}: {out.stderr.strip()}")
            data = json.loads(out.stdout)
            got = data["weights_bytes"] + data["weight_metadata_bytes"]
            fetched, size = data["hub"]["bytes_fetched"], data["hub"]["weight_files_bytes"]
            print(f"{name}: {count} shards, {size:,} bytes of weight files; fetched "
                  f"{fetched:,} bytes ({fetched / size:.1e} of them); weights from headers "
                  f"{got:,} B, published total_size {published:,} B: "
                  f"{'equal' if got == published else 'DIFFER'}")
    server.shutdown()


if __name__ == "__main__":
    main()
