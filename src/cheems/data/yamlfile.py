"""YAML (and JSON) config files, with errors that name file, line and key; pydantic validation.

The one reader of every config file in cheems: training configs, curate recipes and filter
settings, judge criteria maps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from cheems.errors import InputError

M = TypeVar("M", bound=BaseModel)
KeyPath = tuple[str | int, ...]


def _key_lines(node: yaml.Node, prefix: KeyPath, lines: dict[KeyPath, int], source: str) -> None:
    """Record the 1-based line of every mapping key and sequence item under ``node``.

    A key given twice in one mapping is an error: YAML loaders silently keep the last one.
    """
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            path = (*prefix, key_node.value)
            line = key_node.start_mark.line + 1
            if path in lines:
                raise InputError(f"key '{key_node.value}' given twice (first on line {lines[path]})", path=source,
                                 line=line, field=".".join(map(str, path)), hint="keep one entry")
            lines[path] = line
            _key_lines(value_node, path, lines, source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*prefix, i)] = item.start_mark.line + 1
            _key_lines(item, (*prefix, i), lines, source)


def read_yaml_mapping(path: str | Path, what: str = "config", *, allow_empty: bool = False,
                      ) -> tuple[dict[str, Any], dict[KeyPath, int]]:
    """The mapping in a YAML (or ``.json``) file and the line of each key.

    InputError, located, when the file is missing, unreadable, not valid YAML/JSON, has a key
    twice, is empty (unless ``allow_empty``: then ``{}``) or is not a mapping.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"no such {what} file", path=str(p), hint="check the path")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the {what} file: {e}", path=str(p), hint="save it as UTF-8") from None
    if p.suffix.lower() == ".json":
        try:
            json.loads(text)  # JSON's own messages for JSON files; YAML (a superset) then locates the keys
        except json.JSONDecodeError as e:
            raise InputError(f"invalid JSON: {e.msg}", path=str(p), line=e.lineno, hint="fix the JSON syntax") from None
    try:
        data = yaml.safe_load(text)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(f"invalid YAML: {getattr(e, 'problem', None) or e}", path=str(p),
                         line=None if mark is None else mark.line + 1, hint="fix the syntax") from None
    if data is None and allow_empty:
        return {}, {}
    if data is None:
        raise InputError(f"the {what} file is empty", path=str(p), line=1, hint="write key: value lines")
    if not isinstance(data, dict):
        raise InputError(f"a {what} must be a YAML mapping of key: value (expected a mapping, got a "
                         f"{type(data).__name__})", path=str(p), line=1)
    lines: dict[KeyPath, int] = {}
    _key_lines(node, (), lines, str(p))
    return data, lines


def line_of(lines: dict[KeyPath, int], loc: KeyPath) -> int | None:
    """The line of the deepest known key along ``loc`` (None when not even the first is known)."""
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def located_validation_error(e: ValidationError, model: type[BaseModel], path: str, lines: dict[KeyPath, int]) -> InputError:
    """pydantic's first error as one located line; an unknown key lists the allowed ones."""
    first = e.errors()[0]
    loc = tuple(first["loc"])
    field = ".".join(str(x) for x in loc) or None
    line = line_of(lines, loc)
    if first["type"] == "extra_forbidden":
        allowed = _allowed_keys(model, loc[:-1])
        hint = f"known keys: {', '.join(allowed)}" if allowed else None
        return InputError(f"unknown key '{loc[-1]}'", path=path, line=line, field=field, hint=hint)
    if first["type"] == "missing":
        return InputError("is missing", path=path, line=line, field=field, hint="add it")
    return InputError(first["msg"].removeprefix("Value error, "), path=path, line=line, field=field)


def _allowed_keys(model: type[BaseModel], parent: KeyPath) -> list[str]:
    """Field names of the (nested) model at ``parent``; empty when it cannot be followed."""
    current: Any = model
    for key in parent:
        fields = getattr(current, "model_fields", None)
        if not fields or key not in fields:
            return []
        annotation = fields[key].annotation
        current = next((a for a in getattr(annotation, "__args__", (annotation,)) if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))


def load_yaml_model(path: str | Path, model: type[M], what: str = "config") -> tuple[M, dict[KeyPath, int]]:
    """Validate a YAML file against ``model``; errors name the file, the line and the key."""
    data, lines = read_yaml_mapping(path, what)
    try:
        return model.model_validate(data), lines
    except ValidationError as e:
        raise located_validation_error(e, model, str(path), lines) from None
