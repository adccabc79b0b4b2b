"""Launch lines say the chosen deployment in each engine's own flag names."""

from servecap.sim.search.launch import launch_lines

ROW = {"tensor_parallel_size": 4, "pipeline_parallel_size": 2, "max_num_seqs": 128,
       "max_num_batched_tokens": 2048, "kv_dtype": "fp8", "weight_dtype": "fp8",
       "mode": "aggregated", "replicas": 2, "prefill_replicas": 0, "decode_replicas": 0}


def test_aggregated_replicas_become_data_parallelism() -> None:
    lines = launch_lines("org/model", ROW, 4500, 0.9)
    (vllm,) = lines["vllm"]
    assert vllm.split() == ["vllm", "serve", "org/model", "--tensor-parallel-size", "4",
                            "--pipeline-parallel-size", "2", "--data-parallel-size", "2",
                            "--max-num-seqs", "128", "--max-num-batched-tokens", "2048",
                            "--max-model-len", "4500", "--kv-cache-dtype", "fp8",
                            "--gpu-memory-utilization", "0.90", "--quantization", "fp8"]
    (sglang,) = lines["sglang"]
    for flag in ("--tp-size 4", "--pp-size 2", "--dp-size 2", "--context-length 4500",
                 "--chunked-prefill-size 2048", "--kv-cache-dtype fp8_e4m3",
                 "--mem-fraction-static 0.90", "--quantization fp8"):
        assert flag in sglang
    (trt,) = lines["trtllm"]
    assert trt.startswith("# 2 replicas behind a router, each: trtllm-serve org/model")
    for flag in ("--tp_size 4", "--pp_size 2", "--max_batch_size 128", "--max_num_tokens 2048",
                 "--max_seq_len 4500", "--kv_cache_free_gpu_memory_fraction 0.90"):
        assert flag in trt


def test_one_replica_of_bf16_has_no_data_parallel_or_quantization_flag() -> None:
    row = ROW | {"replicas": 1, "weight_dtype": "bf16", "kv_dtype": "bf16"}
    (vllm,) = launch_lines("m", row, 2048, 0.9)["vllm"]
    assert "--data-parallel-size" not in vllm and "--quantization" not in vllm
    assert "--kv-cache-dtype auto" in vllm


def test_disaggregated_gives_a_prefill_and_a_decode_pool() -> None:
    row = ROW | {"mode": "disaggregated", "replicas": 0, "prefill_replicas": 1,
                 "decode_replicas": 3}
    lines = launch_lines("m", row, 2048, 0.9)
    prefill, decode = lines["vllm"]
    assert prefill.startswith("# prefill pool, 1 replica: vllm serve")
    assert decode.startswith("# decode pool, 3 replicas: vllm serve")
    assert all("NixlConnector" in line for line in (prefill, decode))
    assert lines["sglang"][0].endswith("--disaggregation-mode prefill")
    assert lines["sglang"][1].endswith("--disaggregation-mode decode")
    assert len(lines["trtllm"]) == 2
