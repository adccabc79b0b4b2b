"""Open loop (each request at its arrival time) and closed loop (N requests always in flight)."""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp

from servecap.sim.sampling import Request

from .client import Outcome, request_body, stream_completion
from .synth import prompt_ids


@dataclass(frozen=True)
class LoadSpec:
    """completions_url: BASE_URL + /completions. concurrency None: open loop on the requests'
    arrival_s; else closed loop. duration_s: no request starts after it (None: all)."""

    completions_url: str
    model: str
    requests: tuple[Request, ...]
    concurrency: int | None = None
    duration_s: float | None = None
    timeout_s: float = 600.0
    vocab_size: int = 256
    seed: int = 0


@dataclass
class Sent:
    """arrival_s: seconds from the run's start when the request was due (open loop: its
    scheduled arrival, so a late send counts against its latency; closed loop: when sent)."""

    request: Request
    arrival_s: float
    outcome: Outcome


@dataclass
class RunState:
    """What a run has done so far, kept outside it: an interrupted run still reports these."""

    start_s: float = 0.0
    finished: list = None  # Sent, in the order they finished

    def __post_init__(self) -> None:
        self.finished = []


async def run_load(spec: LoadSpec, on_done: Callable[[Sent], None] = lambda s: None,
                   state: RunState | None = None) -> tuple[list[Sent], float]:
    """Every request that started, with its outcome; and the run's start (perf_counter)."""
    state = state or RunState()

    def done(sent: Sent) -> None:
        state.finished.append(sent)
        on_done(sent)

    bodies = {r.request_id: request_body(spec.model, prompt_ids(r, spec.vocab_size, spec.seed),
                                         r.output_tokens) for r in spec.requests}
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = state.start_s = time.perf_counter()
        if spec.concurrency is None:
            sent = await _open_loop(spec, session, bodies, start, done)
        else:
            sent = await _closed_loop(spec, session, bodies, start, done)
    return sent, start


async def _one(spec: LoadSpec, session, body: dict, req: Request, arrival_s: float,
               on_done) -> Sent:
    outcome = await stream_completion(session, spec.completions_url, body, spec.timeout_s)
    sent = Sent(req, arrival_s, outcome)
    on_done(sent)
    return sent


async def _open_loop(spec, session, bodies, start, on_done) -> list[Sent]:
    tasks = []
    for req in sorted(spec.requests, key=lambda r: r.arrival_s):
        if spec.duration_s is not None and req.arrival_s > spec.duration_s:
            break
        delay = start + req.arrival_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(
            _one(spec, session, bodies[req.request_id], req, req.arrival_s, on_done)))
    return list(await asyncio.gather(*tasks))


async def _closed_loop(spec, session, bodies, start, on_done) -> list[Sent]:
    queue = list(spec.requests)
    queue.reverse()
    sent: list[Sent] = []

    async def worker() -> None:
        while queue:
            now = time.perf_counter() - start
            if spec.duration_s is not None and now > spec.duration_s:
                return
            req = queue.pop()
            sent.append(await _one(spec, session, bodies[req.request_id], req, now, on_done))

    await asyncio.gather(*(worker() for _ in range(spec.concurrency)))
    return sorted(sent, key=lambda s: s.request.request_id)


async def run_scraped(spec: LoadSpec, scraper, on_done: Callable[[Sent], None],
                      state: RunState | None = None) -> tuple[list[Sent], float]:
    """run_load with a /metrics scraper (or None) polling alongside until the run ends."""
    if scraper is None:
        return await run_load(spec, on_done, state)
    stop = asyncio.Event()
    task = asyncio.create_task(scraper.run(stop))
    try:
        return await run_load(spec, on_done, state)
    finally:
        stop.set()
        await task
