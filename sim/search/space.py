"""The search space: layouts (device x TP x PP x dtypes x scheduler knobs) and their ladders."""

from dataclasses import dataclass

from servecap.ledger import dtypes
from servecap.ledger.devices import DEVICES, find
from servecap.ledger.errors import SpecError


@dataclass(frozen=True, order=True)
class Layout:
    """One replica's shape: tp x pp GPUs of `device`, its dtypes and vLLM scheduler knobs."""

    device: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    weight_dtype: str
    kv_dtype: str
    max_num_seqs: int
    max_num_batched_tokens: int
    expert_parallel: bool = False  # vLLM's --enable-expert-parallel across the tp ranks

    @property
    def world_size(self) -> int:
        """GPUs one replica spans."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def label(self) -> str:
        return (f"{self.device} tp{self.tensor_parallel_size} pp{self.pipeline_parallel_size} "
                f"w{self.weight_dtype}/kv{self.kv_dtype} s{self.max_num_seqs} "
                f"b{self.max_num_batched_tokens}" + (" ep" if self.expert_parallel else ""))


@dataclass(frozen=True, order=True)
class Candidate:
    """A layout deployed as `replicas` identical engines (aggregated), or as `prefill` and
    `decode` pools of that layout joined by a KV link (disaggregated; replicas = 0)."""

    layout: Layout
    replicas: int = 1
    prefill: int = 0
    decode: int = 0

    @property
    def disaggregated(self) -> bool:
        return self.prefill > 0

    @property
    def num_replicas(self) -> int:
        return self.prefill + self.decode if self.disaggregated else self.replicas

    @property
    def num_gpus(self) -> int:
        return self.num_replicas * self.layout.world_size

    @property
    def shape(self) -> str:
        return f"{self.prefill}P+{self.decode}D" if self.disaggregated else f"x{self.replicas}"

    @property
    def label(self) -> str:
        return f"{self.layout.label} {self.shape}"


@dataclass(frozen=True)
class Axes:
    """Every axis of the space, as pinned or ranged by flags. replicas None: 1 up to what
    max_gpus allows; ratios: prefill:decode replica ratios tried (scaled up while they fit)."""

    devices: tuple[str, ...]
    tensor_parallel_sizes: tuple[int, ...] = (1, 2, 4, 8)
    pipeline_parallel_sizes: tuple[int, ...] = (1,)
    weight_dtypes: tuple[str, ...] = ("bf16",)
    kv_dtypes: tuple[str, ...] = ("bf16",)
    max_num_seqs: tuple[int, ...] = (256,)
    max_num_batched_tokens: tuple[int, ...] = (8192,)
    replicas: tuple[int, ...] | None = None
    ratios: tuple[tuple[int, int], ...] = ()
    max_gpus: int = 8
    expert_parallel: tuple[bool, ...] = (False,)


def layouts(axes: Axes) -> list[Layout]:
    """Every layout whose replica fits in max_gpus, in one fixed order; a token budget below
    max_num_seqs is left out (chunked prefill needs every running sequence to decode), and so
    is expert parallelism on one tp rank (nothing to spread the experts over)."""
    out = []
    for dev in axes.devices:
        for tp in axes.tensor_parallel_sizes:
            for pp in axes.pipeline_parallel_sizes:
                if tp * pp > axes.max_gpus:
                    continue
                for w in axes.weight_dtypes:
                    for kv in axes.kv_dtypes:
                        for seqs in axes.max_num_seqs:
                            out += [Layout(dev, tp, pp, w, kv, seqs, tokens, ep)
                                    for tokens in axes.max_num_batched_tokens if tokens >= seqs
                                    for ep in axes.expert_parallel if tp > 1 or not ep]
    return sorted(out)


def ladders(layout: Layout, axes: Axes) -> list[list[Candidate]]:
    """The layout's candidates, one ladder per deployment shape, each in rising GPU count:
    aggregated replicas, then each prefill:decode ratio scaled k = 1, 2, ..."""
    most = axes.max_gpus // layout.world_size
    counts = axes.replicas or tuple(range(1, most + 1))
    out = [[Candidate(layout, r) for r in sorted(counts) if r <= most]]
    for p, d in axes.ratios:
        out.append([Candidate(layout, 0, k * p, k * d) for k in range(1, most // (p + d) + 1)])
    return [ladder for ladder in out if ladder]


def num_candidates(axes: Axes) -> int:
    return sum(len(ladder) for lay in layouts(axes) for ladder in ladders(lay, axes))


def device_name(text: str) -> str:
    """A catalog name, or the unique catalog name it begins ('h200' -> 'h200-141gb')."""
    key = text.strip().lower()
    if (device := find(key)) is not None:
        return device.name
    matches = [d.name for d in DEVICES if d.name.startswith(key + "-")]
    if len(matches) == 1:
        return matches[0]
    hint = f"did you mean {' or '.join(matches)}?" if matches else \
        "see `servecap devices` (h100-80gb, h200-141gb, a100-80gb, ...)"
    raise SpecError("--devices", text, f"a catalog device with bandwidth and FLOPS; {hint}")


def parse_devices(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(device_name(p) for p in _parts(text, "--devices")))
    for name in names:
        dev = find(name)
        if not dev.bandwidth_bytes_per_s or not dev.bf16_flops_per_s:
            raise SpecError("--devices", name, "its catalog entry states no bandwidth or FLOPS "
                            "to simulate with")
    return names


def parse_counts(text: str, field: str, most: int = 4096) -> tuple[int, ...]:
    """'1,2,4,8' or a range '1-8' -> whole numbers >= 1, sorted, without repeats."""
    values: set[int] = set()
    for part in _parts(text, field):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise SpecError(field, text, "whole numbers >= 1, comma-separated or a range, "
                            "e.g. 1,2,4,8 or 1-8")
        values.update(range(int(low), int(high or low) + 1))
    if not values or min(values) < 1 or max(values) > most:
        raise SpecError(field, text, f"whole numbers between 1 and {most:,}")
    return tuple(sorted(values))


def parse_dtypes(text: str, field: str, allowed: tuple[str, ...],
                 auto: str | None = None) -> tuple[str, ...]:
    """Comma-separated dtypes; with `auto` (the model's), vLLM's auto is that dtype."""
    return tuple(dict.fromkeys(dtypes.lookup(dtypes.or_auto(p, auto) or p, field, allowed).name
                               for p in _parts(text, field)))


def parse_ratios(text: str) -> tuple[tuple[int, int], ...]:
    """'1:1,1:2' -> ((1, 1), (1, 2)); 'none' -> () (aggregated only)."""
    if text.strip().lower() in ("none", "off", ""):
        return ()
    out = []
    for part in _parts(text, "--disaggregate"):
        p, _, d = part.partition(":")
        if not (p.isdigit() and d.isdigit() and int(p) >= 1 and int(d) >= 1):
            raise SpecError("--disaggregate", text, "prefill:decode replica ratios, e.g. "
                            "1:1,1:2, or none")
        out.append((int(p), int(d)))
    return tuple(dict.fromkeys(out))


def _parts(text: str, field: str) -> list[str]:
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts:
        raise SpecError(field, text, "at least one value")
    return parts
