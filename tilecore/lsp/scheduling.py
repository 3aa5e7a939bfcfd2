"""Which document is analysed when, in which worker process (the server side of the workers).

Two lanes, each with its own worker process (tilecore.lsp.worker) and queue:

* the diagnostics lane runs every pass but the layout inference of a backend with layout
  rules (which can cost as much as the rest together) and publishes the diagnostics:
  what the author waits for after an edit;
* only when it skipped that, and once the text has rested for FACTS_DELAY seconds (so
  that it does not compete with the diagnostics of the next keystrokes), the facts lane
  runs the whole pipeline, at a lower CPU priority; its model answers hovers, and it
  publishes again only if it found more (a layout conflict).

Each lane analyses one document at a time, the most recently edited first, and coalesces
edits: a document edited five times while its lane was busy is analysed once, at its
latest text. Every analysis has a time budget; past it the worker is killed (and started
again for the next one), so the editor is never left waiting on a runaway analysis.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any, Callable, Dict, List, Optional

from pygls.uris import to_fs_path

from .features import carry_over_facts

log = logging.getLogger("tilecore.lsp")
DEFAULT_TIME_BUDGET = 5.0
WARM_UP_SECONDS = 120.0  # importing the core and the plugins once; not part of any analysis
FACTS_NICENESS = 5
FACTS_DELAY = 0.3  # seconds without an edit before the facts lane starts on a text


class WorkerError(RuntimeError):
    """The worker failed to answer (it crashed, or its answer was an error)."""


class WorkerProcess:
    """One analysis worker as an asyncio child process speaking JSON lines."""

    def __init__(self, niceness: int = 0):
        self.niceness = niceness
        self.proc: Optional[asyncio.subprocess.Process] = None
        self.lock = asyncio.Lock()
        self.warm_target: Any = False  # the target the running worker was warmed for
        self.imported: set = set()  # the import lines it has run
        self._ids = 0

    async def call(self, request: Dict[str, Any], timeout: float) -> Any:
        """Send one request and return its result; past `timeout` s the worker is killed and
        asyncio.TimeoutError raised. A worker that is not running is started (and warmed up
        for the request's target) first, outside the timeout."""
        async with self.lock:
            if self.proc is None or self.proc.returncode is not None:
                extra = ["--nice", str(self.niceness)] if self.niceness else []
                self.proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "tilecore.lsp.worker",
                    *extra,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    limit=1 << 26,
                )
                self.warm_target, self.imported = False, set()
            if request.get("method") == "analyze":
                await self._prepare(request)
            return await self._call(request, timeout)

    async def _prepare(self, request: Dict[str, Any]) -> None:
        """Warm up for the target and import the document's modules, outside the time budget
        (a first `import torch` may take seconds; it happens once per worker)."""
        if request.get("target") != self.warm_target:
            await self._call({"method": "warm", "target": request.get("target")}, WARM_UP_SECONDS)
            self.warm_target = request.get("target")
        imports = tuple(line for line in request["text"].splitlines() if line.startswith(("import ", "from ")))
        if imports not in self.imported:
            await self._call({"method": "imports", "path": request["path"], "text": request["text"]}, WARM_UP_SECONDS)
            self.imported.add(imports)

    async def _call(self, request: Dict[str, Any], timeout: float) -> Any:
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise WorkerError("the analysis worker is not running")
        self._ids += 1
        proc.stdin.write((json.dumps(dict(request, id=self._ids)) + "\n").encode("utf-8"))
        await proc.stdin.drain()
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout)
        except asyncio.TimeoutError:
            await self.stop()
            raise
        if not line:
            await self.stop()
            raise WorkerError("the analysis worker exited")
        answer = json.loads(line)
        if "error" in answer:
            raise WorkerError(answer["error"] + "\n" + answer.get("traceback", ""))
        return answer["result"]

    async def stop(self) -> None:
        """End the worker process (the next call starts a new one)."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        self.proc = None


class Lane:
    """A queue of documents analysed by one worker; `done(uri, model)` gets each result."""

    def __init__(self, scheduler: "Scheduler", layouts: bool, done: Callable[[str, Dict], None], niceness: int = 0):
        self.scheduler = scheduler
        self.server = scheduler.server
        self.layouts = layouts
        self.done = done
        self.worker = WorkerProcess(niceness)
        self.pending: Dict[str, None] = {}  # uris to analyse, in the order of their latest edit
        self._wake: Optional[asyncio.Event] = None
        self._task: Optional[asyncio.Task] = None

    def submit(self, uri: str) -> None:
        """Queue `uri` (an older queued request for it is replaced)."""
        if self._task is None or self._wake is None:
            self._wake = asyncio.Event()
            self._task = asyncio.ensure_future(self._run(self._wake))
        self.pending.pop(uri, None)
        self.pending[uri] = None
        self._wake.set()

    async def _run(self, wake: asyncio.Event) -> None:
        while True:
            await wake.wait()
            wake.clear()
            while self.pending:
                uri = next(reversed(self.pending))  # the document edited last
                del self.pending[uri]
                try:
                    await self._analyse(uri)
                except Exception:  # keep serving the other documents
                    log.exception("analysis of %s failed", uri)

    async def _analyse(self, uri: str) -> None:
        doc = self.server.workspace.text_documents.get(uri)
        if doc is None:  # closed meanwhile
            return
        version, text, generation = doc.version, doc.source, self.scheduler.generation
        budget = self.server.time_budget()
        request = {
            "method": "analyze",
            "path": to_fs_path(uri) or uri,
            "text": text,
            "target": self.server.settings.get("target") or None,
            "layouts": self.layouts,
        }
        try:
            model = await self.worker.call(request, budget)
        except asyncio.TimeoutError:
            model = message_model(
                f"tilecore: analysing this file took longer than the {budget:g} s budget "
                f"(setting tile.timeBudget) and was stopped; Python code that runs while "
                f"the kernels are built (the factory, the kernel's meta-programming) may "
                f"not finish",
                "time-budget",
            )
        except WorkerError as err:
            log.error("%s", err)
            model = message_model(
                f"tilecore: the analysis failed inside the language server: {str(err).splitlines()[0]}", "internal"
            )
        model["version"] = version
        if generation == self.scheduler.generation:  # else analysed under old settings
            self.done(uri, model)


def message_model(message: str, code: str) -> Dict:
    """A model with one warning on the first line and no facts."""
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
    return {
        "kernels": [],
        "buffers": [],
        "ops": [],
        "target": None,
        "layouts": False,
        "failed": True,
        "diagnostics": [
            {"range": rng, "severity": 2, "message": message, "source": "tilecore", "code": code, "data": None}
        ],
    }


class Scheduler:
    """The two lanes, the latest model of each document, and what was published for it."""

    def __init__(self, server):
        self.server = server
        self.quick = Lane(self, False, self._diagnosed)
        self.full = Lane(self, True, self._completed, FACTS_NICENESS)
        self.models: Dict[str, Dict] = {}  # uri -> latest model (a full one when current)
        self.published: Dict[str, tuple] = {}  # uri -> (version, diagnostics)
        self.generation = 0  # counts settings changes
        self._facts_timers: Dict[str, asyncio.TimerHandle] = {}
        self._updated: Optional[asyncio.Event] = None

    def submit(self, uri: str) -> None:
        """Analyse `uri` again (after an open, edit, save or settings change)."""
        if self._updated is None:
            self._updated = asyncio.Event()
        self._cancel_facts(uri)
        self.quick.submit(uri)

    def _cancel_facts(self, uri: str) -> None:
        timer = self._facts_timers.pop(uri, None)
        if timer is not None:
            timer.cancel()

    def forget(self, uri: str) -> None:
        """Drop a closed document."""
        self._cancel_facts(uri)
        for lane in (self.quick, self.full):
            lane.pending.pop(uri, None)
        self.models.pop(uri, None)
        self.published.pop(uri, None)

    def _publish(self, uri: str, model: Dict) -> None:
        self.published[uri] = (model["version"], model["diagnostics"])
        self.server.publish(uri, model)

    def _diagnosed(self, uri: str, model: Dict) -> None:
        if uri not in self.server.workspace.text_documents:
            return  # closed while it was analysed
        self._remember(uri, model)
        self._publish(uri, model)
        if not model.get("layouts") and not model.get("failed") and uri not in self.quick.pending:
            self._cancel_facts(uri)
            self._facts_timers[uri] = asyncio.get_running_loop().call_later(FACTS_DELAY, self._start_facts, uri)

    def _start_facts(self, uri: str) -> None:
        self._facts_timers.pop(uri, None)
        self.full.submit(uri)

    def _completed(self, uri: str, model: Dict) -> None:
        old = self.models.get(uri)
        if model.get("failed") or (old is not None and old["version"] > model["version"]):
            return  # the diagnostics lane reports on the same text; a newer model stays
        self._remember(uri, model)
        published = self.published.get(uri)
        if published is None or published[0] != model["version"] or published[1] != model["diagnostics"]:
            current = self.server.workspace.text_documents.get(uri)
            if current is not None and current.version == model["version"]:
                self._publish(uri, model)

    def _remember(self, uri: str, model: Dict) -> None:
        if uri not in self.server.workspace.text_documents:
            return
        self.models[uri] = carry_over_facts(self.models.get(uri), model)
        if self._updated is not None:  # submit() made it before any model could arrive
            self._updated.set()
        self._updated = asyncio.Event()

    async def model(self, uri: str, timeout: float) -> Optional[Dict]:
        """The full analysis of the document's current text, waiting up to `timeout` s for it;
        else the latest there is."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._updated is not None:
            doc = self.server.workspace.text_documents.get(uri)
            current = self.models.get(uri)
            if doc is None or (
                current
                and current["version"] == doc.version
                and uri not in self.quick.pending
                and (current.get("layouts") or current.get("failed"))
            ):
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(self._updated.wait(), remaining)
            except asyncio.TimeoutError:
                break
        return self.models.get(uri)

    def invalidate(self) -> None:
        """Forget every model and publication (the settings changed) and analyse again."""
        self.generation += 1
        self.models.clear()
        self.published.clear()
        for uri in list(self.server.workspace.text_documents):
            self.submit(uri)

    async def status(self) -> List[Any]:
        """Each worker's status (whether TVM is loaded there, ...)."""
        return [await lane.worker.call({"method": "status"}, 30.0) for lane in (self.quick, self.full)]

    async def stop(self) -> None:
        """End both worker processes."""
        for lane in (self.quick, self.full):
            await lane.worker.stop()
