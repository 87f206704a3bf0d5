"""The two building blocks every curriculum model shares (models.py and
quiz_models.py both import them from here, so neither imports the other)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Text(_Model):
    """One human-language string in both languages (seed text stays Chinese)."""

    zh: str = Field(min_length=1)
    en: str = Field(min_length=1)

    def get(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en

    def __str__(self) -> str:
        return self.en
