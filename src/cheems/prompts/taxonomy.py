"""The prompt taxonomy: main categories and their subcategories, read from an editable YAML file.

cheems ships the Cheems paper's eight main categories (理解, 知识, 推理, 数学, 代码, 写作, 安全, 复杂指令) with
subcategories in ``cheems/assets/taxonomy.yaml`` (:func:`default_taxonomy_path`); the file's comments name
where each subcategory list comes from. A team edits a copy and passes it as ``--taxonomy``. A record's
category path in the taxonomy is ``[main, sub]``; an LLM names it as ``main/sub``.
"""

from __future__ import annotations

import unicodedata
from importlib.resources import files
from pathlib import Path
from typing import Annotated

from pydantic import Field, model_validator

from cheems.settings import Settings, invalid, rule
from cheems.yamlfile import load_yaml_model

SEPARATOR = "/"  # between the main category and the subcategory in a path written as one string


def _nameable(name: str) -> bool:
    """Whether an answer can name ``name``: no '/' (nor a form of it, such as the full-width '／'), no line break and
    no control or invisible character (zero-width space, joiner, direction mark: names differing only by one
    look the same), and no white space around it."""
    if SEPARATOR in unicodedata.normalize("NFKC", name) or name != name.strip():
        return False
    return not any(unicodedata.category(c) in ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp") for c in name)


def same_name(name: str) -> str:
    """What two names must not share: their NFKC form (``ＡＩ`` and ``AI`` look alike to people and to an LLM)."""
    return unicodedata.normalize("NFKC", name)


Name = Annotated[
    str,
    rule(lambda name: bool(name.strip()), "a category name is empty", "write the name, or remove the entry"),
    rule(
        _nameable,
        "{value!r}: a category name may not hold '/' (or '／'), a line break or an invisible or control character, "
        "nor start or end with white space",
        "'/' separates the main category from the subcategory in a path, and an answer must name the category "
        "exactly; rename it",
    ),
]


class MainCategory(Settings):
    """One main category: its name, what belongs in it (shown to the LLM that assigns categories), its subcategories."""

    name: Name = Field(description="The main category, e.g. 数学.")
    description: str = Field("", description="What belongs here, in a sentence (shown to the LLM).")
    subcategories: list[Name] = Field(min_length=1, description="The subcategories, e.g. [代数, 几何].")

    @model_validator(mode="after")
    def _unique_subcategories(self) -> MainCategory:
        seen: set[str] = set()
        for index, sub in enumerate(self.subcategories):
            if same_name(sub) in seen:
                raise invalid(
                    f"subcategory {sub!r} of {self.name!r} is listed twice", "remove one", ("subcategories", index)
                )
            seen.add(same_name(sub))
        return self


class Taxonomy(Settings):
    """The taxonomy: main categories in order, each with its subcategories (:class:`MainCategory`)."""

    categories: list[MainCategory] = Field(min_length=1, description="The main categories.")

    @model_validator(mode="after")
    def _unique_main(self) -> Taxonomy:
        seen: set[str] = set()
        for index, main in enumerate(self.categories):
            if same_name(main.name) in seen:
                raise invalid(f"main category {main.name!r} is listed twice", "merge the two", ("categories", index))
            seen.add(same_name(main.name))
        return self

    def paths(self) -> list[tuple[str, str]]:
        """Every (main, sub) path, in the file's order."""
        return [(main.name, sub) for main in self.categories for sub in main.subcategories]

    def find(self, text: str) -> tuple[str, str] | None:
        """The path ``text`` names exactly (``main/sub``, white space around either part ignored), else None."""
        main, sep, sub = text.partition(SEPARATOR)
        path = (main.strip(), sub.strip())
        return path if sep and path in set(self.paths()) else None


def default_taxonomy_path() -> Path:
    """The taxonomy shipped with cheems (``cheems/assets/taxonomy.yaml``)."""
    return Path(str(files("cheems") / "assets" / "taxonomy.yaml"))


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """The taxonomy in ``path`` (default: the shipped one); a bad file is one ``InputError`` naming file, line, key."""
    return load_yaml_model(path if path is not None else default_taxonomy_path(), Taxonomy, "taxonomy")[0]
