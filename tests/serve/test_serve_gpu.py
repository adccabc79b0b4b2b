"""On a CUDA device `servecap serve` answers the same way, and load measures it."""

import json

import pytest
import torch
from serve_process import Server, servecap

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_cuda_server_streams_exact_lengths_and_frees_its_blocks(tmp_path):
    (tmp_path / "trace.csv").write_text("arrival_s,prompt_tokens,output_tokens\n"
                                        "0,32,16\n0.01,64,24\n0.02,8,40\n")
    server = Server("--device", "cuda:0", "--device-memory", "1GiB")
    try:
        run = servecap("load", server.url + "/v1", "--model", "tiny-llama", "--trace",
                       tmp_path / "trace.csv", "--json", "--metrics", server.url + "/metrics")
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout)
        assert report["completed"] == 3 and report["output_token_mismatches"] == 0
        assert server.metric("servecap:kv_blocks_used") == 0
    finally:
        server.stop()
