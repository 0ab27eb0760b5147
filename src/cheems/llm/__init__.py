"""Clients of chat models: an OpenAI-compatible endpoint over HTTP (the one HTTP client of cheems, which the reward
server scorers use too) or a local Hugging Face causal LM; and ``generate_records``, N sampled responses per prompt
(a candidate pool for best-of-N), cached and resumable.

Nothing here imports httpx, torch or transformers at import time.
"""

from cheems.runtime import lazy_exports

_EXPORTS = {
    "ChatClient": "client",
    "EndpointSettings": "endpoint",
    "GenerateSettings": "sampling",
    "Outcome": "endpoint",
    "RequestBudget": "endpoint",
    "generate_files": "sampling",
    "generate_records": "sampling",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
