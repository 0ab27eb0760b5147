"""Library chatter kept out of normal output, in one place.

Loading a model makes transformers print a "LOAD REPORT" table (a fresh reward head is
"MISSING"), progress bars and hub or tokenizer warnings. Every model and tokenizer load in
cheems goes through :func:`quiet_libraries`, and says what matters in one line of its own
(a :class:`cheems.errors.CheemsWarning`, or the trainer's "new reward head initialised").
``set_verbose(True)`` (``cheems --verbose``) lets the libraries' own output through.

Nothing here imports torch or transformers until a block is entered.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_verbose = False
HEAD_MODULES = ("score", "classifier")  # the one-score head of *ForSequenceClassification models


def set_verbose(on: bool) -> None:
    """Let the libraries' own messages, warnings and progress bars through (``on``) or not."""
    global _verbose
    _verbose = on


def is_verbose() -> bool:
    """Whether the libraries' own output is shown."""
    return _verbose


@contextmanager
def quiet_libraries() -> Iterator[None]:
    """Inside: transformers and the hub client log errors only (not the hub's retries), no library progress bars,
    no Python warnings (unless verbose)."""
    if _verbose:
        yield
        return
    from huggingface_hub.utils import logging as hub_logging
    from transformers.utils import logging as hf_logging

    level, hub_level = hf_logging.get_verbosity(), hub_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hub_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            hf_logging.set_verbosity(level)
            hub_logging.set_verbosity(hub_level)
            if bars:
                hf_logging.enable_progress_bar()


def load_pretrained(auto_class: Any, location: str, **kwargs: Any) -> tuple[Any, list[str], list[str]]:
    """``auto_class.from_pretrained(location, **kwargs)`` without the chatter.

    Returns the model, the weights of its head and those of the rest that the checkpoint lacks
    (they start random): the facts transformers' load report tells, for the caller to say in
    its own words.
    """
    with quiet_libraries():
        model, info = auto_class.from_pretrained(location, output_loading_info=True, **kwargs)
    missing = sorted(info.get("missing_keys") or ())
    head = [k for k in missing if k.split(".")[0] in HEAD_MODULES]
    return model, head, [k for k in missing if k not in head]


def missing_weights_text(location: str, missing: list[str]) -> str:
    """One line about backbone weights a checkpoint lacks (first few named)."""
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return f"{len(missing)} weight(s) of {location} are not in its checkpoint and start random: {shown}"
