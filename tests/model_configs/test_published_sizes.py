"""Parameter counts and checkpoint bytes against the figures their publishers state: every
fixture config with a published.json (its SOURCE.md names where the figure was stated) and
every bundled model that states its safetensors total_size. Within 2 %: a count that runs away
(a latent MoE counted at the hidden width) fails here, whatever the formula's own tests say."""

import json
from pathlib import Path

import pytest

from servecap.ledger.arch import active_parameters, count_parameters
from servecap.ledger.weights import weight_bytes
from servecap.model_configs import bundled_models, load_model
from servecap.model_configs.reading import parse_yaml

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
PUBLISHED = sorted(p.parent.name for p in CONFIGS.glob("*/published.json"))
TOTALS = sorted(p.stem for p in bundled_models()
                if "weights_total_size_bytes" in parse_yaml(p.read_text()))
TOLERANCE = 0.02


def _within(got: int, published: int) -> bool:
    return abs(got - published) <= TOLERANCE * published


@pytest.mark.parametrize("name", PUBLISHED)
def test_parameter_count_is_within_2_percent_of_the_published_figure(name: str) -> None:
    published = json.loads((CONFIGS / name / "published.json").read_text())
    spec = load_model(str(CONFIGS / name / "config.json")).spec
    assert _within(count_parameters(spec), published["num_parameters"]), count_parameters(spec)
    assert (CONFIGS / name / "SOURCE.md").read_text().count("Published") == 1


def test_nemotron_3_super_counts_its_experts_at_the_latent_width() -> None:
    """512 experts x 40 MoE layers x (up + down) at 2,688 x 1,024, not x 4,096 hidden: the
    count was 458.6e9 for a 120e9 model (+282 %)."""
    spec = load_model(str(CONFIGS / "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8"
                          / "config.json")).spec
    assert spec.moe.latent_size == 1024
    assert 117.6e9 < count_parameters(spec) < 122.4e9
    assert 11e9 < active_parameters(spec) < 14e9  # "A12B"


@pytest.mark.parametrize("name", TOTALS)
def test_bundled_checkpoint_bytes_are_within_2_percent_of_their_total_size(name: str) -> None:
    loaded = load_model(name)
    stated = parse_yaml((loaded.path).read_text())["weights_total_size_bytes"]
    spec = loaded.spec
    got = weight_bytes(spec, 16, spec.quant)
    assert _within(got.param_bytes + got.metadata_bytes, stated)


def test_some_figures_are_checked() -> None:
    assert "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8" in PUBLISHED and len(TOTALS) >= 2
