"""The server's model when --model is not given: the one id its /v1/models lists."""

import json
import urllib.error
import urllib.request

from servecap.ledger.errors import SpecError

LIST_TIMEOUT_S = 10.0


def only_model(base_url: str, timeout_s: float = LIST_TIMEOUT_S) -> str:
    """GET BASE_URL/models; its only model's id, else one line (what it serves, or why the
    list could not be read) as bad --model input."""
    url = base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            listing = json.loads(resp.read(4 * 2**20))
    except (OSError, ValueError) as exc:  # refused, HTTP error, timeout, not JSON
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise SpecError("--model", None, f"{url} did not list the server's models "
                        f"({str(reason)[:120]}): name the model") from None
    ids = _ids(listing)
    if ids is None:
        raise SpecError("--model", None, f"{url} is not an OpenAI model list (data: [{{id}}]): "
                        "name the model")
    if len(ids) != 1:
        served = ", ".join(ids) if ids else "no model"
        raise SpecError("--model", None, f"{url} serves {served}: name one")
    return ids[0]


def _ids(listing) -> list[str] | None:
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None
    ids = [m.get("id") for m in data if isinstance(m, dict)]
    return ids if all(isinstance(i, str) for i in ids) else None
