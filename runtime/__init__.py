"""The paged-KV runtime and device telemetry: the only place torch is imported."""
