"""One description of a deployment question (a Scenario) and what is derived from it: the
plan's deployment, the simulator's pool and step model, the verification's inputs."""
