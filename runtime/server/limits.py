"""The server's edge limits and timeouts: their defaults live here alone (stdlib only, so the
CLI can show them in --help without importing FastAPI)."""

DEFAULT_MAX_REQUEST_BYTES = 4 * 2**20  # ~500k token ids or ~1M characters of text
DEFAULT_HEADER_TIMEOUT_S = 10.0  # a connection must send a whole request head within this
DEFAULT_BODY_TIMEOUT_S = 30.0  # ... and its body within this (HTTP 408)
DEFAULT_SHUTDOWN_TIMEOUT_S = 5.0  # running requests get this long after SIGTERM
PARSE_INLINE_BYTES = 64 * 2**10  # bigger bodies are parsed in a helper process
