"""Every command's main example, and its --help, at 80 and at 200 columns: no number and no
option name is cut with an ellipsis, no table line runs past the terminal, and a table too wide
for it says which columns it left out."""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servecap.cli.app import COMMANDS, app

ROOT = Path(__file__).resolve().parents[2]
CHAT = (ROOT / "workloads" / "chat.yaml").read_text()
LOG = ROOT / "tests" / "fixtures" / "vllm_logs" / "v1_qwen3_14b_a100_40gb.log"
H100 = ("--device", "h100-80gb")
SLO = ("--slo-ttft", "500ms", "--slo-itl", "50ms")

# each command's example from its --help, the workload cut to 300 requests where it runs one
EXAMPLES = {
    "plan": ("plan", "llama-3.1-70b-instruct", *H100, "-tp", "4", "--engine", "vllm"),
    "fit": ("fit", "llama-3.1-70b-instruct", *H100, "--context", "32768", "--concurrency", "64",
            "--find", "gpus"),
    "models": ("models",),
    "devices": ("devices",),
    "blocks": ("blocks", "17", "33", "65", "--block-size", "16", "--block-size", "4"),
    "reconcile": ("reconcile", str(LOG), "--model", "qwen3-14b", "--device", "a100-40gb"),
    "workbook": ("workbook", "llama-3.1-8b", "--device", "40GiB", "--context", "4096"),
    "simulate": ("simulate", "llama-3.1-8b", *H100, "WORKLOAD", "--policy", "static",
                 "--policy", "continuous", "--policy", "chunked-prefill", *SLO),
    "sweep": ("sweep", "llama-3.1-8b", *H100, "WORKLOAD", *SLO),
    "cost": ("cost", "llama-3.1-8b", *H100, "WORKLOAD", "--slo-ttft", "500ms", "--slo-tpot",
             "50ms"),
    "speculate": ("speculate", "llama-3.1-8b", *H100, "--draft", "llama-3.2-1b-instruct"),
    "search": ("search", "llama-3.1-8b", "WORKLOAD", "--rate", "4", "--slo-ttft", "1s",
               "--slo-tpot", "50ms", "--devices", "h100-80gb,h200", "--max-gpus", "2"),
    "verify": ("verify", "tiny-llama", "--device", "cpu"),
    "prefix": ("prefix", str(ROOT / "workloads" / "prefix.jsonl"), "--model", "llama-3.1-8b",
               "--device", "l4"),
    "pack": ("pack", str(ROOT / "docs" / "packs" / "default-utilization.yaml")),
    "diff": ("diff", "llama-3.1-8b", *H100, "--engine", "vllm==0.19", "--against",
             "vllm==0.32"),
}
# more tables than the examples draw: engine ledgers with long labels, closed loops, more
# percentiles, disaggregated pools, a shared prefix
MORE = [
    ("plan", "deepseek-v3.2", "--device", "h200", "-tp", "8", "--engine", "vllm"),
    ("plan", "qwen2.5-7b", "--device", "l40s-48gb", "--lengths", "512,2048,8192,8192,30000"),
    ("plan", "llama-3.1-70b-instruct", *H100, "-tp", "2", "-pp", "2", "--engine", "vllm"),
    ("sweep", "llama-3.1-8b", *H100, "WORKLOAD", "--concurrency", "8", "--slo-ttft", "500ms"),
    ("simulate", "llama-3.1-70b-instruct", *H100, "-tp", "4", "WORKLOAD", "--concurrency",
     "32", "--percentiles", "50,90,99,99.9"),
    ("simulate", "llama-3.1-8b", *H100, "WORKLOAD", "--disaggregate", "1:1"),
    ("speculate", "llama-3.1-8b", *H100, "--draft", "llama-3.2-1b-instruct", "--acceptance",
     "0.9"),
    ("blocks", "1", "2", "3", "100000000", "--block-size", "16", "--shared-prefix", "1"),
]
# serve runs until stopped and load needs a server: tests/serve/test_load_columns.py
NOT_HERE = {"serve", "load"}
CUT_NUMBER = re.compile(r"\d[\d,.]*…|…[\d,.]*\d")
CUT_OPTION = re.compile(r"--[\w-]*…")


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("w") / "w.yaml"
    path.write_text(CHAT.replace("num_requests: 2000", "num_requests: 300"))
    return path


def cuts(text: str) -> list[str]:
    """The lines where a number or an option name ends or starts in an ellipsis."""
    return [line for line in text.splitlines()
            if CUT_NUMBER.search(line) or CUT_OPTION.search(line)]


def table_lines_past(text: str, width: int) -> list[str]:
    return [line for line in text.splitlines()
            if line[:1] in "┏┃┡│├└" and len(line) > width]


def test_every_command_has_an_example_here() -> None:
    assert set(EXAMPLES) | NOT_HERE == set(COMMANDS)


def _check(example: tuple[str, ...], workload: Path, width: int, tmp_path: Path) -> None:
    args = [("--workload" if a == "WORKLOAD" else a) for a in example]
    if "WORKLOAD" in example:
        args.insert(args.index("--workload") + 1, str(workload))
    if example[0] == "workbook":
        args += ["-o", str(tmp_path / "w.xlsx")]
    result = CliRunner().invoke(app, args, env={"COLUMNS": str(width)})
    assert result.exit_code in (0, 1), result.output
    out = result.stdout
    assert "…" not in out, out
    assert table_lines_past(out, width) == [], out


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_main_example_cuts_nothing(tmp_path, workload, name: str, width: int) -> None:
    _check(EXAMPLES[name], workload, width, tmp_path)


@pytest.mark.parametrize("example", MORE, ids=lambda e: " ".join(e[:2]))
def test_more_tables_cut_nothing_at_80_columns(tmp_path, workload, example) -> None:
    _check(example, workload, 80, tmp_path)


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_cuts_no_number(name: str, width: int) -> None:
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    assert [line for line in result.stdout.splitlines() if CUT_NUMBER.search(line)] == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_cuts_no_option_name_at_80_columns(name: str) -> None:
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "80"})
    assert [line for line in result.stdout.splitlines() if CUT_OPTION.search(line)] == []
    assert "…" not in result.stdout  # a long help word folds; nothing ends in an ellipsis
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_help_prose_reflows_to_the_terminal() -> None:
    """A docstring's source line breaks do not survive into --help: at 200 columns the
    simulate description's first sentence is one line, and its examples keep their lines."""
    wide = CliRunner().invoke(app, ["simulate", "--help"], env={"COLUMNS": "200"}).stdout
    assert "The KV pool is what the memory ledger leaves after weights, runtime peak and " \
           "safety; iteration time" in wide
    assert "\n Examples:" in wide
    assert re.search(r"--input-len 1024 \\ *\n +--output-len 128 ", wide)


def test_a_sentence_ending_in_example_colon_is_not_cut_as_a_heading() -> None:
    """'Examples:' alone after a sentence keeps its own line (fit), but the last words of a
    sentence that runs on ('... with its 95 %' / 'interval. Example:') join it (sweep)."""
    def wide(name: str) -> str:
        return CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"}).stdout

    assert "bisected to 2 %, with its 95 % interval. Example:" in wide("sweep")
    assert "reconciles every ledger line (docs/verify.md). Examples:" in wide("verify")
    assert "binds.\n\n Examples:" in re.sub(r" +\n", "\n", wide("fit"))  # its own line,
    # after the blank line every command's help puts before its examples


def test_a_table_too_wide_says_what_it_left_out() -> None:
    result = CliRunner().invoke(app, ["models"], env={"COLUMNS": "80"})
    assert "left out at 80 columns: type, attention (see --json)" in result.stdout
    assert "68.62 KiB" in result.stdout  # DeepSeek-V3's KV/token, whole
    wide = CliRunner().invoke(app, ["models"], env={"COLUMNS": "200"}).stdout
    assert "left out" not in wide and "attention" in wide


def test_cuts_finds_what_it_is_for() -> None:
    assert cuts("│ 12,1… │") and cuts("goodp… 1…") and cuts("--max-num-batched…")
    assert not cuts("and so on… the end") and not cuts("12,127 ms")


@pytest.mark.parametrize("log, args", [
    ("v1_llama31_8b_h100_planner", ("--model", "llama-3.1-8b")),
    ("v1_qwen25_72b_2xh100_planner", ("--model", str(ROOT / "tests" / "fixtures" / "configs"
                                                     / "Qwen--Qwen2.5-72B-Instruct"), "-tp", "2")),
])
def test_reconcile_at_80_columns_keeps_every_number_on_one_line(log, args) -> None:
    """The table's figures (GPU blocks, KV tokens) and its headers are never split over
    two lines; the advice that does not fit goes under the table, none of it lost."""
    path = str(ROOT / "tests" / "fixtures" / "vllm_logs" / f"{log}.log")
    report = json.loads(CliRunner().invoke(app, ["reconcile", path, *args, "--json"]).stdout)
    out = CliRunner().invoke(app, ["reconcile", path, *args], env={"COLUMNS": "80"}).stdout
    table = [line for line in out.splitlines() if line[:1] in "┃│"]
    assert any(all(h in line for h in ("predicted", "logged", "residual")) for line in table)
    for row in report["rows"]:
        if row["unit"] in ("tokens", "blocks"):
            for key in ("predicted", "logged"):
                assert any(f" {row[key]:,} " in line for line in table), (row, out)
        assert row["advice"].split()[0] in out
    assert max(len(line) for line in table) <= 80


def _help_text_start(line: str) -> int | None:
    """Where the help column starts on an options row ('│ --name  TYPE  Help...'), or None."""
    found = re.match(r"│ [ *]{0,3}(-\S+(?:[ ,]-\S+)*)\s+(?:[A-Z]+\s+)?", line)
    return found.end() if found and line[found.end():].strip("│ ") else None


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_leaves_its_text_room_at_80_columns(name: str) -> None:
    """A flag beside its --no- form (--compare-simulate --no-compare-simulate) or its aliases
    (--tensor-parallel-size,--tp -tp) pushed the help into 20-28 columns, a word or two a
    line; the names are stacked instead, leaving the help at least MIN_HELP_WIDTH."""
    from servecap.cli.help_width import MIN_HELP_WIDTH

    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "80"})
    starts = [_help_text_start(line) for line in result.stdout.splitlines()]
    narrow = [s for s in starts if s is not None and 79 - s < MIN_HELP_WIDTH - 2]
    assert narrow == [], [line for line, s in zip(result.stdout.splitlines(), starts,
                                                  strict=True) if s in narrow]
