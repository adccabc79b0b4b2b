"""Flags that used to be accepted silently, loop without end or overflow: one named line."""

from pathlib import Path

import pytest

CHAT = str(Path(__file__).resolve().parents[2] / "workloads" / "chat.yaml")
H100 = ("--device", "h100-80gb")
DRAFT = ("--draft", "llama-3.2-1b-instruct")


@pytest.mark.parametrize(("args", "needles"), [
    (("cost", "--tokens-per-s", "1e-320", "--json", "--gpu-price", "2"), ("--tokens-per-s",)),
    (("verify", "tiny-llama", "--device", "cpu", "--tensor-parallel-size", "0"),
     ("--tensor-parallel-size = 0",)),
    (("verify", "tiny-llama", "--device", "cpu", "--context", "1000000000"),
     ("--context", "max_position_embeddings (2,048)")),
    (("verify", "tiny-llama", "--device", "cpu", "--output-tokens", "100000"),
     ("--output-tokens", "fewer than the context")),
    (("sweep", "teaching-7b", *H100, "--workload", CHAT, "--num-rates", "1000000"),
     ("--num-rates", "1 to 200")),
    (("sweep", "teaching-7b", *H100, "--workload", CHAT, "--rates", "1,,2"), ("--rates",)),
    (("plan", "teaching-7b", "--shared-prefix", "100000", "--context", "100"),
     ("--shared-prefix", "100 tokens")),
    (("simulate", "teaching-7b", *H100, "--workload", CHAT, "--draft",
      "llama-3.2-1b-instruct", "--speculate-max-batch", "-1"), ("--speculate-max-batch",)),
    (("speculate", "llama-3.1-8b", *H100, "--draft", "llama-3.2-1b-instruct", "--context", "0"),
     ("--context = 0",)),
    (("speculate", "llama-3.1-8b", *H100, "--draft", "llama-3.2-1b-instruct", "--batches",
      "1,,8"), ("--batches",)),
    (("simulate", "teaching-7b", "--device", "80GiB", "--bandwidth", "1e400GB/s", "--flops",
      "990TFLOPS", "--workload", CHAT), ("--bandwidth",)),
    (("cost", "--tokens-per-s", "1000", "--gpu-price", "2", "--api-price", "5e-324", "--json"),
     ("break_even_utilization = inf", "--api-price")),
    (("cost", "--tokens-per-s", "1000", "--api-price", "1e308"), ("= inf",)),
    (("speculate", "llama-3.1-8b", *H100, *DRAFT, "--draft-length", "1000000"),
     ("--draft-length = 1000000", "1..64")),
    (("simulate", "teaching-7b", *H100, "--workload", CHAT, *DRAFT, "--draft-length",
      "1000000"), ("--draft-length",)),
    (("blocks", "17", "33", "--shared-prefix", "100"),
     ("--shared-prefix = 100", "shortest sequence (17 tokens)")),
    (("plan", "teaching-7b", "--lengths", "17,33", "--shared-prefix", "100"),
     ("--shared-prefix = 100", "shortest of --lengths (17 tokens)")),
    (("sweep", "teaching-7b", *H100, "--workload", CHAT, "--rates", ""), ("--rates = ''",)),
    (("verify", "tiny-llama", "--device", "cpu", "--max-num-seqs", "0"),
     ("--max-num-seqs = 0",)),
    # a count given by flag is named as the flag, as --context is (not the ledger's field)
    (("plan", "llama-3.1-8b", *H100, "--concurrency", "0"),
     ("--concurrency = 0: must be a whole number >= 1",)),
    (("plan", "llama-3.1-8b", *H100, "--block-size", "0"), ("--block-size = 0",)),
    (("plan", "teaching-7b", "--concurrency", "70000"),
     ("--concurrency = 70000: at most 65,536 resident requests",)),
    (("fit", "llama-3.1-8b", *H100, "--max-num-batched-tokens", "0"),
     ("--max-num-batched-tokens = 0",)),
    # the context left at the model's default is checked against the prefix as a given one is
    (("plan", "llama-3.1-8b", *H100, "--shared-prefix", "999999999", "--concurrency", "2"),
     ("--shared-prefix = 999999999", "131,072 tokens (max_position_embeddings")),
    # a negative context is the context's error, not the (unset) prefix's
    (("plan", "llama-3.1-8b", *H100, "--context", "-5"),
     ("--context = -5: must be a whole number >= 1",)),
    (("plan", *H100, "--", "vllm", "serve", "llama-3.1-8b", "--max-model-len", "-1"),
     ("vllm serve --max-model-len = '-1': must be a whole number >= 1",)),
    (("blocks", "--", "-1"), ("lengths = '-1': every live length must be >= 1",)),
    (("blocks", "0"), ("lengths = '0': every live length must be >= 1",)),
    (("blocks", "17", "--block-size", "0"), ("--block-size = 0",)),
    (("plan", "llama-3.1-8b", "--device", "0GiB"), ("--device = '0GiB': a device's memory",)),
    (("plan", "llama-3.1-8b", "--device", "0"), ("--device = '0'",)),
    # a value the option's type refuses is shown as typed, as every other error shows it
    (("cost", "--tokens-per-s", "abc", "--gpu-price", "2"), ("--tokens-per-s", "(got 'abc')")),
    (("plan", "teaching-7b", "--concurrency=x"), ("--concurrency", "(got 'x')")),
])
def test_refused_with_one_line(run, args, needles) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("servecap: error:"), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def _workbook_with(tmp_path, run, name: str, value: object) -> Path:
    openpyxl = pytest.importorskip("openpyxl")
    path = tmp_path / "plan.xlsx"
    assert run("plan", "teaching-7b", "--xlsx", path).exit_code == 0
    wb = openpyxl.load_workbook(path)
    for key, text in ((name, value), ("safety_rule", "fraction")):
        sheet, ref = next(iter(wb.defined_names[key].destinations))
        wb[sheet][ref.replace("$", "")].value = text
    wb.save(path)
    return path


@pytest.mark.parametrize(("name", "value"), [("safety_fraction", "abc"),
                                             ("context_tokens", "9" * 5000)])
def test_hostile_workbook_cells(run, tmp_path, name, value) -> None:
    result = run("plan", "--from-workbook", _workbook_with(tmp_path, run, name, value))
    assert result.exit_code == 2 and f"Inputs!{name}" in result.stderr
    assert len(result.stderr) < 400


def test_a_zip_bomb_workbook_is_refused_before_inflating(run, tmp_path) -> None:
    import zipfile

    path = tmp_path / "bomb.xlsx"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", b"<" + b" " * (80 * 2**20))
    assert path.stat().st_size < 2**20
    result = run("plan", "--from-workbook", path)
    assert result.exit_code == 2 and "unzips to" in result.stderr


def test_the_stated_request_maximum_is_enforced(run, tmp_path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(Path(CHAT).read_text().replace("num_requests: 2000",
                                                   "num_requests: 1000001"))
    result = run("simulate", "teaching-7b", *H100, "--workload", path)
    assert result.exit_code == 2 and "at most 1,000,000 requests" in result.stderr


@pytest.mark.parametrize("device", ["40GiB", "h100-80gb"])
def test_verify_says_which_device_reading_it_takes(run, device) -> None:
    result = run("verify", "tiny-llama", "--device", device)
    assert result.exit_code == 2
    assert f"--device-memory {device}" in result.stderr and "where to run" in result.stderr


def test_verify_names_a_violation_once_and_its_cause(run) -> None:
    result = run("verify", "tiny-llama", "--device", "cpu", "--concurrency", "20",
                 "--output-tokens", "4")
    assert result.exit_code == 1
    assert "violated" not in result.stdout.replace("violated", "", 1)  # the column header
    assert result.stderr.count("kv_cache (measured") == 1
    assert "declared 20 > ceiling 15" in result.stderr
