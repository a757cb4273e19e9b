"""Package attributes imported on first use, so that importing a package stays cheap
(`import structgen` loads neither torch nor the compiler). Owns this one mechanism."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_attributes(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: name -> the module it is imported from on
    first use (then kept on the package, so that the lookup happens once)."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
