"""Process-wide bounded caches (`BoundedCache`) for what a compile derives from hashable
inputs alone and many schemas share (the string bodies of formats and patterns).

Owns: the least-recently-used bound and the lock. Knows nothing of what is cached: the
caller makes a key that holds every input the value depends on, stores only values
that are never changed afterwards, and never stores a failure (errors carry the
pointer of the subschema that raised them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable


class BoundedCache:
    """A mapping that keeps its `maxsize` most recently used entries."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The value stored under `key`, or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
