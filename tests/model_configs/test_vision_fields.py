"""The vision fields the encoder budget reads from the new families' config files: Llama-4's
tile and pixel shuffle, InternVL's wrapper tile counts and llm_config, GLM-4.5V's merge sizes;
bad values refused in one line naming the field."""

import json
from pathlib import Path

import pytest

from servecap.ledger.errors import SpecError
from servecap.model_configs.loader import load_model
from servecap.model_configs.vision_fields import vision_spec

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def _config(name: str) -> dict:
    return json.loads((CONFIGS / name / "config.json").read_text())


def test_llama4_reads_tile_shuffle_and_max_patches():
    data = _config("meta-llama--Llama-4-Scout-17B-16E-Instruct")
    vision = vision_spec(data)
    assert (vision.image_size, vision.tokens_per_image, vision.max_tiles) == (336, 144, 16)
    assert vision.out_width == data["text_config"]["hidden_size"] == 5120
    data["image_processor_config"]["max_patches"] = 4
    assert vision_spec(data).max_tiles == 4


def test_internvl_reads_the_wrapper_and_plans_llm_config():
    data = _config("OpenGVLab--InternVL3-1B")
    vision = vision_spec(data)
    assert (vision.tokens_per_image, vision.max_tiles, vision.thumbnail) == (256, 12, True)
    assert (vision.out_width, vision.modalities) == (896, ("image", "video"))
    loaded = load_model(str(CONFIGS / "OpenGVLab--InternVL3-1B" / "config.json"))
    assert loaded.spec.vision == vision
    assert any("llm_config planned" in n for n in loaded.spec.notes)
    data["llm_config"]["model_type"] = "internlm2"  # no <|video_pad|>: images only
    assert vision_spec(data).modalities == ("image",)


def test_glm45v_reads_the_merge_and_temporal_patch():
    vision = vision_spec(_config("zai-org--GLM-4.5V"))
    assert (vision.patch_size, vision.merge_size, vision.temporal_patch_size) == (14, 2, 2)
    assert vision.out_width == vision.intermediate_size == 4096  # the blocks' MLP width


@pytest.mark.parametrize(("name", "edit", "needle"), [
    ("OpenGVLab--InternVL3-1B", {"downsample_ratio": 0}, "downsample_ratio"),
    ("OpenGVLab--InternVL3-1B", {"max_dynamic_patch": "12"}, "config.max_dynamic_patch"),
    ("meta-llama--Llama-4-Scout-17B-16E-Instruct", {"vision_config": {"pixel_shuffle_ratio": 2}},
     "vision_config.pixel_shuffle_ratio"),
])
def test_bad_fields_are_one_line_errors(name, edit, needle):
    data = _config(name)
    for key, value in edit.items():
        if isinstance(value, dict):
            data[key].update(value)
        else:
            data[key] = value
    with pytest.raises(SpecError) as error:
        vision_spec(data)
    assert needle in str(error.value) and "\n" not in str(error.value)
