"""The KV offload tier in a workbook: host rows, live formulas over vLLM's knobs, that
LibreOffice recalculates to plan --json's kv_offload; no device line sums them, and the
workbook replays the same tier."""

import pytest
from openpyxl import load_workbook
from test_recalc import _check_ledger

from servecap.cli.plan_json import plan_to_dict
from servecap.cli.workbook_inputs import flags_from_workbook
from servecap.workbooks.names import cell_of


@pytest.mark.parametrize("case", ["llama-offload-native", "llama-offload-lmcache",
                                  "gptoss-offload-native"])
def test_host_rows_recalculate_to_plans_tier(recalculated, case):
    found = recalculated[case]
    wb = load_workbook(found.computed, data_only=True)
    # plan --json's tier: the deployment's rank under its engine (a hybrid's page is vLLM's)
    tier = plan_to_dict(found.src.resolved().plan)["kv_offload"]
    assert tier["bytes_per_rank"] > 0
    assert cell_of(wb, "kv_offload_bytes_per_rank").value == tier["bytes_per_rank"]
    assert cell_of(wb, "kv_offload_tokens").value == tier["tokens"]
    assert cell_of(wb, "kv_offload_num_chunks").value == tier["num_chunks"]
    _check_ledger(found)  # the device lines and the committed total are the plan's


def test_lmcache_case_is_issue_2901s_figure(recalculated):
    wb = load_workbook(recalculated["llama-offload-lmcache"].computed, data_only=True)
    assert cell_of(wb, "kv_offload_tokens").value == 409_600


def test_the_rows_are_formulas_over_the_knobs(recalculated):
    wb = load_workbook(recalculated["llama-offload-native"].original)
    for name in ("kv_offload_bytes_per_rank", "kv_offload_num_chunks"):
        formula = cell_of(wb, name).value
        assert formula.startswith("=") and "kv_offload" in formula
    assert "kv_offloading_size_gib" in cell_of(wb, "kv_offload_num_chunks").value


def test_the_workbook_replays_the_tier(recalculated):
    """--from-workbook reads the size and backend back: the same flags, the same tier."""
    for case in ("llama-offload-native", "llama-offload-lmcache"):
        found = recalculated[case]
        _, _, deploy = flags_from_workbook(found.computed)
        spec = found.src.serve.kv_offload
        assert (deploy.kv_offloading_size, deploy.kv_offloading_backend) \
            == (spec.size_gib, spec.backend)
