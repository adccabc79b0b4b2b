"""servecap's runtime behind an OpenAI-compatible HTTP API (FastAPI + uvicorn)."""
