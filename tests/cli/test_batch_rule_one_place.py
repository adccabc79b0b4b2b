"""The memory plan profiled with its memory row's batch rule (0.9's: >= 70 GiB and not an A100)
while simulate scheduled with the asked release's, so `--engine vllm==0.8.5` on an A100 80GB
planned vLLM's profile pass with 256 sequences and simulated 1,024, as vLLM 0.8.5 runs
(device_memory >= 70 GiB, the A100 not yet excluded). One rule now (ledger/vllm_batch.py)."""

import json
import re

import pytest

from servecap.ledger.devices import find
from servecap.ledger.engines import EngineSpec
from servecap.ledger.serve import ServeSpec
from servecap.ledger.vllm_batch import RULES, release_batch
from servecap.ledger.vllm_lines import profile_batch
from servecap.ledger.vllm_versions import choose
from servecap.sim.vllm_releases import batch_limits

DEVICES = ("a100-80gb", "h100-80gb", "h200-141gb", "l40s-48gb", "b200-180gb", "l4-24gb")
RELEASES = sorted({r.version for r in RULES} | {(0, 8, 3), (0, 11, 0), (0, 27, 1), (0, 33, 0)})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("version", RELEASES)
def test_the_plans_profile_and_the_simulated_scheduler_take_one_batch(version, device) -> None:
    dev = find(device)
    engine = EngineSpec("vllm", vllm_row=choose("vllm==" + ".".join(map(str, version))).row,
                        asked_release=version)
    serve = ServeSpec(device_bytes=dev.usable_bytes, context_tokens=8192, concurrency=1,
                      device_label=dev.label)
    planned = profile_batch(engine, serve)
    simulated = batch_limits(version, dev.usable_bytes, dev.label)
    assert (planned.tokens, planned.seqs) == (simulated.tokens, simulated.seqs)
    assert planned.seqs == release_batch(version, dev.usable_bytes, dev.label).seqs


@pytest.mark.parametrize(("engine", "seqs"), [("vllm==0.8.5", 1024), ("vllm==0.9.2", 256),
                                              ("vllm==0.8.4", 256)])
def test_plan_profiles_the_asked_releases_sequences_on_an_a100(run, engine, seqs) -> None:
    args = ("llama-3.1-8b", "--device", "a100-80gb", "--engine", engine)
    plan = run("plan", *args, "--json")
    assert plan.exit_code == 0, plan.output
    peak = next(line["from"] for line in json.loads(plan.stdout)["lines"]
                if line["key"] == "runtime_peak")
    assert re.search(rf"sampler of {seqs:,} x 128,256 logits", peak), peak
    sim = run("simulate", *args, "--input-len", "100", "--output-len", "10", "--num-requests",
              "10", "--json")
    assert sim.exit_code == 0, sim.output
    assert json.loads(sim.stdout)["batch"]["max_num_seqs"] == seqs
