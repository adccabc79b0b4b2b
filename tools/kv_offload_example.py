"""docs/kv_offload.md's simulate example: agent sessions on an L4 without and with a host KV
tier, as one markdown table (python tools/regen_docs.py runs it)."""

import json
from pathlib import Path

from typer.testing import CliRunner

from servecap.cli.app import app

AGENTS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "kv_offload" / "agents.yaml"
RUN = ["simulate", "llama-3.1-8b", "--device", "l4-24gb", "--engine", "vllm", "--context",
       "8192", "--workload", str(AGENTS), "--json"]


def main() -> None:
    print("| --kv-offloading-size | prefix hit rate | of it from the tier | TTFT p50 | TTFT p99 |")
    print("| --- | --- | --- | --- | --- |")
    for size in (None, "8", "16", "32"):
        result = CliRunner().invoke(app, RUN + (["--kv-offloading-size", size] if size else []))
        if result.exit_code != 0:
            raise SystemExit(result.output)
        p = json.loads(result.stdout)["policies"][0]
        print(f"| {size + ' GiB' if size else 'none'} | {p['prefix_hit_rate']:.1%} | "
              f"{p.get('offload_hit_rate', 0.0):.1%} | {p['ttft_ms']['p50']:,.0f} ms | "
              f"{p['ttft_ms']['p99']:,.0f} ms |")


if __name__ == "__main__":
    main()
