"""transformers' reference generation and the engine's logits, for the parity tests."""

import torch


@torch.inference_mode()
def hf_greedy(hf, prompt: list[int], num_output: int) -> tuple[list[int], torch.Tensor]:
    """transformers' cached generation, one sequence: tokens and the (N, V) logits behind them."""
    out = hf(torch.tensor([prompt]), use_cache=True)
    rows, tokens = [out.logits[0, -1]], [int(out.logits[0, -1].argmax())]
    while len(tokens) < num_output:
        out = hf(torch.tensor([tokens[-1:]]), cache=out.past_key_values, use_cache=True)
        rows.append(out.logits[0, -1])
        tokens.append(int(out.logits[0, -1].argmax()))
    return tokens, torch.stack(rows)


def engine_logits(engine, prompts, num_output: int, monkeypatch, staggered: bool = False):
    """The engine's records and, per request, the (N, V) logits rows its sampler was given.
    staggered: the first request finishes before the others arrive (they hit its prefix)."""
    from servecap.runtime import engine as engine_module

    real = engine_module.forward_step
    seen: dict[int, list[torch.Tensor]] = {}

    def recording(*args):  # the real forward step; its logits are also kept per request
        logits, ready = real(*args)
        for row, seq in zip(logits, ready, strict=True):
            seen.setdefault(seq.record.request_id, []).append(row.clone())
        return logits, ready

    monkeypatch.setattr(engine_module, "forward_step", recording)
    records = []
    for group in ([prompts[:1], prompts[1:]] if staggered else [prompts]):
        records += [engine.add_request(p, num_output) for p in group]
        while engine.has_unfinished():
            engine.step()
    monkeypatch.undo()
    return records, [torch.stack(seen[r.request_id][-num_output:]) for r in records]
