"""diff's pool section says its units: 'KV pool 51.27' (GiB, unsaid: the section is not the
ledger's GiB one), 'GPU KV cache size 420,032' (tokens) and 'maximum concurrency 51.27' (vLLM
prints it as 51.27x) were bare numbers."""

def test_the_pool_rows_name_their_units(run, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    result = run("diff", "llama-3.1-8b", "--device", "h100-80gb", "--context", "8192",
                 "--engine", "vllm==0.11", "--against", "vllm==0.20")
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:5]]
            for line in result.stdout.splitlines() if line.startswith("│")}
    assert rows["KV pool (GiB)"] == ["51.27", "55.09", "+3.82"]
    assert rows["GPU KV cache size (tokens)"] == ["420,032", "451,312", "+31,280"]
    assert rows["block size (tokens)"][:2] == ["16", "16"]
    assert rows["maximum concurrency"] == ["51.27x", "55.09x", "+3.82x"]
    assert rows["weights"][:2] == ["14.96", "14.96"]  # the ledger section: GiB in its heading
