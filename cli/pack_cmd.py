"""`servecap pack`: can several models or instances share the devices, started in order, under
each engine's own reservation rule?"""

import json
from pathlib import Path
from typing import Annotated

import typer

from servecap.ledger.errors import SpecError

from .errors import EXIT_DOES_NOT_FIT, handle_errors


def pack(
    pack_file: Annotated[Path, typer.Argument(
        metavar="PACK_FILE", help="YAML: devices (catalog names or sizes) and instances in start "
        "order, each a launch line (launch: vllm serve MODEL --gpu-memory-utilization 0.45) or "
        "a scenario (scenario: FILE, or its sections), with gpus: [0] (its ranks' devices).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object (integer "
                                          "bytes).")] = False,
) -> None:
    """Check that instances share the devices, started in order, under each engine's rule.

    Each instance is planned as `servecap plan` plans it, then placed on its devices in start
    order: vLLM reserves total x gpu_memory_utilization (of the TOTAL memory, not of what is
    free) and from 0.9.2 refuses to start when less than that is free; vLLM 0.6.4 and 0.8.0 -
    0.9.1 count other processes' memory inside their own budget; SGLang's
    --mem-fraction-static and TensorRT-LLM's free_gpu_memory_fraction are fractions of what is
    free when they start. Each process adds its CUDA context. The answer is a ledger per device
    that adds up to the device, or the first instance that does not start, and why. Example:

      servecap pack two-models.yaml          # docs/pack.md
      servecap pack two-models.yaml --json

    Exit 0 when every instance starts, 1 when one does not, 2 for bad input.
    """
    from servecap.scenario.pack import pack as run_pack
    from servecap.scenario.pack import read_pack

    packed = read_pack(pack_file)
    try:
        result = run_pack(packed)
    except SpecError as exc:  # an instance that cannot be planned: named with the file
        raise (exc if exc.source else exc.at(str(pack_file))) from None
    if as_json:
        from .pack_view import packing_to_dict

        print(json.dumps(packing_to_dict(result), indent=2))
    else:
        from .pack_view import render_packing

        render_packing(result)
    if not result.fits:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(pack))
