"""What the client tests ask for: a City as a pydantic model (no additionalProperties,
as pydantic writes it), a model whose schema structgen refuses, and the prompts."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class City(BaseModel):
    city: str = Field(max_length=20)
    country: str = Field(max_length=20)
    population: int = Field(ge=0)


class Refused(BaseModel):
    """unevaluatedProperties is not enforced by structgen, so this schema gets a 400."""

    model_config = ConfigDict(json_schema_extra={"unevaluatedProperties": False})
    city: str


PROMPT = "Tell me about Paris."
# JSON modes send no schema, only a prompt: the model needs to see the shape
JSON_PROMPT = 'Reply in JSON like {"city": "Rome", "country": "Italy", "population": 2800000}. Tell me about Paris.'
MAX_TOKENS = 80
SHORT = 12  # cuts every reply off inside its JSON
