"""servecap: plan LLM serving memory and latency, then prove the plan on the device."""

__version__ = "0.1.0"
