"""The decode engine: paged KV cache, scheduler, model runner, sampler (see DESIGN.md "Engine").

`Engine`, `SamplingParams` and `RequestOutput` are the public names; they are imported
lazily so that `import structgen.engine` stays cheap.
"""

_LAZY = {
    "Engine": "structgen.engine.engine",
    "PromptTooLongError": "structgen.engine.engine",
    "SamplingParams": "structgen.engine.sampling_params",
    "InvalidParameterError": "structgen.engine.sampling_params",
    "RequestOutput": "structgen.engine.request",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'structgen.engine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
