"""Open loop (each conversation at its arrival time) and closed loop (N conversations always
in flight). A conversation's turns run one after another: each sends the history and the
previous answer, after the think time."""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import aiohttp

from servecap.sim.sampling import Request

from .client import Outcome, stream_completion
from .errors import OK
from .prompts import COMPLETIONS, History, Planned, Prompter


@dataclass(frozen=True)
class LoadSpec:
    """url: BASE_URL + /completions or /chat/completions. concurrency None: open loop on the
    conversations' first arrival_s; else closed loop. duration_s: no request starts after it
    (None: all). think_time_s: between a turn's answer and the next turn."""

    url: str
    prompter: Prompter
    conversations: tuple[Planned, ...]
    concurrency: int | None = None
    duration_s: float | None = None
    timeout_s: float = 600.0
    think_time_s: float = 0.0

    @property
    def num_requests(self) -> int:
        return sum(len(c.requests) for c in self.conversations)


def base_spec(base_url: str, model: str, requests, **options) -> LoadSpec:
    """Single-turn token-id requests, the default run."""
    prompter = Prompter(COMPLETIONS, model)
    return LoadSpec(base_url.rstrip("/") + "/completions", prompter,
                    tuple(Planned((r,)) for r in requests), **options)


@dataclass
class Sent:
    """arrival_s: seconds from the run's start when the request was due (open loop: its
    scheduled arrival, so a late send counts against its latency; closed loop and later
    turns: when sent). request.prompt_tokens: the prompt as sent (the client's count, else
    the server's usage). counted_prompt_tokens: the client's count (None: text without a
    tokenizer)."""

    request: Request
    arrival_s: float
    outcome: Outcome
    conversation: int = 0
    turn: int = 0
    counted_prompt_tokens: int | None = None


@dataclass
class RunState:
    """What a run has done so far, kept outside it: an interrupted run still reports these."""

    start_s: float = 0.0
    finished: list = field(default_factory=list)  # Sent, in the order they finished


async def run_load(spec: LoadSpec, on_done: Callable[[Sent], None] = lambda s: None,
                   state: RunState | None = None) -> tuple[list[Sent], float]:
    """Every request that started, with its outcome; and the run's start (perf_counter)."""
    state = state or RunState()

    def done(sent: Sent) -> None:
        state.finished.append(sent)
        on_done(sent)

    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = state.start_s = time.perf_counter()
        run = _Run(spec, session, start, done)
        if spec.concurrency is None:
            sent = await run.open_loop()
        else:
            sent = await run.closed_loop()
    return sorted(sent, key=lambda s: s.request.request_id), start


@dataclass
class _Run:
    spec: LoadSpec
    session: aiohttp.ClientSession
    start: float
    on_done: Callable[[Sent], None]

    def _late(self, at_s: float) -> bool:
        return self.spec.duration_s is not None and at_s > self.spec.duration_s

    async def conversation(self, index: int, conv: Planned, arrival_s: float) -> list[Sent]:
        spec, history, out = self.spec, History(), []
        for turn, req in enumerate(conv.requests):
            if turn:
                await asyncio.sleep(spec.think_time_s)
                arrival_s = time.perf_counter() - self.start
                if self._late(arrival_s):
                    break
            body, counted = spec.prompter.body(conv, turn, history)
            outcome = await stream_completion(self.session, spec.url, body, spec.timeout_s)
            prompt = counted if counted is not None else outcome.num_prompt_tokens or 0
            sent = Sent(replace(req, arrival_s=arrival_s, prompt_tokens=prompt), arrival_s,
                        outcome, index, turn, counted)
            self.on_done(sent)
            out.append(sent)
            if outcome.status != OK or not outcome.token_s:
                break  # the history lacks this answer: the conversation ends here
            spec.prompter.answered(conv, turn, history, outcome.text, outcome.num_output_tokens)
        return out

    async def open_loop(self) -> list[Sent]:
        tasks = []
        order = sorted(enumerate(self.spec.conversations), key=lambda c: c[1].requests[0].arrival_s)
        for index, conv in order:
            arrival = conv.requests[0].arrival_s
            if self._late(arrival):
                break
            delay = self.start + arrival - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(self.conversation(index, conv, arrival)))
        return [s for sents in await asyncio.gather(*tasks) for s in sents]

    async def closed_loop(self) -> list[Sent]:
        queue = list(enumerate(self.spec.conversations))
        queue.reverse()
        sent: list[Sent] = []

        async def worker() -> None:
            while queue:
                now = time.perf_counter() - self.start
                if self._late(now):
                    return
                index, conv = queue.pop()
                sent.extend(await self.conversation(index, conv, now))

        await asyncio.gather(*(worker() for _ in range(self.spec.concurrency)))
        return sent


async def run_scraped(spec: LoadSpec, scraper, on_done: Callable[[Sent], None],
                      state: RunState | None = None) -> tuple[list[Sent], float]:
    """run_load with a /metrics scraper (or None) polling alongside until the run ends; the
    first scrape comes before the first request, so the counters' rise covers every one."""
    if scraper is None:
        return await run_load(spec, on_done, state)
    stop = asyncio.Event()
    task = asyncio.create_task(scraper.run(stop))
    try:
        first = asyncio.create_task(scraper.first.wait())
        await asyncio.wait({task, first}, return_when=asyncio.FIRST_COMPLETED)
        first.cancel()
        return await run_load(spec, on_done, state)
    finally:
        stop.set()
        await task
