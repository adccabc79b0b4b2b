"""--calibration-out from a real server: the simulator's step model (sim/calibrate.py, the one
fit) fitted to the server's steps as the token stream shows them.

The stream is request-level data: an OpenAI server says when each token reached the client,
not when its engine stepped, and a client reads tokens in bursts (several chunks in one
read), so a single gap is no step's time. Each answered request gives two samples instead:
- its first token: arrival to first token (its prefill step, queueing and the network
  included), with its prompt as the prefill and the other requests decoding meanwhile;
- its decode: its TPOT as the mean step, with the mean batch over its decode (each other
  request weighted by the share of the span it was decoding) at their mean context.
Assumed: a prompt is prefilled in one step and no prefix-cache hit shortens it. vLLM's
/metrics has no per-iteration times (vllm:iteration_tokens_total counts tokens), so this is
what a server that is not servecap's own can be calibrated from.

With the server's /metrics histograms (load --metrics), the time outside the engine step is
fitted apart (load/server_terms.py: frontend_s per request, cpu_step_s per step) and taken
off the samples first, so the step model prices the engine's step alone and the simulator
adds those terms where the server spends them.
"""

from servecap.sim.calibrate import fit_step_model
from servecap.sim.state import DONE, Seq

from .server_terms import server_terms

FIRST_TOKEN_GROUP = 10  # first-token samples averaged per group when a mean offset is off them
SOURCE = ("request-level: each request's first-token and mean decode step from the "
          "streamed token times (no iteration-level timing from the server)")


def answered(seqs: list[Seq]) -> list[Seq]:
    """The requests the fit reads: done, with at least two tokens."""
    return [s for s in seqs if s.state == DONE and len(s.prefill_token_s) > 1]


def reconstructed_steps(seqs: list[Seq], first_token_offset_s: float = 0.0,
                        decode_offset_s: float = 0.0) -> tuple[list[dict], int]:
    """StepSample dicts (sim.calibrate.SAMPLE_KEYS): each request's first token's step
    (arrival to first token less first_token_offset_s: its prefill, with the requests
    decoding meanwhile) and its mean decode step (its TPOT less decode_offset_s, with the
    mean batch over its decode). Means, because a client reads tokens in bursts (several
    chunks in one read): a single gap is no step's time. With a first-token offset (a mean
    over the run, while one request's time outside the step varies by as much as its
    prefill), the first-token samples are averaged FIRST_TOKEN_GROUP at a time in order of
    prompt length (binned). A sample at or below 0 is left out: one the offsets take to 0,
    or a decode whose tokens all reached the client in one read (no gap to time). Returns
    the samples and how many were left out."""
    done = answered(seqs)
    firsts, decodes = [], []
    for seq in done:
        times, req = seq.prefill_token_s, seq.req
        n = len(times) - 1
        count, context = _in_flight(done, req.arrival_s, times[0], seq)
        firsts.append(_sample(times[0] - req.arrival_s - first_token_offset_s,
                              req.prompt_tokens, count, context))
        count, context = _in_flight(done, times[0], times[-1], seq)
        decodes.append(_sample((times[-1] - times[0]) / n - decode_offset_s, 0, count + 1,
                               context + req.prompt_tokens + (n + 1) / 2))
    if first_token_offset_s:
        firsts = _binned(firsts, FIRST_TOKEN_GROUP)
    kept = [s for s in firsts + decodes if s["duration_s"] > 0]
    return kept, len(firsts) + len(decodes) - len(kept)


def _binned(samples: list[dict], size: int) -> list[dict]:
    """Means of `size` samples at a time, in order of prefill tokens; a remainder smaller
    than `size` joins the last group."""
    ordered = sorted(samples, key=lambda s: s["num_prefill_tokens"])
    cuts = list(range(0, len(ordered), size))
    if len(cuts) > 1 and len(ordered) - cuts[-1] < size:
        cuts.pop()
    groups = [ordered[a:b] for a, b in zip(cuts, [*cuts[1:], len(ordered)], strict=True)]
    return [{k: sum(s[k] for s in g) / len(g) for k in g[0]} for g in groups]


def _in_flight(done: list[Seq], a: float, b: float, me: Seq) -> tuple[float, float]:
    """(mean decoding requests, their summed mean context tokens) of the others over
    [a, b], each weighted by the share of the span it was decoding."""
    span = max(b - a, 1e-12)
    count = context = 0.0
    for other in done:
        if other is me:
            continue
        first, last = other.prefill_token_s[0], other.prefill_token_s[-1]
        share = max(0.0, min(b, last) - max(a, first)) / span
        if share:
            count += share
            context += share * (other.req.prompt_tokens + len(other.prefill_token_s) / 2)
    return count, context


def _sample(duration: float, prefill: int, decodes: float, context: float) -> dict:
    return {"duration_s": duration, "num_prefill_tokens": prefill,
            "num_decode_tokens": decodes,
            "prefill_attention_tokens": prefill * (prefill + 1) // 2,
            "decode_context_tokens": context, "num_seqs": decodes + (1 if prefill else 0)}


def calibrate_from_stream(seqs: list[Seq], constants: dict,
                          histograms: dict | None = None) -> dict:
    """fit_step_model's fit (what `simulate --coefficients` reads) of the reconstructed
    steps, with the server's terms outside the step (frontend_s, cpu_step_s) among the
    coefficients where its /metrics histograms give them, its source, the number of steps
    and of samples left out (at or below 0 once the server's terms are taken off)."""
    done = answered(seqs)
    terms = server_terms([s.prefill_token_s[0] - s.req.arrival_s for s in done], histograms)
    steps, left_out = reconstructed_steps(seqs, terms["first_token_offset_s"],
                                          terms["decode_offset_s"])
    fitted = fit_step_model(steps, constants)
    fitted["coefficients"] |= terms["coefficients"]
    source = SOURCE + ("; the server's time outside the step from its /metrics histograms"
                       if terms["coefficients"] else "")
    grouped = FIRST_TOKEN_GROUP if terms["first_token_offset_s"] else 1
    return fitted | {"source": source, "num_steps": len(steps), "samples_left_out": left_out,
                     "first_token_samples_grouped_by": grouped,
                     "server_terms": {"fitted": terms["coefficients"],
                                      "not_fitted": terms["not_fitted"],
                                      "measured": terms["measured"]}}
