"""Objects a process makes once and shares among its threads: a rate limit's store, a pause.

``functools.cache`` does not promise that: threads that miss at the same moment each run the
function, and each keeps what its own call made. For an object that holds state the state is
split: the web's first requests, arriving at once, counted their rate limit in stores that no
later request asks (seven requests past a limit of 700 in ``tests/api/test_memory_rate_limit.py``).
"""

import threading
from collections.abc import Callable, Hashable
from functools import update_wrapper
from typing import Generic, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class OncePerProcess(Generic[P, T]):
    """``make(...)`` run once per distinct (hashable) arguments in this process, whichever threads ask.

    For module-level functions: an instance does not bind as a method would.
    """

    def __init__(self, make: Callable[P, T]) -> None:
        self._make = make
        self._made: dict[Hashable, T] = {}
        self._lock = threading.Lock()
        update_wrapper(self, make)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> T:
        key = (args, tuple(sorted(kwargs.items()))) if kwargs else args
        try:
            return self._made[key]  # made already: read without the lock (a dict lookup is atomic)
        except KeyError:
            pass
        # Made under the lock, checked again in it: the thread that lost the race takes the winner's.
        # A maker that raises leaves nothing behind: the next call makes it afresh.
        with self._lock:
            if key not in self._made:
                self._made[key] = self._make(*args, **kwargs)
            return self._made[key]

    def cache_clear(self) -> None:
        with self._lock:
            self._made.clear()
