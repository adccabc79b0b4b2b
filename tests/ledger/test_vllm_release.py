"""Which vLLM release a log came from: its version line, a source build's base, or where its
lines are printed from (ledger/vllm_log_marks.py, generated from the release wheels)."""

from pathlib import Path

import pytest

from servecap.ledger.vllm_log import parse_vllm_log
from servecap.ledger.vllm_log_marks import MARKS, RELEASES
from servecap.ledger.vllm_release import by_places, marked_lines, release_of

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"
# vLLM 0.11.0's gpu_worker.py prints 'Available KV cache memory' at line 298 and core.py
# 'EngineCore failed to start.' at 708 (the 0.11.0 wheel); 0.10.2 prints the first at 298 too.
POOL_0110 = "(EngineCore_DP0 pid=6880) INFO 10-31 15:07:49 [gpu_worker.py:298] Available KV " \
    "cache memory: 1.71 GiB"
FAILED_0110 = "(EngineCore_DP0 pid=6880) ERROR 10-31 15:07:50 [core.py:708] EngineCore failed " \
    "to start."


def test_the_table_covers_every_release_read_and_each_place_names_known_releases():
    assert RELEASES[0] == "0.6.0" and RELEASES[-1] == "0.33.0" and len(RELEASES) >= 60
    for spans in MARKS.values():
        for span in spans.split():
            line, _, indexes = span.partition(":")
            assert int(line) > 0
            assert all(0 <= int(i) < len(RELEASES) for i in indexes.split(","))


def test_a_line_is_matched_to_the_releases_that_print_it_there():
    [(place, releases, at, line)] = marked_lines([POOL_0110])
    assert place == "gpu_worker.py:298" and set(releases) == {"0.10.2", "0.11.0"}
    assert line == 298 and at["0.10.1"] == 276  # where another release prints it
    chosen, why = by_places([POOL_0110, FAILED_0110])
    assert chosen == ("0.11.0",) and "[gpu_worker.py:298, core.py:708]" in why


def test_a_log_without_a_version_is_placed_by_its_lines():
    found = release_of(None, [POOL_0110, FAILED_0110])
    assert found.version == "0.11.0"
    assert found.basis.startswith("the log states no version; its lines")


def test_lines_no_release_prints_there_take_the_nearest_and_say_so():
    found = release_of(None, ["INFO 10-31 [gpu_worker.py:1] Available KV cache memory: 1 GiB"])
    assert found.version is not None and "is where a release prints them" in found.basis
    assert "lie nearest where" in found.basis
    assert release_of(None, ["no vLLM line here"]).version is None


def test_a_checkout_without_tags_is_placed_by_its_nearest_lines():
    """vllm-project/vllm install_pod_files/lazy_cuda_graph/README.md: a modified source build of
    2025-08-06 (0.1.dev8168+g475c1a0) whose lines no release prints where it does; most are
    nearest where 0.10.1 prints them (released 2025-08-18, after 0.10.0 of 07-24)."""
    f = parse_vllm_log((LOGS / "v1_llama32_1b_l40s_devbuild.log").read_text())
    assert f.version == "0.1.dev8168+g475c1a0" and f.release == "0.10.1"
    assert "lie nearest where vLLM 0.10.1" in f.release_basis


@pytest.mark.parametrize("stated, version", [
    ("0.10.2", "0.10.2"), ("0.6.4.post1", "0.6.4.post1"), ("0.15.0rc1", "0.15.0"),
    ("0.10.1+cu128", "0.10.1"),
])
def test_a_stated_release_is_taken(stated, version):
    assert release_of(stated, []).version == version


def test_a_source_build_takes_the_release_its_base_follows_without_lines():
    found = release_of("0.9.1.dev705+g01220ce89", [])
    assert found.version == "0.9.0.1" and "source build after 0.9.0.1" in found.basis


def test_a_source_build_is_placed_by_its_lines_at_or_after_its_base():
    """The quoted eagle log (0.9.1.dev705, 2025-06-23, main after 0.9.1 was tagged on its
    branch) prints its pool and capacity lines where 0.9.2 does."""
    f = parse_vllm_log((LOGS / "v1_llama31_8b_eagle_h100.log").read_text())
    found = release_of("0.9.1.dev705+g01220ce89", [x.text for x in f.lines])
    assert found.version == "0.9.2" and "is a source build" in found.basis


def test_a_checkout_without_tags_has_no_base_and_is_placed_by_its_lines():
    found = release_of("0.1.dev7548+gbaba038", [POOL_0110, FAILED_0110])
    assert found.version == "0.11.0" and "0.1.dev7548+gbaba038 is a source build" in found.basis
    unknown = release_of("0.1.dev7548+gbaba038", ["no vLLM line here"])
    assert unknown.version is None and "without a release in its version" in unknown.basis


def test_a_log_file_carries_its_release_and_why():
    f = parse_vllm_log((LOGS / "v1_gptoss120b_h100_issue27508.log").read_text())
    assert f.version is None and f.release == "0.11.0"
    assert "vLLM 0.11.0 prints them" in f.release_basis
    g = parse_vllm_log((LOGS / "v0_llama31_8b_rtx3090.log").read_text())
    assert g.release == "0.6.4" and "one-line 'Memory profiling results'" in g.release_basis


def test_free_memory_at_startup_below_the_request_refuses_the_start():
    """vLLM 0.19 on an H100 (79.19 GiB) at 0.95 requests 75.23 GiB; a rank with 60.85 GiB free
    (another process holds the rest) refuses, as Kimi-Dev-72B's tp 4 log shows; 0.8.5 had no
    such check."""
    from servecap.ledger.units import GiB
    from servecap.ledger.vllm_start import free_memory_refusal
    from servecap.ledger.vllm_versions import row

    total = round(79.19 * GiB)
    assert "60.85 GiB free at startup" in free_memory_refusal(row("0.19.0"), total, 0.95,
                                                            round(60.85 * GiB))
    assert free_memory_refusal(row("0.19.0"), total, 0.95, round(78.68 * GiB)) is None
    assert free_memory_refusal(row("0.8.5"), total, 0.95, round(60.85 * GiB)) is None
    f = parse_vllm_log((LOGS / "v1_kimi_dev_72b_4xh100_planner_failed.log").read_text())
    assert f.free_at_start_gib == 60.85 and f.failure is not None
