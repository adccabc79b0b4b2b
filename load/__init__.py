"""servecap load: drive any OpenAI-compatible endpoint with a workload and measure it."""
