"""Every way a request to a server can fail, by name: the one taxonomy load's client, report
and records use (and any other driver of a server should reuse). A request's outcome is
`ok` or exactly one of these kinds; the report counts them, the records carry them as the
reason `kind: detail`."""

OK = "ok"
HTTP_ERROR = "http_error"  # a status other than 200 (its body, decoded leniently, is the detail)
TIMEOUT = "timeout"  # no complete answer within --timeout
CONNECTION_ERROR = "connection_error"  # refused, reset, or closed mid-answer
STREAM_ERROR = "stream_error"  # the server sent an error event, or ended without [DONE]
BAD_JSON = "bad_json"  # a `data:` event that is not JSON
BAD_SCHEMA = "bad_schema"  # JSON, but not a completion chunk (choices, usage) as OpenAI's API
BAD_ENCODING = "bad_encoding"  # bytes that are not UTF-8
BAD_SSE = "bad_sse"  # not server-sent events: an event past MAX_EVENT_BYTES without a break
BAD_RESPONSE = "bad_response"  # not HTTP a client can read (the HTTP library's own refusal)

KINDS = (HTTP_ERROR, TIMEOUT, CONNECTION_ERROR, STREAM_ERROR, BAD_JSON, BAD_SCHEMA,
         BAD_ENCODING, BAD_SSE, BAD_RESPONSE)
MAX_EVENT_BYTES = 4 * 2**20  # one SSE event; a stream that never breaks is cut off here
MAX_DETAIL_CHARS = 200


class Malformed(Exception):
    """A response that breaks the protocol: its kind and a short detail."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind, self.detail = kind, short(detail)


def short(text: str) -> str:
    """A detail for a report line: at most MAX_DETAIL_CHARS, control characters shown."""
    text = text.encode("unicode_escape", "backslashreplace").decode("ascii") \
        if not text.isprintable() else text
    return text[:MAX_DETAIL_CHARS]
