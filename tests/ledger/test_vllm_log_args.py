"""The flags, settings and collective set-up a vLLM log shows (ledger/vllm_log_args.py)."""

from pathlib import Path

from servecap.ledger.vllm_log_args import allreduce_off, logged_args, logged_env

LINES = (Path(__file__).resolve().parents[1] / "fixtures" / "log_lines" /
         "v0_17_tp2_no_p2p.txt").read_text().splitlines()
NON_DEFAULT, NO_P2P, POOL = (line for line in LINES if not line.startswith("#"))


def test_the_non_default_args_dict_is_read_as_literals():
    args = dict(logged_args([NON_DEFAULT]))
    assert args["max_model_len"] == 32768 and args["gpu_memory_utilization"] == 0.2
    assert args["served_model_name"] == ["qwen3:8b"] and args["enforce_eager"] is True


def test_a_dict_with_a_non_literal_value_keeps_its_plain_entries():
    line = ("INFO [utils.py:1] non-default args: {'max_num_seqs': 16, 'compilation_config': "
            "{'mode': <CompilationMode.VLLM_COMPILE: 3>}, 'kv_cache_dtype': 'fp8'}")
    assert dict(logged_args([line])) == {"max_num_seqs": 16, "kv_cache_dtype": "fp8"}


def test_v0_args_namespace():
    line = ("INFO 03-02 23:59:21 api_server.py:241] args: Namespace(host='0.0.0.0', "
            "port=8000, model='mistralai/Mistral-7B-Instruct-v0.1', max_model_len=None, "
            "gpu_memory_utilization=0.9, tensor_parallel_size=2, enforce_eager=False)")
    args = dict(logged_args([line]))
    assert args["gpu_memory_utilization"] == 0.9 and args["tensor_parallel_size"] == 2
    assert args["max_model_len"] is None and args["enforce_eager"] is False


def test_settings_are_read_from_the_users_text_not_from_vllms_advice():
    lines = ["$ VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_MXFP4_USE_MARLIN='1' vllm serve m",
             "docker run -e VLLM_ATTENTION_BACKEND=FLASHINFER img",
             "WARNING 05-09 10:18:05 [topk_topp_sampler.py:170] FlashInfer top-p/top-k sampling "
             "unavailable; falling back. Set VLLM_USE_FLASHINFER_SAMPLER=0 to silence."]
    assert logged_env(lines) == (("VLLM_USE_FLASHINFER_SAMPLER", "0"),
                                 ("VLLM_MXFP4_USE_MARLIN", "1"),
                                 ("VLLM_ATTENTION_BACKEND", "FLASHINFER"))


def test_why_custom_all_reduce_is_off():
    assert allreduce_off([NO_P2P]) == "no_p2p"
    assert allreduce_off(["WARNING custom_all_reduce.py:74] Custom allreduce is disabled because "
                          "this process group spans across nodes."]) == "nodes"
    assert allreduce_off(["[TP3] Custom allreduce is disabled because it's not supported on "
                          "more than two PCIe-only GPUs."]) == "pcie"
    assert allreduce_off([POOL]) is None
