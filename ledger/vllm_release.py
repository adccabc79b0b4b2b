"""Which vLLM release a startup log came from: the version it prints, a source build's base
release, or the places its lines are printed from (vLLM's log format names the file and line of
each logger call: `[gpu_worker.py:298] Available KV cache memory`, ledger/vllm_log_marks.py)."""

import re
from dataclasses import dataclass

from .vllm_log_marks import MARKS, RELEASES

# 'INFO 10-31 15:07:49 [gpu_worker.py:298] Available ...' (0.8 on) and 'INFO 05-25 15:30:01
# llm_engine.py:100] Initializing ...' (before): the file (a path from 0.11 with
# VLLM_LOGGING... relpaths: the last part is the file), the line, the message.
PLACE = re.compile(r"(?:\[|\s)(?:[\w.-]+/)*([\w.-]+\.py):(\d+)\]\s+(.*)$")
DEV = re.compile(r"^(?P<base>[0-9][0-9.]*?)(?:rc[0-9]+)?\.?dev(?P<distance>[0-9]+)")
RELEASE = re.compile(r"^(?P<base>[0-9]+\.[0-9]+\.[0-9]+(?:\.post[0-9]+)?)(?:rc[0-9]+)?"
                     r"(?:\+[\w.]+)?$")  # 0.10.2, 0.6.4.post1, 0.15.0rc1, 0.10.1+cu128


@dataclass(frozen=True)
class LoggedRelease:
    """The release whose rules a log is read with (None: none could be told) and why, in
    words a note can carry."""

    version: str | None
    basis: str


def _places() -> dict[tuple[str, str], dict[int, tuple[str, ...]]]:
    """MARKS as {(message, file): {line: releases}}."""
    out = {}
    for key, spans in MARKS.items():
        lines = {}
        for span in spans.split():
            line, _, indexes = span.partition(":")
            lines[int(line)] = tuple(RELEASES[int(i)] for i in indexes.split(","))
        out[key] = lines
    return out


PLACES = _places()
MESSAGES = sorted({message for message, _ in PLACES}, key=len, reverse=True)


def marked_lines(lines: list[str]) -> list[tuple[str, tuple[str, ...], dict]]:
    """Each log line vLLM printed from a known place: ('file.py:N', the releases that print
    that message there (empty where none does: a build between releases or a fork), and
    {release: the line it prints the message at})."""
    found = []
    for text in lines:
        match = PLACE.search(text)
        if not match:
            continue
        file, line, message = match.group(1), int(match.group(2)), match.group(3).lstrip()
        known = next((m for m in MESSAGES if message.startswith(m) and (m, file) in PLACES),
                     None)
        if known is None:
            continue
        places = PLACES[(known, file)]
        at = {v: n for n, vs in places.items() for v in vs}
        found.append((f"{file}:{line}", places.get(line, ()), at, line))
    return found


def nearest(marked) -> tuple[tuple[str, ...], str]:
    """The release whose lines lie nearest the log's on average (a source build's lines drift
    from its neighbours' by the lines added since), among those that print at least three
    quarters of the log's known messages."""
    distances = {}
    for version in RELEASES:
        gaps = [abs(at[version] - line) for _, _, at, line in marked if version in at]
        if gaps and len(gaps) * 4 >= len(marked) * 3:
            distances[version] = sum(gaps) / len(gaps)
    if not distances:
        return (), ""
    best = min(distances.values())
    chosen = tuple(v for v in RELEASES if distances.get(v) == best)
    return chosen, (f"its lines lie nearest where {_span(chosen)} print{'s' * (len(chosen) == 1)}"
                    f" them ({best:.0f} lines apart on average)")


def by_places(lines: list[str]) -> tuple[tuple[str, ...], str] | None:
    """The releases that print most of the log's known lines where it shows them, and which
    lines; where no release prints most of them there, the nearest (said so); None when the
    log has no line from a known place."""
    marked = list({m[0]: m for m in marked_lines(lines)}.values())
    if not marked:
        return None
    score = {v: sum(v in releases for _, releases, _, _ in marked) for v in RELEASES}
    best = max(score.values())
    if best * 2 > len(marked):  # most lines are where one release prints them
        chosen = tuple(v for v in RELEASES if score[v] == best)
        where = _names([m for m in marked if set(chosen) & set(m[1])])
        share = "its lines" if best == len(marked) else f"{best} of its {len(marked)} lines"
        return chosen, (f"{share} {where} are where {_span(chosen)} "
                        f"print{'s' * (len(chosen) == 1)} them")
    chosen, why = nearest(marked)
    some = f"only {best} of" if best else "none of"
    return chosen, (f"{some} its {len(marked)} lines from known places ({_names(marked)}) "
                    f"{'are' if best > 1 else 'is'} where a release prints them" + (
                        f"; {why}" if why else ""))


def _names(marked) -> str:
    names = [m[0] for m in marked]
    return "[" + ", ".join(names[:3]) + (f", +{len(names) - 3}" if len(names) > 3 else "") + "]"


def _span(versions: tuple[str, ...]) -> str:
    if len(versions) == 1:
        return f"vLLM {versions[0]}"
    return f"vLLM {versions[0]} - {versions[-1]} ({len(versions)} releases)"


def release_of(stated: str | None, lines: list[str]) -> LoggedRelease:
    """A release the log states is taken as printed (a local '+cu128' tag or an rc as that
    release); a source build ('0.9.1.dev705+g01220ce89') is the release before its base, or
    where its lines are printed from; a log that states none is placed by its lines."""
    places = by_places(lines)
    if stated:
        release = RELEASE.match(stated)
        if release and not DEV.match(stated):
            said = "" if release.group("base") == stated else f" (printed {stated})"
            return LoggedRelease(release.group("base"), f"the log's vLLM {release.group('base')}"
                                 f"{said}")
        return _dev_build(stated, places)
    if places and places[0]:
        return LoggedRelease(places[0][-1], f"the log states no version; {places[1]}"
                             + ("; the newest of them is taken" if len(places[0]) > 1 else ""))
    why = places[1] if places else "no line of it is from a place a release prints"
    return LoggedRelease(None, f"the log states no version and {why}")


def _dev_build(stated: str, places) -> LoggedRelease:
    """A source build: its lines' places first, the oldest release that prints them at or
    after the release its version's base follows ('0.9.1.devN' is N commits past the newest tag
    its checkout reached, 0.9.0 or later: main's builds can follow 0.9.1 itself, which is
    tagged on a branch); else that release. '0.1.devN' (a checkout without tags) has no base."""
    dev = DEV.match(stated)
    base = dev.group("base").rstrip(".") if dev else None
    after = _before(base) if base and base not in ("0.1", "0.0") else None
    if places and places[0]:
        chosen = [v for v in places[0] if after is None or _key(v) >= _key(after)]
        pick = (chosen or list(places[0]))[0]
        return LoggedRelease(pick, f"the log's vLLM {stated} is a source build; {places[1]}"
                             + ("; the oldest of them is taken" if len(places[0]) > 1 else
                                f": {pick} is taken"))
    if after is not None:
        return LoggedRelease(after, f"the log's vLLM {stated} is a source build after {after} "
                             f"(its version's base, {base}, is the next release's) and no line "
                             f"of it places it further: {after} is taken")
    why = places[1] if places else "no line of it is from a place a release prints"
    return LoggedRelease(None, f"the log's vLLM {stated} is a source build without a release "
                         f"in its version, and {why}")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"[0-9]+", version.replace(".post", ".")))


def _before(base: str) -> str | None:
    """The newest release read before `base` (a dev build of 0.9.1 follows 0.9.0)."""
    earlier = [v for v in RELEASES if _key(v) < _key(base)]
    return earlier[-1] if earlier else None
