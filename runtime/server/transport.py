"""uvicorn, bounded: a connection that has not sent a whole request head within the header
timeout is closed (slow-loris), and a shutdown drains the serving loop, gives in-flight
streams --shutdown-timeout seconds to finish, then ends them with an error event."""

import asyncio
from functools import partial

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .limits import DEFAULT_HEADER_TIMEOUT_S
from .serving_loop import ServingLoop

HARD_MARGIN_S = 2.0  # after the streams are ended, connections get this long to close


class HeadDeadline(H11Protocol):
    """H11Protocol that closes a connection idle before a complete request head for
    header_timeout_s: at connect, and again after every response (uvicorn's keep-alive
    timer is cancelled by the first byte of a next request, so a trickled head would hold
    the connection for ever)."""

    header_timeout_s = DEFAULT_HEADER_TIMEOUT_S

    def connection_made(self, transport) -> None:  # noqa: ANN001 - uvicorn's signature
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc) -> None:  # noqa: ANN001
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._deadline,
                                                self.cycle)

    def _disarm(self) -> None:  # a pending timer would keep the connection alive in memory
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
            self._head_timer = None

    def _deadline(self, cycle_when_armed) -> None:
        if self.cycle is cycle_when_armed and not self.transport.is_closing():
            self.transport.close()  # no new request head arrived in time


def head_deadline(header_timeout_s: float) -> type[H11Protocol]:
    return type("HeadDeadlineProtocol", (HeadDeadline,), {"header_timeout_s":
                                                          header_timeout_s})


class DrainingServer(uvicorn.Server):
    """On SIGTERM or SIGINT: refuse new requests (503), let running streams finish for
    shutdown_timeout_s, then end the rest with an error event; uvicorn's own graceful
    timeout (HARD_MARGIN_S later) cancels whatever still holds a connection."""

    def __init__(self, config: uvicorn.Config, serving: ServingLoop,
                 shutdown_timeout_s: float) -> None:
        super().__init__(config)
        self.serving, self.shutdown_timeout_s = serving, shutdown_timeout_s

    async def shutdown(self, sockets=None) -> None:  # noqa: ANN001 - uvicorn's signature
        self.serving.drain()
        loop = asyncio.get_running_loop()
        loop.call_later(self.shutdown_timeout_s, partial(
            self.serving.abort, f"the server is shutting down (--shutdown-timeout "
            f"{self.shutdown_timeout_s:g} s passed); retry on another instance"))
        await super().shutdown(sockets)


def serve_app(app, serving: ServingLoop, host: str, port: int, header_timeout_s: float,
              shutdown_timeout_s: float) -> None:
    config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                            http=head_deadline(header_timeout_s),
                            timeout_graceful_shutdown=shutdown_timeout_s + HARD_MARGIN_S)
    DrainingServer(config, serving, shutdown_timeout_s).run()
