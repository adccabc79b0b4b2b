"""Launch lines for a chosen deployment: vLLM, SGLang and TensorRT-LLM, in their own flags."""

from servecap.ledger.units import plural

# servecap's dtype names -> each engine's --kv-cache-dtype / quantization spelling
_VLLM_KV = {"bf16": "auto", "fp16": "auto", "fp8": "fp8", "fp32": "auto"}
_SGLANG_KV = {"bf16": "auto", "fp16": "auto", "fp8": "fp8_e4m3", "fp32": "auto"}
_QUANT = {"fp8": "fp8"}  # other weight dtypes come from a quantized checkpoint


def launch_lines(model_id: str, row: dict, context_tokens: int, utilization: float) -> dict:
    """{'vllm': [...], 'sglang': [...], 'trtllm': [...]}: one line per pool (one for an
    aggregated deployment with its replicas as data parallelism; prefill then decode for a
    disaggregated one, each pool's replica count in a leading comment)."""
    pools = [("", row["replicas"])] if row["mode"] == "aggregated" else \
        [("prefill", row["prefill_replicas"]), ("decode", row["decode_replicas"])]
    return {"vllm": [_vllm(model_id, row, context_tokens, utilization, role, n)
                     for role, n in pools],
            "sglang": [_sglang(model_id, row, context_tokens, utilization, role, n)
                       for role, n in pools],
            "trtllm": [_trtllm(model_id, row, context_tokens, utilization, role, n)
                       for role, n in pools]}


def _head(role: str, n: int) -> str:
    return f"# {role} pool, {plural(n, 'replica')}: " if role else ""


def _vllm(model_id, row, ctx, util, role, n) -> str:
    parts = [f"vllm serve {model_id}", f"--tensor-parallel-size {row['tensor_parallel_size']}",
             f"--pipeline-parallel-size {row['pipeline_parallel_size']}"]
    parts += [f"--data-parallel-size {n}"] if n > 1 and not role else []
    parts += ["--enable-expert-parallel"] if row.get("expert_parallel") else []
    parts += [f"--max-num-seqs {row['max_num_seqs']}",
              f"--max-num-batched-tokens {row['max_num_batched_tokens']}",
              f"--max-model-len {ctx}",
              f"--kv-cache-dtype {_VLLM_KV.get(row['kv_dtype'], row['kv_dtype'])}",
              f"--gpu-memory-utilization {util:.2f}"]
    parts += [f"--quantization {_QUANT[row['weight_dtype']]}"] if row["weight_dtype"] in _QUANT \
        else []
    if role:
        parts.append("--kv-transfer-config '{\"kv_connector\":\"NixlConnector\","
                     "\"kv_role\":\"kv_both\"}'")
    return _head(role, n) + " ".join(parts)


def _sglang(model_id, row, ctx, util, role, n) -> str:
    parts = [f"python -m sglang.launch_server --model-path {model_id}",
             f"--tp-size {row['tensor_parallel_size']}",
             f"--pp-size {row['pipeline_parallel_size']}"]
    parts += [f"--dp-size {n}"] if n > 1 and not role else []
    parts += [f"--ep-size {row['tensor_parallel_size']}"] if row.get("expert_parallel") else []
    parts += [f"--max-running-requests {row['max_num_seqs']}",
              f"--chunked-prefill-size {row['max_num_batched_tokens']}",
              f"--context-length {ctx}",
              f"--kv-cache-dtype {_SGLANG_KV.get(row['kv_dtype'], row['kv_dtype'])}",
              f"--mem-fraction-static {util:.2f}"]
    parts += [f"--quantization {_QUANT[row['weight_dtype']]}"] if row["weight_dtype"] in _QUANT \
        else []
    parts += [f"--disaggregation-mode {role}"] if role else []
    return _head(role, n) + " ".join(parts)


def _trtllm(model_id, row, ctx, util, role, n) -> str:
    """trtllm-serve has no KV-dtype flag: an fp8 KV cache goes in --extra_llm_api_options
    (kv_cache_config: dtype: fp8), named in the line."""
    parts = [f"trtllm-serve {model_id}", f"--tp_size {row['tensor_parallel_size']}",
             f"--pp_size {row['pipeline_parallel_size']}",
             *([f"--ep_size {row['tensor_parallel_size']}"] if row.get("expert_parallel")
               else []),
             f"--max_batch_size {row['max_num_seqs']}",
             f"--max_num_tokens {row['max_num_batched_tokens']}", f"--max_seq_len {ctx}",
             f"--kv_cache_free_gpu_memory_fraction {util:.2f}"]
    if row["kv_dtype"] == "fp8":
        parts.append("--extra_llm_api_options kv_fp8.yaml  # kv_cache_config: {dtype: fp8}")
    head = f"# {n} replicas behind a router, each: " if n > 1 and not role else _head(role, n)
    return head + " ".join(parts)
