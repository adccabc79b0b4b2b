"""Expert routing as each MoE family's config.json states it: the scoring function, top-k with
or without renormalisation, DeepSeek-V3's bias-corrected grouped top-k and the routed scaling.

Field names and semantics follow vLLM's model classes (vllm/model_executor/models/mixtral.py,
qwen3_moe.py, qwen3_next.py, deepseek_v2.py, gpt_oss.py and fused_moe/router/
grouped_topk_router.py at v0.33.0) and transformers 5.24.0's, the reference the runtime is
tested against. A field the config omits takes the family's transformers class default: a
DeepSeek-V3 config.json written by transformers states neither scoring_func nor topk_method,
and its modeling class scores with a sigmoid and the correction bias all the same.
"""

from dataclasses import dataclass

import torch

from servecap.ledger.errors import SpecError

SOFTMAX, SIGMOID = "softmax", "sigmoid"
# gpt-oss: top-k of the raw logits, then a softmax over the k chosen (GptOssTopKRouter)
TOPK_SOFTMAX = "topk_softmax"
NOAUX_TC = "noaux_tc"  # DeepSeek-V3's topk_method: a per-expert bias steers the choice only
RENORM_EPS = 1e-20  # DeepseekV3TopkRouter's denominator guard (sigmoid scores never sum to 0)


@dataclass(frozen=True)
class Routing:
    """How a token picks its experts. scoring: softmax, sigmoid or topk_softmax; renormalize:
    the k weights divided by their sum (norm_topk_prob); n_group/topk_group: experts in
    n_group groups, only the best topk_group groups eligible; correction_bias: a learned
    per-expert bias added to the scores for the choice, never to the weights (noaux_tc);
    routed_scaling_factor multiplies the weights."""

    scoring: str = SOFTMAX
    renormalize: bool = True
    n_group: int = 1
    topk_group: int = 1
    correction_bias: bool = False
    routed_scaling_factor: float = 1.0


# model_type -> (its transformers class defaults for the routing fields, whether the config's
# norm_topk_prob is read at all): Mixtral and gpt-oss always renormalise
FAMILY_DEFAULTS: dict[str, tuple[Routing, bool]] = {
    "mixtral": (Routing(), False),
    "qwen3_moe": (Routing(renormalize=False), True),
    "qwen3_next": (Routing(renormalize=True), True),
    "deepseek_v3": (Routing(SIGMOID, True, 8, 4, True, 2.5), True),
    "gpt_oss": (Routing(TOPK_SOFTMAX), False),
}


def routing_from_config(model_type: str, config: dict, where: str = "config.json") -> Routing:
    """The routing a config.json states (scoring_func, norm_topk_prob, n_group, topk_group,
    topk_method, routed_scaling_factor), over its family's defaults; a value the runtime does
    not implement is refused by name."""
    if model_type not in FAMILY_DEFAULTS:
        raise SpecError("model_type", model_type, "the runtime routes experts for: "
                        + ", ".join(FAMILY_DEFAULTS)).at(where)
    base, reads_norm = FAMILY_DEFAULTS[model_type]
    if model_type != "deepseek_v3":
        return Routing(base.scoring, bool(config.get("norm_topk_prob", base.renormalize))
                       if reads_norm else base.renormalize)
    scoring = config.get("scoring_func") or base.scoring
    if scoring not in (SOFTMAX, SIGMOID):
        raise SpecError("scoring_func", scoring, "allowed: softmax, sigmoid").at(where)
    method = config.get("topk_method") or NOAUX_TC
    if method not in (NOAUX_TC, "greedy", "group_limited_greedy"):
        raise SpecError("topk_method", method, "allowed: noaux_tc, group_limited_greedy, "
                        "greedy").at(where)
    groups = int(config.get("n_group") or base.n_group) if method != "greedy" else 1
    chosen = int(config.get("topk_group") or base.topk_group) if method != "greedy" else 1
    return Routing(scoring, bool(config.get("norm_topk_prob", base.renormalize)), groups,
                   chosen, method == NOAUX_TC,
                   float(config.get("routed_scaling_factor") or base.routed_scaling_factor))


def check_routing(routing: Routing, num_experts: int, top_k: int) -> None:
    """Groups must split the experts evenly and leave at least top_k of them eligible."""
    if num_experts % routing.n_group:
        raise SpecError("n_group", routing.n_group, f"must divide the {num_experts} experts")
    if not 1 <= routing.topk_group <= routing.n_group:
        raise SpecError("topk_group", routing.topk_group, f"between 1 and n_group "
                        f"({routing.n_group})")
    if routing.correction_bias and routing.n_group > 1 and num_experts // routing.n_group < 2:
        raise SpecError("n_group", routing.n_group, "groups of at least 2 experts: a group "
                        "scores as its two best")
    if routing.topk_group * num_experts // routing.n_group < top_k:
        raise SpecError("topk_group", routing.topk_group, f"its groups hold fewer than the "
                        f"{top_k} experts a token takes")


def route(logits: torch.Tensor, routing: Routing, top_k: int,
          correction: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """logits (T, E) -> (weights (T, k) fp32, expert ids (T, k) int64)."""
    logits = logits.float()
    if routing.scoring == TOPK_SOFTMAX:
        values, ids = logits.topk(top_k, dim=-1)
        return values.softmax(-1), ids
    scores = logits.softmax(-1) if routing.scoring == SOFTMAX else logits.sigmoid()
    choice = scores if correction is None else scores + correction.float()
    if routing.n_group > 1:
        choice = _eligible_groups(choice, routing, correction is not None)
    if choice is scores:
        weights, ids = scores.topk(top_k, dim=-1)
    else:
        ids = choice.topk(top_k, dim=-1)[1]
        weights = scores.gather(1, ids)
    del choice, scores
    if routing.renormalize:
        weights /= weights.sum(-1, keepdim=True) + (RENORM_EPS if routing.scoring == SIGMOID
                                                    else 0.0)
    if routing.routed_scaling_factor != 1.0:
        weights *= routing.routed_scaling_factor
    return weights, ids


def _eligible_groups(choice: torch.Tensor, routing: Routing, biased: bool) -> torch.Tensor:
    """The scores with every expert outside the topk_group best groups at -inf. A group's
    score: its two best (bias-corrected) scores summed, else its best (vLLM's grouped_topk)."""
    tokens, experts = choice.shape
    grouped = choice.view(tokens, routing.n_group, experts // routing.n_group)
    group_scores = grouped.topk(2, dim=-1)[0].sum(-1) if biased else grouped.amax(-1)
    best = group_scores.topk(routing.topk_group, dim=-1, sorted=False)[1]  # (T, topk_group)
    keep = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best, True)
    return grouped.masked_fill(~keep[..., None], float("-inf")).view(tokens, experts)
