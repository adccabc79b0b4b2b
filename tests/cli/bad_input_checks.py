"""What the bad-input tests share: the small model they break and the one-line error they
expect (exit 2, one `servecap: error:` line naming each needle, never a traceback)."""

BASE = ("name: m\nsource: test\nmodel_type: llama\nhidden_size: 64\nintermediate_size: 128\n"
        "vocab_size: 100\nnum_attention_heads: 4\nnum_key_value_heads: 2\n")
LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "vocab_size": 100}


def one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("servecap: error:") and "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def model_yaml(tmp_path, text: str):
    path = tmp_path / "model.yaml"
    path.write_text(text)
    return path
