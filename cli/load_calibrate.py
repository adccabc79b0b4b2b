"""load --calibration-out: the simulator's step model fitted to what the server did
(load/calibrate.py), with the plan's bytes and FLOPs of the model the server runs."""

from pathlib import Path

from servecap.ledger.errors import SpecError
from servecap.scenario import simulation
from servecap.scenario.spec import Scenario

from .files import write_json

NEEDS = ("--calibration-out needs --sim-model (default: --model) and --plan-device: the "
         "ledger's weights, KV bytes and FLOPs per token the step model is priced with")


def check(scenario: Scenario) -> None:
    if scenario.device.name is None:
        raise SpecError("--plan-device", None, NEEDS)
    simulation.rank(scenario)


def write_calibration(path: Path, scenario: Scenario, seqs: list, force: bool,
                      server_metrics: dict | None = None) -> dict:
    """Fit, write, and return what the report says of it; server_metrics (--metrics) adds
    the server's time outside the step (load/server_terms.py)."""
    from servecap.load.calibrate import calibrate_from_stream
    from servecap.runtime.calibration import NOMINAL_BANDWIDTH_BYTES_PER_S, NOMINAL_FLOPS_PER_S
    from servecap.sim.rank_model import attention_flops_per_token_pair

    ranked = simulation.rank(scenario)
    plan, spec = ranked.plan, ranked.spec
    constants = {"weights_bytes": plan.line("weights") + plan.line("weight_metadata"),
                 "kv_bytes_per_token": plan.kv_bytes_per_token,
                 "flops_per_token": 2 * plan.active_parameters,
                 "attention_flops_per_token_pair": attention_flops_per_token_pair(
                     spec, spec.num_layers, 1),
                 "bandwidth_bytes_per_s": NOMINAL_BANDWIDTH_BYTES_PER_S,
                 "flops_per_s": NOMINAL_FLOPS_PER_S}
    try:
        fitted = calibrate_from_stream(seqs, constants,
                                       (server_metrics or {}).get("histograms"))
    except SpecError as exc:
        raise SpecError("--calibration-out", str(path), f"no fit: {exc.allowed}") from None
    write_json(path, fitted, "--calibration-out", force)
    return {k: fitted[k] for k in ("source", "num_steps", "samples_left_out", "num_outliers",
                                   "residual_cv", "coefficients", "underdetermined",
                                   "first_token_samples_grouped_by",
                                   "server_terms")}
