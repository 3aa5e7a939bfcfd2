"""The worker process that runs programs on the backend under test (see pool.py).

Started as `python -m tile_conformance.worker BACKEND` (the backend loaded
before it says ready; each job names its own backend, tier and compile cache
folder, so one pool can serve several runs). It talks to the
suite over its standard input and a private copy of its standard output
(length-prefixed pickles); file descriptors 0 and 1 themselves are pointed at
/dev/null first, so a backend that prints (T.print, a chatty toolchain) or
reads stdin cannot corrupt the protocol. A backend that raises SystemExit or
KeyboardInterrupt while compiling or running becomes a failed program; one
that ends the process (os._exit, a signal) is noticed by the pool.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys

_HEADER = struct.Struct("!Q")


def write_message(fd: int, obj) -> None:
    """Send one pickled object on `fd` (8-byte big-endian length, then the pickle)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_message(fd: int):
    """Receive one object sent by write_message (EOFError when the pipe is closed)."""
    (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    return pickle.loads(_read_exact(fd, n))


def _private_pipes():
    """(in_fd, out_fd) for the protocol; fds 0 and 1 then point at /dev/null."""
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    sys.stdout = open(os.devnull, "w")
    sys.stdin = open(os.devnull)
    return in_fd, out_fd


_BACKENDS: dict = {}


def _backend(name: str):
    from .runner import resolve_backend

    if name not in _BACKENDS:
        _BACKENDS[name] = resolve_backend(name)
    return _BACKENDS[name]


def _use_cache_dir(folder: str) -> None:
    """Compile into the run's private cache folder (a pool may serve several runs)."""
    if folder and os.environ.get("TILECORE_CACHE_DIR") != folder:
        from tilecore.runtime import api

        os.environ["TILECORE_CACHE_DIR"] = folder
        api.clear_memory_cache()


def _run_job(job: dict):
    """One program on the job's backend; a BaseException escaping the backend is that program's failure."""
    from .execute import FAIL, Outcome, run_program
    from .repro import program_from_record

    _use_cache_dir(job.get("cache_dir", ""))
    backend = _backend(job["backend"])
    program = program_from_record(job["program"])
    try:
        return run_program(program, backend, job["tier"], options=job.get("options"))
    except BaseException as err:  # SystemExit / KeyboardInterrupt raised by backend code
        return Outcome(
            FAIL,
            sorted(program.features),
            f"run failed: the backend raised {type(err).__name__}({err}) "
            "(a backend must never end or interrupt the process)",
            error_kind="crash",
        )


def main(argv=None) -> int:
    """Serve programs until the suite closes the pipe."""
    argv = sys.argv[1:] if argv is None else argv
    in_fd, out_fd = _private_pipes()
    try:
        _backend(argv[0])  # loads the plugins and the first backend before saying ready
    except BaseException as err:
        write_message(out_fd, {"ready": False, "error": f"{type(err).__name__}: {err}"})
        return 1
    write_message(out_fd, {"ready": True, "pid": os.getpid()})
    while True:
        try:
            job = read_message(in_fd)
        except EOFError:
            return 0
        write_message(out_fd, {"index": job["index"], "outcome": _run_job(job)})


if __name__ == "__main__":
    raise SystemExit(main())
