"""cheems: build and evaluate Chinese reward models from scratch (Wen et al., 2025)."""

__version__ = "0.1.0"
