"""Write ledger/vllm_log_marks.py: for each vLLM release whose Python source is extracted under
/work/vllm_src/<version>/vllm (the release wheels, see /work/vllm_src/get.sh), the file and line
of the logger calls that print a startup log's usual lines. vLLM's log format names them
(`[gpu_worker.py:298] Available KV cache memory ...`, vllm/logger.py _FORMAT), so a log that
states no version, or a source build's, can be matched to the releases that print each line at
that place.

    python tools/vllm_log_marks.py [SRC] [--fresh]   # SRC: /work/vllm_src by default; the
                                                     # source read is cached in /tmp
"""

import ast
import pickle
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "ledger" / "vllm_log_marks.py"
# The opening words of the lines a startup log usually shows (the literal start of the
# logger call's message in the source); each is matched against the log line's message.
MESSAGES = (
    "Initializing a V1 LLM engine", "Initializing a V0 LLM engine", "Initializing an LLM engine",
    "vLLM API server version", "non-default args", "Starting to load model",
    "Model loading took", "Loading model weights took", "Loading weights took",
    "Available KV cache memory", "GPU KV cache size", "Maximum concurrency for",
    "Memory profiling takes", "Memory profiling results", "# GPU blocks", "# cpu blocks",
    "# CPU blocks", "# cuda blocks", "init engine (profile, create kv cache, warmup model)",
    "Graph capturing finished", "EngineCore failed to start", "Estimated CUDA graph memory",
    "Custom allreduce is disabled", "torch.compile takes", "Chunked prefill is enabled",
    "Using max model len", "Resolved architecture", "This model supports multiple tasks",
    "Automatically detected platform", "vLLM is using nccl", "Found nccl from library",
    "Capturing CUDA graph shapes", "Capturing cudagraphs", "Dynamo bytecode transform time",
    "Compiling a graph for dynamic shape", "Waiting for init message",
    "Using FlashAttention", "Using Flash Attention backend", "Using FLASH_ATTN",
    "Using FlashInfer for top-p & top-k sampling", "Defaulting to use mp for distributed",
    "Starting vLLM API server", "Supported_tasks", "Available routes are",
    "Using Triton MLA backend", "Using FlashMLA backend", "Using CUTLASS_MLA",
    "Loading safetensors checkpoint shards", "Asynchronous scheduling is enabled",
    "The model's max seq len", "To serve at least one request",
)
# A message whose literal starts with a format field: the words the log shows there.
LEADING_FIELD = {"%s KV cache size": "GPU KV cache size"}  # 0.28 on: the device's name
LOG_METHODS = {"info", "warning", "debug", "error", "info_once", "warning_once", "debug_once",
               "exception", "critical", "warn"}


def literal_start(node: ast.AST) -> str | None:
    """The leading literal text of a message argument: a string, an f-string's first part,
    a concatenation's left side, a %-format's left side."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        first = node.values[0] if node.values else None
        return first.value if isinstance(first, ast.Constant) else ""
    if isinstance(node, ast.BinOp):
        return literal_start(node.left)
    return None


def calls(path: Path):
    """(line, message start) of each logger call in one file."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if not any(m in text for m in MESSAGES):  # most files print none of them
        return
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in LOG_METHODS and node.args:
            text = literal_start(node.args[0])
            if text:
                for field, words in LEADING_FIELD.items():
                    text = words + text[len(field):] if text.startswith(field) else text
                yield node.lineno, text


def version_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.]", name))


def releases(src: Path) -> list[str]:
    found = [d.name for d in src.iterdir() if (d / "vllm").is_dir() and d.name[0].isdigit()]
    return sorted(found, key=lambda v: [int(x) for x in re.findall(r"\d+", v)] +
                  ([0] if "post" not in v else []))


def collect(src: Path) -> tuple[list[str], dict]:
    """{(message, file, line): [release, ...]} over every release."""
    names = releases(src)
    marks: dict[tuple[str, str, int], list[str]] = defaultdict(list)
    for version in names:
        for path in sorted((src / version / "vllm").rglob("*.py")):
            for line, text in calls(path):
                message = next((m for m in MESSAGES if text.lstrip().startswith(m)), None)
                if message is not None and version not in marks[(message, path.name, line)]:
                    marks[(message, path.name, line)].append(version)
    return names, marks


def write(names: list[str], marks: dict, src: Path) -> None:
    """One entry per (message, file): 'line:i,j line:k', i, j, k indexes into RELEASES."""
    index = {v: i for i, v in enumerate(names)}
    grouped: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (message, file, line), versions in sorted(marks.items()):
        grouped[(message, file)].append(f"{line}:" + ",".join(str(index[v]) for v in versions))
    rows = [f"    ({message!r}, {file!r}):\n" + _wrapped(spans)
            for (message, file), spans in sorted(grouped.items())]
    OUT.write_text(
        '"""Where each vLLM release prints a startup log\'s usual lines: {(message start, file): '
        '"line:i,j\nline:k ..."}, i, j, k indexes into RELEASES. Generated by '
        'tools/vllm_log_marks.py from the\nrelease wheels\' source (' + str(src) + '/<version>/'
        'vllm, the logger calls at each tag); do not\nedit."""\n\n'
        "RELEASES = (\n" + _wrapped([repr(v) for v in names], joiner=", ", quote=False)
        + ")\nMARKS = {\n" + "\n".join(rows) + "\n}\n")


def _wrapped(words: list[str], joiner: str = " ", quote: bool = True, width: int = 86) -> str:
    """Words on lines of at most `width` characters, each line indented 8; as one string
    (implicit concatenation) when quoted."""
    lines, line = [], ""
    for word in words:
        if line and len(line) + len(joiner) + len(word) > width:
            lines.append(line + joiner.rstrip() if not quote else line + " ")
            line = word
        else:
            line = line + joiner + word if line else word
    lines.append(line)
    if not quote:
        return "".join(f"        {x}\n" for x in lines[:-1]) + f"        {lines[-1]},\n"
    return "\n".join(f"        {x!r}" for x in lines) + ","


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    src = Path(args[0]) if args else Path("/work/vllm_src")
    cache = Path("/tmp/vllm_log_marks.pickle")
    if cache.exists() and "--fresh" not in argv:
        names, marks = pickle.loads(cache.read_bytes())
    else:
        names, marks = collect(src)
        cache.write_bytes(pickle.dumps((names, marks)))
    write(names, marks, src)
    print(f"{OUT.relative_to(ROOT)}: {len(marks)} marks over {len(names)} releases "
          f"({names[0]} .. {names[-1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
