"""What a workbook is exported from: the model, the deployment, and the plan flags to replay."""

from collections.abc import Callable
from dataclasses import dataclass

from servecap.ledger import dtypes
from servecap.ledger.engines import PLAIN_ENGINE, EngineSpec
from servecap.ledger.model import SLIDING, ModelSpec
from servecap.ledger.plan import Overrides, Plan, build_plan
from servecap.ledger.ranks import Deployment, build_deployment
from servecap.ledger.serve import ServeSpec
from servecap.ledger.weights import default_quant, weight_bytes

from .geometry import caching_layers


@dataclass(frozen=True)
class WorkbookSource:
    """model_ref is what `servecap plan` is given back by --from-workbook; weight_dtype_flag is
    None when the checkpoint's own format was planned (a flag replaces its quantization);
    replan plans the deployment again at a device, context and KV dtype (the Envelope's rows;
    scenario/deployment.py replanner)."""

    model_ref: str
    spec: ModelSpec
    serve: ServeSpec
    overrides: Overrides = Overrides()
    weight_dtype_flag: str | None = None
    group_size: int = 128
    deployment: Deployment | None = None
    engine: EngineSpec = PLAIN_ENGINE
    deploy_flags: tuple[tuple[str, object], ...] = ()
    replan: Callable[[str, int, str], Deployment] | None = None

    def plan(self) -> Plan:
        """The whole model on one device with the plain engine (the Ledger sheet's plan)."""
        return build_plan(self.spec, self.serve, self.overrides)

    def resolved(self) -> Deployment:
        """The deployment planned, or the single device with the plain engine."""
        return self.deployment or build_deployment(self.spec, self.serve, self.overrides)

    @property
    def kinds(self):
        """The formulas' kinds: the model's caches, and LoRA slots where planned."""
        from .encoder_rows import NAMES, has_lines
        from .formulas import kinds_of

        extras = (("lora_line_bytes",) if self.serve.lora else ()) + (
            ("eplb_line_bytes",) if self.serve.eplb else ()) + (
            NAMES if self.serve.encoder and has_lines(self) else ())
        return kinds_of(self.spec, extras)

    @property
    def multi(self) -> bool:
        """More than one GPU, an engine's budget, or routed experts split across data-parallel
        ranks (ledger/experts.py): the Ranks sheet holds the deployment."""
        dep = self.deployment
        split = dep is not None and dep.plan.shard.experts is not None
        return dep is not None and (dep.parallel.world_size > 1 or dep.plan.budget is not None
                                    or split)


@dataclass(frozen=True)
class WeightSplit:
    """M_weights = ceil((P_q x b_q + (P - P_q) x b_dense) / 8) bytes, unless declared from files."""

    num_parameters: int
    quantized_parameters: int
    quantized_bits: int
    dense_bits: int
    declared_bytes: int
    metadata_bytes: int
    formats: tuple = ()  # FormatShare per storage format, when the weights are computed


def weight_split(src: WorkbookSource) -> WeightSplit:
    """The parameter counts and widths behind the weights line (the ledger's own choice of
    quantization: the checkpoint's, else the scheme a bare --weight-dtype means)."""
    serve, spec = src.serve, src.spec
    act = dtypes.lookup(serve.activation_dtype, "activation_dtype", dtypes.ACTIVATION_DTYPES)
    wdtype = dtypes.lookup(serve.weight_dtype, "weight_dtype", dtypes.WEIGHT_DTYPES)
    quant = src.overrides.quant or spec.quant or default_quant(wdtype.name)
    dense_bits = wdtype.bits if quant is None else act.bits
    computed = weight_bytes(spec, dense_bits, quant)
    declared = src.overrides.weights
    return WeightSplit(
        computed.num_parameters, computed.quantized_parameters,
        quant.bits if quant else dense_bits, dense_bits,
        declared.param_bytes if declared else 0,
        declared.metadata_bytes if declared else computed.metadata_bytes,
        () if declared else computed.by_format)


def num_sliding_layers(spec: ModelSpec) -> int:
    """Sliding layers that keep their own KV (workbooks/geometry.py)."""
    return len(caching_layers(spec, SLIDING))


def load_runs(serve: ServeSpec) -> list[tuple[int, int]]:
    """The live lengths as (length_tokens, count) runs, in order, so replanning keeps them."""
    if not serve.lengths:
        return [(serve.context_tokens, serve.concurrency)]
    runs: list[tuple[int, int]] = []
    for n in serve.lengths:
        if runs and runs[-1][0] == n:
            runs[-1] = (n, runs[-1][1] + 1)
        else:
            runs.append((n, 1))
    return runs


def runtime_rule(serve: ServeSpec) -> str:
    return "estimate" if serve.runtime_peak_bytes is None else "declared"


def safety_rule(serve: ServeSpec) -> str:
    if serve.safety_bytes is None:
        return "default"
    return "fraction" if serve.safety_fraction is not None else "bytes"


def cache_bytes_per_request(plan: Plan) -> int:
    """KV + indexer K + fixed state of one request at the context (with mixed lengths the mean
    of the caches in use, rounded up): what build_plan divides the rest of the device by."""
    serve = plan.serve
    if serve.lengths:
        return -(-plan.cache_in_use_bytes // len(serve.lengths))
    bsz = serve.block_size_tokens
    indexer = -(-serve.context_tokens // bsz) * bsz * plan.indexer_bytes_per_token
    return plan.kv_bytes_per_request + indexer + plan.state_bytes_per_request
