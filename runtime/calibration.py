"""Step-time samples from the declared load and a short calibration sweep, fitted by the
simulator's own step-model fit.

Each step becomes a StepSample (the contract the simulator's fit reads,
servecap.sim.calibrate.SAMPLE_KEYS): duration_s, num_prefill_tokens, num_decode_tokens,
prefill_attention_tokens (sum over the step's prefill tokens of the keys each attends to),
decode_context_tokens (sum over decode sequences of their context length) and num_seqs.
The declared load alone repeats one shape (every request the same length): a fit of its
steps cannot tell overhead from bandwidth from compute. calibration_loads() adds the shapes
that can: single prompts from a sixteenth of the context to all of it (prefill tokens and
attention pairs apart), decode batches from 1 to the declared concurrency (tokens apart from
the fixed costs) and at two context lengths (KV read apart from the weights).
calibrate() hands every step to servecap.sim.calibrate.fit_step_model: one step model, one
fit, and what --calibration-out writes is what `simulate --coefficients` reads.
"""

from dataclasses import asdict, dataclass

from servecap.ledger.errors import SpecError
from servecap.sim.calibrate import fit_step_model
from servecap.sim.roofline import Coefficients, override
from servecap.sim.step_model import step_s

from .latency import step_ms
from .sequence import Arrival

# Peak rates the fit starts from when the device has no catalog figures (a CPU): they only
# seed the first compute/memory-bound split of the steps; the fitted rates are the achieved
# ones whatever the peaks (fit_step_model returns peak / factor).
NOMINAL_BANDWIDTH_BYTES_PER_S = 20e9
NOMINAL_FLOPS_PER_S = 100e9


@dataclass(frozen=True)
class StepSample:
    duration_s: float
    num_prefill_tokens: int
    num_decode_tokens: int
    prefill_attention_tokens: int
    decode_context_tokens: int
    num_seqs: int

    def as_dict(self) -> dict:
        return asdict(self)


CALIBRATION_OUTPUT_TOKENS = 8  # decode steps per decode-ladder load
SEED_BASE = 10_000  # prompt seeds of the sweep's requests: none shares a prefix with the load


def calibration_loads(context_tokens: int, max_batch: int, capacity_tokens: int
                      ) -> list[tuple[Arrival, ...]]:
    """Short loads, each run alone, whose steps span what the step model separates: one
    prompt of context/16 ... context tokens; 1, 2, 4 ... max_batch requests decoding at
    context/8; max_batch/2 decoding at context/4 and context/2. Each fits capacity_tokens (the
    pool) at once, so nothing is preempted."""
    out, seed = [], SEED_BASE
    shapes = [(1, max(4, context_tokens * k // 16), 2) for k in (1, 2, 4, 8)]
    shapes.append((1, max(4, context_tokens - 2), 2))
    batch = 1
    while batch <= max_batch:
        shapes.append((batch, max(4, context_tokens // 8), CALIBRATION_OUTPUT_TOKENS))
        batch *= 2
    shapes += [(max(1, max_batch // 2), max(4, context_tokens // d), CALIBRATION_OUTPUT_TOKENS)
               for d in (4, 2)]
    for count, prompt, output in dict.fromkeys(shapes):
        output = min(output, max(1, context_tokens - prompt))
        if count * (prompt + output) > capacity_tokens:
            continue
        out.append(tuple(Arrival(0.0, prompt, output, seed=seed + i) for i in range(count)))
        seed += count
    return out


class StepClock:
    """An engine step hook keeping one StepSample per step that computed anything."""

    def __init__(self) -> None:
        self.samples: list[StepSample] = []

    def __call__(self, stats) -> None:
        if stats.num_batched_tokens:
            self.samples.append(StepSample(
                stats.step_s, stats.num_batched_tokens - stats.num_decode_tokens,
                stats.num_decode_tokens, stats.prefill_attention_tokens,
                stats.decode_context_tokens, stats.num_seqs))


def calibrate(samples: list[StepSample], constants: dict) -> dict:
    """The simulator's fit of the steps (fit_step_model: coefficients, intervals,
    underdetermined, residual_cv, rms_residual_s, num_samples, num_outliers,
    num_compute_bound), plus 'fit' (measured vs replayed step p50/p95 in ms, the replay
    being the simulator's step_s with the fitted coefficients) and 'steps' (every sample).
    Fewer than 3 steps: no coefficients, and 'fit' says why."""
    steps = [s.as_dict() for s in samples]
    try:
        fitted = fit_step_model(steps, constants)
    except SpecError as exc:
        return {"coefficients": {}, "fit": {"num_steps": len(samples),
                                            "note": f"no fit: {exc.allowed}"}, "steps": steps}
    coef = override(Coefficients(**{k: constants[k] for k in (
        "weights_bytes", "kv_bytes_per_token", "flops_per_token", "bandwidth_bytes_per_s",
        "flops_per_s")}), fitted["coefficients"], "calibration")
    replayed = [step_s(coef, s.num_prefill_tokens, s.num_decode_tokens,
                       s.prefill_attention_tokens, s.decode_context_tokens) for s in samples]
    fit = {"num_steps": len(samples), "measured_step_ms": step_ms([s.duration_s for s in samples]),
           "replayed_step_ms": step_ms(replayed)}
    return fitted | {"fit": fit, "steps": steps}


def calibration_file(calibration: dict) -> dict:
    """What --calibration-out writes: the fit as fit_step_model returned it."""
    return {k: v for k, v in calibration.items() if k not in ("fit", "steps")}
