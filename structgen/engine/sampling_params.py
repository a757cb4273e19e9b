"""Per-request sampling parameters, validated when built.

Owns only the description of how one request samples and when it stops; the sampler
(`sampler.py`) and the detokenizer (`detokenizer.py`) read it. Bad values raise
`InvalidParameterError` naming the parameter, so a server can answer 400.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from structgen.errors import StructgenError


class InvalidParameterError(StructgenError):
    """A sampling or engine parameter outside its allowed range; `param` names it."""

    def __init__(self, param: str, message: str):
        self.param = param
        super().__init__(f"invalid value for {param!r}: {message}")


@dataclass
class SamplingParams:
    """How one request samples and when it stops.

    temperature 0 means greedy. top_k <= 0 and top_p == 1 and min_p == 0 disable those
    filters. `logprobs=None` returns no log-probabilities; `logprobs=k` returns the sampled
    token's log-probability plus the k most likely alternatives (k may be 0).
    Stop strings may span token boundaries; the text returned never contains them unless
    `include_stop_str_in_output`. `ignore_eos` keeps decoding past EOS (for benchmarks).
    """

    max_tokens: int = 16
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    logprobs: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True

    MAX_LOGPROBS = 20

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = list(self.stop or [])
        self.stop_token_ids = list(self.stop_token_ids or [])
        _check_int("max_tokens", self.max_tokens, minimum=1)
        _check_float("temperature", self.temperature, 0.0, 100.0)
        _check_int("top_k", self.top_k, minimum=-1)
        _check_float("top_p", self.top_p, 0.0, 1.0)
        if self.top_p == 0.0:
            raise InvalidParameterError("top_p", "must be > 0 (use temperature=0 for greedy)")
        _check_float("min_p", self.min_p, 0.0, 1.0)
        _check_float("frequency_penalty", self.frequency_penalty, -2.0, 2.0)
        _check_float("presence_penalty", self.presence_penalty, -2.0, 2.0)
        if self.seed is not None:
            _check_int("seed", self.seed, minimum=-(2**63))
        if self.logprobs is not None:
            _check_int("logprobs", self.logprobs, minimum=0, maximum=self.MAX_LOGPROBS)
        for s in self.stop:
            if not isinstance(s, str) or not s:
                raise InvalidParameterError("stop", "stop strings must be non-empty strings")
        for t in self.stop_token_ids:
            _check_int("stop_token_ids", t, minimum=0)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def has_penalties(self) -> bool:
        return self.frequency_penalty != 0.0 or self.presence_penalty != 0.0


def _check_int(name: str, value: object, minimum: int | None = None, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(name, f"expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise InvalidParameterError(name, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidParameterError(name, f"must be <= {maximum}, got {value}")


def _check_float(name: str, value: object, lo: float, hi: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InvalidParameterError(name, f"expected a number, got {value!r}")
    if not lo <= value <= hi:
        raise InvalidParameterError(name, f"must be between {lo} and {hi}, got {value}")
