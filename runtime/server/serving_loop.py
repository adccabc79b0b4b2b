"""One thread steps the engine; HTTP handlers feed it through a queue, so requests batch.

Handlers call submit() and read token events from the returned Stream's asyncio queue; the
engine thread adds queued requests, steps once, and hands each stream its new tokens. A
cancel (client gone) frees the request's blocks before the next step. At most max_waiting
requests wait for admission; submit() beyond that raises Overloaded (HTTP 429).

One request's failure is its own: the engine isolates a step's per-request work (engine.py),
a request whose work raises ends with an error event, and the loop itself never dies on one
request's account. drain() refuses new requests (ShuttingDown, HTTP 503) and abort() ends
every request in flight with an error event, so a shutdown is bounded.
"""

import asyncio
import logging
import queue
import threading
import time
from dataclasses import dataclass

from servecap.ledger.errors import SpecError
from servecap.runtime.engine import Engine
from servecap.runtime.sequence import FAILED, FINISHED, REJECTED

from .prom_metrics import ServerMetrics

log = logging.getLogger("servecap.serve")


class Overloaded(Exception):
    """More requests wait for admission than the stated bound."""


class ShuttingDown(Exception):
    """The server is draining for shutdown and admits nothing new."""


@dataclass(frozen=True)
class Generation:
    """What a handler asks for: exact lengths via max_tokens / min_tokens / ignore_eos."""

    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    min_tokens: int = 0
    ignore_eos: bool = False
    temperature: float = 0.0
    seed: int = 0


@dataclass(frozen=True)
class Event:
    """New tokens of one stream; finish_reason set on its last event ('length', 'stop',
    'error' with message)."""

    token_ids: tuple[int, ...] = ()
    finish_reason: str | None = None
    message: str = ""
    status: int = 400  # the HTTP status an 'error' stands for


class Stream:
    def __init__(self, gen: Generation, loop: asyncio.AbstractEventLoop, arrival_s: float):
        self.gen, self.loop, self.arrival_s = gen, loop, arrival_s
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self.record = None
        self.num_sent = 0
        self.waiting = True
        self.done = False

    @property
    def num_cached_tokens(self) -> int:
        """Prompt tokens the prefix cache served at admission (0 before it)."""
        return self.record.num_cached_tokens if self.record is not None else 0

    def push(self, event: Event) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)
        except RuntimeError:  # the event loop has closed: nobody is left to tell
            pass


class ServingLoop:
    def __init__(self, engine: Engine, metrics: ServerMetrics, max_waiting: int,
                 eos_token_ids: tuple[int, ...] = ()) -> None:
        self.engine, self.metrics, self.max_waiting = engine, metrics, max_waiting
        self.eos_token_ids = frozenset(eos_token_ids)
        self._commands: queue.SimpleQueue = queue.SimpleQueue()
        self._active: dict[int, Stream] = {}
        self._lock = threading.Lock()
        self._num_waiting = 0  # submitted, not yet admitted nor finished
        self._stop = threading.Event()
        self.draining = False
        self._thread = threading.Thread(target=self._run, name="servecap-engine", daemon=True)
        self._publish()

    # -- called from the event loop ------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._commands.put(("wake", None))
        self._thread.join(timeout=10)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def drain(self) -> None:
        """Admit nothing new (ShuttingDown); what runs goes on until abort() or its end."""
        self.draining = True

    def abort(self, message: str) -> None:
        """End every request in flight with an error event (HTTP 503) and free its blocks."""
        self._commands.put(("abort", message))

    def submit(self, gen: Generation) -> Stream:
        """Queue a generation; SpecError if the engine could never run it (past the whole KV
        pool), so the edge refuses it before a stream starts."""
        if self.draining:
            raise ShuttingDown("the server is shutting down; retry on another instance")
        self.engine.check_request(list(gen.prompt_token_ids), gen.max_tokens, gen.temperature)
        with self._lock:
            if self._num_waiting >= self.max_waiting:
                raise Overloaded(f"{self._num_waiting} requests already wait for admission "
                                 f"(bound: --max-waiting {self.max_waiting}); retry later")
            self._num_waiting += 1
        stream = Stream(gen, asyncio.get_running_loop(), self.engine.now())
        self._commands.put(("add", stream))
        return stream

    def cancel(self, stream: Stream) -> None:
        if not stream.done:
            self._commands.put(("cancel", stream))

    # -- the engine thread ---------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._iterate()
            except Exception:  # a bug here must not stop the server: log, fail, go on
                log.exception("serving loop iteration failed")
                self._fail_all("internal error in the serving loop", 500)

    def _iterate(self) -> None:
        """One pass: take commands, step, hand out tokens. The host's time of a pass that
        stepped (commands taken without waiting, tokens delivered, gauges published: all but
        engine.step()) goes to servecap:host_step_seconds."""
        idle = not self.engine.has_unfinished()
        start = time.perf_counter()
        self._drain(block=idle)
        if idle:  # a blocking take waited for work: its wait is no host time
            start = time.perf_counter()
        if self.engine.has_unfinished():
            stepping = time.perf_counter()
            stats = self.engine.step()  # per-request failures are isolated inside
            stepped = time.perf_counter()
            with self.metrics.lock:
                self.metrics.counters["vllm:num_preemptions_total"] += stats.num_preempted
                if stats.num_batched_tokens:
                    self.metrics.histograms["vllm:iteration_tokens_total"].observe(
                        stats.num_batched_tokens)
            self._deliver()
            self._publish()
            host = stepping - start + time.perf_counter() - stepped
            with self.metrics.lock:
                self.metrics.histograms["servecap:host_step_seconds"].observe(host)
            return
        self._publish()

    def _drain(self, block: bool) -> None:
        try:
            command = self._commands.get(timeout=0.05) if block else self._commands.get_nowait()
        except queue.Empty:
            return
        while True:
            kind, payload = command
            if kind == "add":
                self._add(payload)
            elif kind == "cancel":
                self._cancel(payload)
            elif kind == "abort":
                self._fail_all(payload, 503)
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return

    def _add(self, stream: Stream) -> None:
        gen = stream.gen
        try:
            record = self.engine.add_request(list(gen.prompt_token_ids), gen.max_tokens,
                                             gen.temperature, gen.seed)
        except SpecError as exc:
            return self._finish(stream, Event(finish_reason="error", message=exc.line()))
        except Exception as exc:  # this request alone fails
            log.exception("adding a request failed")
            return self._finish(stream, Event(finish_reason="error", status=500,
                                              message=f"request not added: {exc}"))
        if record.status == REJECTED:
            self.engine.release(record.request_id)
            return self._finish(stream, Event(finish_reason="error", message=record.reason))
        record.arrival_s = stream.arrival_s
        stream.record = record
        self._active[record.request_id] = stream

    def _cancel(self, stream: Stream) -> None:
        if stream.record is None or stream.done:
            return
        self.engine.cancel(stream.record.request_id)
        with self.metrics.lock:
            self.metrics.counters["servecap:requests_cancelled_total"] += 1
        self._finish(stream, Event(finish_reason="cancelled"))

    def _deliver(self) -> None:
        for stream in list(self._active.values()):
            record = stream.record
            if stream.waiting and record.admitted_s is not None:
                self._admitted(stream)
            if record.status == FAILED:
                self._finish(stream, Event(finish_reason="error", message=record.reason,
                                           status=500))
                continue
            new = record.output_token_ids[stream.num_sent:]
            if not new:
                continue
            new, stop = self._until_eos(stream, new)
            self._observe(stream, len(new))
            stream.num_sent += len(new)
            if stop:
                self.engine.cancel(record.request_id)
                self._finish(stream, Event(tuple(new), "stop"))
            elif record.status == FINISHED:
                self._finish(stream, Event(tuple(new), "length"))
            else:
                stream.push(Event(tuple(new)))

    def _until_eos(self, stream: Stream, new: list[int]) -> tuple[list[int], bool]:
        """Tokens up to and including the first EOS at or past min_tokens (ignore_eos: none)."""
        if stream.gen.ignore_eos or not self.eos_token_ids:
            return new, False
        for i, token in enumerate(new):
            if token in self.eos_token_ids and stream.num_sent + i + 1 >= stream.gen.min_tokens:
                return new[:i + 1], True
        return new, False

    def _observe(self, stream: Stream, num_new: int) -> None:
        record, m = stream.record, self.metrics
        times = record.token_ready_s[stream.num_sent:stream.num_sent + num_new]
        with m.lock:
            if stream.num_sent == 0:
                m.histograms["vllm:time_to_first_token_seconds"].observe(
                    times[0] - stream.arrival_s)
                m.counters["vllm:prompt_tokens_total"] += record.num_prompt_tokens
            prev = record.token_ready_s[stream.num_sent - 1] if stream.num_sent else times[0]
            for t in times[1:] if stream.num_sent == 0 else times:
                m.histograms["vllm:inter_token_latency_seconds"].observe(t - prev)
                prev = t
            m.counters["vllm:generation_tokens_total"] += num_new

    def _admitted(self, stream: Stream) -> None:
        """Queue time, and the prefix-cache lookup in vLLM's terms: its prompt tokens queried,
        the cached ones hit."""
        stream.waiting = False
        with self._lock:
            self._num_waiting -= 1
        record, m = stream.record, self.metrics
        with m.lock:
            m.histograms["vllm:request_queue_time_seconds"].observe(
                record.admitted_s - stream.arrival_s)
            m.counters["vllm:prefix_cache_queries_total"] += record.num_prompt_tokens
            m.counters["vllm:prefix_cache_hits_total"] += record.num_cached_tokens

    def _finish(self, stream: Stream, event: Event) -> None:
        if stream.waiting:
            stream.waiting = False
            with self._lock:
                self._num_waiting -= 1
        stream.done = True
        if stream.record is not None:  # sent or failed: the engine keeps no trace of it
            self._active.pop(stream.record.request_id, None)
            self.engine.release(stream.record.request_id)
        if event.finish_reason in ("length", "stop"):
            with self.metrics.lock:
                self.metrics.success[event.finish_reason] += 1
                self.metrics.histograms["vllm:e2e_request_latency_seconds"].observe(
                    self.engine.now() - stream.arrival_s)
        elif event.finish_reason == "error":
            with self.metrics.lock:
                self.metrics.counters["servecap:requests_rejected_total"] += 1
        self._publish()  # the gauges count its blocks freed before its client sees the end
        stream.push(event)

    def _fail_all(self, message: str, status: int) -> None:
        for stream in list(self._active.values()):
            try:
                self.engine.cancel(stream.record.request_id)
            finally:
                self._finish(stream, Event(finish_reason="error", message=message,
                                           status=status))

    def _publish(self) -> None:
        eng, g = self.engine, self.metrics.gauges
        with self.metrics.lock:
            g.num_running = len(eng.scheduler.running)
            g.num_waiting = len(eng.scheduler.waiting)
            g.num_blocks = eng.blocks.num_blocks
            g.num_free_blocks = eng.blocks.num_free_blocks
            g.block_size_tokens = eng.blocks.block_size_tokens
