"""The config layer's building blocks (cheems.settings): one InputError naming the key, in code and in files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
from pydantic import model_validator

from cheems.errors import InputError
from cheems.settings import Flag, Number, Settings, Text, TextList, Whole, invalid, merged, one_of, rule
from cheems.yamlfile import load_yaml_model


class Part(Settings):
    size: Annotated[Whole, rule(lambda n: n >= 1, "must be >= 1, got {value}", "a size counts from 1")] = 1


class Sample(Settings):
    name: Text
    kind: Annotated[Text, one_of(("a", "b"), "kind")] = "a"
    files: TextList = []
    rate: Number = 0.5
    on: Flag = False
    plain: float = 1.0
    part: Part = Part()

    @model_validator(mode="after")
    def _named(self) -> Sample:
        if self.name == "x" and self.on:
            raise invalid("cannot be on for x", "switch it off", at="on")
        return self


@pytest.mark.parametrize(
    ("values", "field", "says"),
    [
        ({"name": "n", "kind": "c"}, "kind", "unknown kind 'c' — use one of a, b"),
        ({"name": 5}, "name", "expected a string, got 5"),
        ({"name": "n", "files": 5}, "files", "expected a list, got 5"),
        ({"name": "n", "rate": "fast"}, "rate", "expected a finite number, got 'fast'"),
        ({"name": "n", "rate": float("nan")}, "rate", "expected a finite number, got nan"),
        ({"name": "n", "rate": True}, "rate", "expected a finite number, got True"),
        ({"name": "n", "on": 1}, "on", "expected true or false, got 1"),
        ({"name": "n", "plain": float("inf")}, "plain", "inf is not a finite number — write a finite number"),
        ({"name": "n", "part": {"size": 2.5}}, "part.size", "expected a whole number, got 2.5"),
        ({"name": "n", "part": {"size": 0}}, "part.size", "must be >= 1, got 0 — a size counts from 1"),
        ({"name": "x", "on": True}, "on", "cannot be on for x — switch it off"),
        ({"name": "n", "nme": 1}, "nme", "unknown key 'nme' — known keys: name, kind"),
        ({}, "name", "is missing"),
    ],
)
def test_building_with_a_bad_value_is_one_input_error_naming_the_key(values, field, says):
    with pytest.raises(InputError) as e:
        Sample(**values)
    assert e.value.field == field and says in str(e.value), str(e.value)


def test_lax_values_that_mean_what_they_say_are_taken():
    made = Sample("n", files=Path("a.jsonl"), rate="5e-6", on="yes", part={"size": "3"})
    assert (made.name, made.files, made.rate, made.on, made.part.size) == ("n", ["a.jsonl"], 5e-6, True, 3)
    with pytest.raises(TypeError, match="two values for 'name'"):
        Sample("n", name="m")


def test_a_nested_error_in_a_file_is_located_at_its_line(tmp_path: Path):
    path = tmp_path / "w.yaml"
    path.write_text("name: n\npart:\n  size: 0\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_yaml_model(path, Sample)
    assert str(e.value).startswith(f"{path}:3: field 'part.size': must be >= 1, got 0")
    path.write_text("name: x\non: true\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"w\.yaml:2: field 'on': cannot be on for x"):
        load_yaml_model(path, Sample)


def test_merged_goes_key_by_key_into_mappings():
    assert merged({"a": 1, "m": {"x": 1, "y": 2}}, {"m": {"y": 3}}, {"b": 2}) == {"a": 1, "b": 2, "m": {"x": 1, "y": 3}}
    assert merged({"m": {"x": 1}}, {"m": True}, {"m": {"y": 2}}) == {"m": {"y": 2}}  # a value replaces a mapping
