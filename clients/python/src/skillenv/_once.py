"""Work done once per object: a skill uploaded, a component admitted, by one client."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

Key = TypeVar("Key")
Result = TypeVar("Result")


class OncePerInstance(Generic[Key, Result]):
    """Calls `work` once per key object and keeps the result as long as the object lives.

    Concurrent callers with the same object share the one call. A failure is not kept, so a later
    call tries again.
    """

    def __init__(self, work: Callable[[Key], Result]) -> None:
        self._work = work
        self._results: weakref.WeakKeyDictionary[Key, Future[Result]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __call__(self, key: Key) -> Result:
        with self._lock:
            future = self._results.get(key)
            first = future is None
            if future is None:
                future = self._results[key] = Future()
        if first:
            self._run(key, future)
        return future.result()

    def _run(self, key: Key, future: Future[Result]) -> None:
        try:
            future.set_result(self._work(key))
        except Exception as error:
            with self._lock:
                del self._results[key]
            future.set_exception(error)
