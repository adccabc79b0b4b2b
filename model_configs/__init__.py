"""The bundled model library (one YAML per model) and the loaders for YAML, config.json and
model directories."""

from .loader import LoadedModel, bundled_models, load_model

__all__ = ["LoadedModel", "bundled_models", "load_model"]
