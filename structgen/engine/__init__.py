"""The decode engine: paged KV cache, scheduler, model runner, sampler (see DESIGN.md "Engine").

`Engine`, `EngineConfig`, `SamplingParams` and `RequestOutput` are the public names; they are imported
lazily so that `import structgen.engine` stays cheap.
"""

from structgen.lazy import lazy_attributes

_LAZY = {
    "Engine": "structgen.engine.engine",
    "EngineConfig": "structgen.engine.config",
    "PromptTooLongError": "structgen.engine.engine",
    "SamplingParams": "structgen.engine.sampling_params",
    "InvalidParameterError": "structgen.engine.sampling_params",
    "RequestOutput": "structgen.engine.request",
}

__all__ = list(_LAZY)


__getattr__ = lazy_attributes(__name__, _LAZY)
