"""The Scenario as a library: a file round-trips to the same frozen value, and the plan and
the simulation it describes need no CLI."""

from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.ledger.errors import SpecError
from servecap.scenario import deployment, simulation
from servecap.scenario.file import dump, from_dict, load_scenario, save_scenario, to_dict
from servecap.scenario.spec import (
    DEFAULT,
    Device,
    Model,
    Scenario,
    Scheduler,
    Workload,
    get,
    with_values,
)
from servecap.scenario.spec import paths as scenario_paths

VALUES = st.fixed_dictionaries({}, optional={
    "scheduler.max_model_len": st.integers(1, 2**20),
    "memory.gpu_memory_utilization": st.floats(0.01, 1.0),
    "device.name": st.sampled_from(["h100-80gb", "40GiB", "l4-24gb"]),
    "load.lengths": st.lists(st.integers(1, 10**6), min_size=1, max_size=5).map(tuple),
    "simulator.policies": st.lists(st.sampled_from(["static", "continuous"]), min_size=1,
                                   max_size=3).map(tuple),
    "memory.safety": st.one_of(st.just("10%"), st.integers(0, 2**40)),
    "parallel.enable_expert_parallel": st.booleans(),
})


@settings(max_examples=60, deadline=None)
@given(VALUES)
def test_a_scenario_written_and_read_back_is_the_same_value(values):
    scenario = with_values(DEFAULT, values)
    assert from_dict(to_dict(scenario)) == scenario
    for path, value in values.items():
        assert get(scenario, path) == value


def test_the_file_spells_every_field_and_reads_back(tmp_path):
    scenario = Scenario(model=Model("llama-3.1-8b"), device=Device("h100-80gb"),
                        scheduler=Scheduler(max_model_len=8192))
    target = tmp_path / "s.yaml"
    save_scenario(scenario, target)
    assert load_scenario(target) == scenario
    text = dump(scenario)
    for path in scenario_paths():
        assert f"  {path.split('.')[1]}:" in text


def test_a_whole_number_is_a_float_but_a_string_is_not():
    assert from_dict({"workload": {"rate": 8}}).workload.rate == 8.0
    for bad in ({"workload": {"rate": "8"}}, {"workload": {"rate": True}}):
        try:
            from_dict(bad, "s.yaml")
        except SpecError as exc:
            assert exc.line().startswith("s.yaml: workload.rate = ")
        else:
            raise AssertionError(f"{bad} was accepted")


def test_the_library_plans_and_simulates_without_the_cli():
    scenario = Scenario(model=Model("teaching-7b"))  # the file's serving defaults: seed 000
    result = deployment.plan(scenario)
    assert result.deployment.plan.memory_ceiling_requests == 39  # seed 000's 7B case
    fast = with_values(scenario, {"device.name": "h100-80gb"})
    fast = Scenario(**{**fast.__dict__, "workload": Workload(input_len=256, output_len=16,
                                                              num_requests=50, rate=2.0)})
    setup = simulation.setup(fast)
    assert setup.num_blocks > 0 and len(setup.requests) == 50
    assert setup.configs[0].block_size_tokens == setup.plan.serve.block_size_tokens
