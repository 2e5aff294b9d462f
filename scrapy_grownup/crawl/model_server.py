"""The crawl's model server: forward passes of the pages the page workers send, batched across
workers.

It holds the whole ``ArticleExtractor`` (on the GPU when there is one) in its own process
(``GROWNUP_MODEL_PROCESS``; on a thread of the crawl's process where that is off). Each page
worker connects once over a unix socket (``multiprocessing.connection``, with an authkey) and
sends one page's ``PageInputs`` at a time (arrays and the distinct strings of each text block,
no page object). The server takes what the connections have ready, up to
``GROWNUP_BATCH_PAGES`` pages and ``GROWNUP_BATCH_NODES`` nodes, waiting at most
``GROWNUP_BATCH_WAIT_MS`` for more while a connected worker has sent nothing yet; runs
``ArticleExtractor.batch_outputs`` on them (``run_split_on_oom``: a CUDA out-of-memory error
halves the batch, a page that fails alone gets its own ``ModelError``); and answers each worker
with its page's outputs and the batch's size and seconds. It never sees a page or builds an
article: the workers do, where their pages are.

A server that dies takes only the pages it held: their workers get a ``ModelError``
(``ModelClient``), and ``ModelService`` starts another on the same address, to which the
workers reconnect.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
from collections import deque
from multiprocessing.connection import Client, Connection, Listener, wait

from scrapy_grownup.errors import GrownupError, ModelError, ModelLoadError

logger = logging.getLogger(__name__)
FAMILY = "AF_UNIX"

# Seconds a page worker waits for its page's outputs, its wait for a restarting model server
# included; past it the page is a ``ModelError``. Far above a batch's time: it only ends a
# wait on a server that hangs.
MODEL_WAIT_SECONDS = 120.0
# How often the crawl's process looks whether the model server is still there.
WATCH_SECONDS = 0.2


class _Request:
    __slots__ = ("conn", "inputs", "arrived")

    def __init__(self, conn: Connection, inputs, arrived: float):
        self.conn, self.inputs, self.arrived = conn, inputs, arrived


class ModelServer:
    """The serving loop: connections in, batches of their pages' inputs through the model.

    ``extractor``: the loaded ``ArticleExtractor``, or the ``GrownupError`` its loading failed
    with (then every page, and ``describe``, gets that error). ``describe``: what the crawl
    needs to know of the model (``model_process.describe``'s dict), answered on request.
    """

    def __init__(self, listener: Listener, extractor, describe: dict | None,
                 max_pages: int = 32, max_nodes: int = 40_000, max_wait_ms: float = 50.0):
        self.listener = listener
        self.extractor = extractor
        self.description = describe
        self.max_pages, self.max_nodes = max_pages, max_nodes
        self.max_wait = max_wait_ms / 1000.0
        self.connections: list[Connection] = []
        self.pending: deque[_Request] = deque()
        self._new: list[Connection] = []
        self._lock = threading.Lock()
        self._wake_recv, self._wake_send = multiprocessing.Pipe(duplex=False)
        self._stopped = False

    # -- connections --------------------------------------------------------------------------
    def _accept(self) -> None:
        """Accept workers' connections (a thread: ``accept`` blocks, and checks the authkey)."""
        while not self._stopped:
            try:
                conn = self.listener.accept()
            except multiprocessing.AuthenticationError:
                continue
            except OSError:  # the listener was closed: the server stops
                return
            with self._lock:
                self._new.append(conn)
            self._wake_send.send_bytes(b"")

    def _drop(self, conn: Connection) -> None:
        """Forget a connection whose worker is gone, and the page it had sent."""
        if conn in self.connections:
            self.connections.remove(conn)
        self.pending = deque(r for r in self.pending if r.conn is not conn)
        conn.close()

    def _receive(self, conn: Connection) -> None:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            self._drop(conn)
            return
        kind = message[0]
        if kind == "score":
            self.pending.append(_Request(conn, message[1], time.perf_counter()))
        elif kind == "describe":
            error = self.extractor if isinstance(self.extractor, BaseException) else None
            self._send(conn, ("error", error) if error is not None
                       else ("ok", self.description))

    def _send(self, conn: Connection, message) -> None:
        try:
            conn.send(message)
        except OSError:  # its worker died while waiting: nobody to answer
            self._drop(conn)

    # -- batches ------------------------------------------------------------------------------
    def _ready(self) -> bool:
        """Whether to run a batch now: it is full, it has waited long enough, or every
        connected worker has sent its page (no other can come)."""
        if not self.pending:
            return False
        nodes = sum(r.inputs.num_nodes for r in self.pending)
        if len(self.pending) >= self.max_pages or nodes >= self.max_nodes:
            return True
        if time.perf_counter() - self.pending[0].arrived >= self.max_wait:
            return True
        waiting = {id(r.conn) for r in self.pending}
        return all(id(conn) in waiting for conn in self.connections)

    def _take(self) -> list[_Request]:
        """The next batch: the oldest pages, at most ``max_pages`` and ``max_nodes`` (at least
        one page)."""
        batch: list[_Request] = []
        nodes = 0
        while self.pending and len(batch) < self.max_pages:
            size = self.pending[0].inputs.num_nodes
            if batch and nodes + size > self.max_nodes:
                break
            batch.append(self.pending.popleft())
            nodes += size
        return batch

    def _run(self, batch: list[_Request]) -> None:
        from scrapy_grownup.extractor import run_split_on_oom

        start = time.perf_counter()
        if isinstance(self.extractor, BaseException):
            results, splits = [self.extractor] * len(batch), 0
        else:
            results, splits = run_split_on_oom(self.extractor.batch_outputs,
                                               [r.inputs for r in batch], _empty_cuda_cache)
        info = (len(batch), time.perf_counter() - start, splits)
        for request, result in zip(batch, results):
            self._send(request.conn, ("error", result, info)
                       if isinstance(result, BaseException) else ("ok", result, info))

    # -- the loop -----------------------------------------------------------------------------
    def serve_forever(self) -> None:
        threading.Thread(target=self._accept, name="grownup-model-accept", daemon=True).start()
        while not self._stopped:
            timeout = None
            if self.pending:
                timeout = max(0.0, self.pending[0].arrived + self.max_wait - time.perf_counter())
            for conn in wait(self.connections + [self._wake_recv], timeout):
                if conn is self._wake_recv:
                    self._wake_recv.recv_bytes()
                    with self._lock:
                        self.connections += self._new
                        self._new = []
                else:
                    self._receive(conn)
            while self._ready():
                self._run(self._take())

    def stop(self) -> None:
        self._stopped = True
        self.listener.close()
        self._wake_send.send_bytes(b"")


def serve(address: str, authkey: bytes, load_args: tuple, max_pages: int, max_nodes: int,
          max_wait_ms: float, started: threading.Event | None = None,
          servers: list | None = None) -> None:
    """Load the model (``model_process.load_extractor``'s ``load_args``; a failure is
    answered to every request) and serve it on ``address`` until stopped. A spawned process's
    target; on a thread, ``servers`` receives the server (to stop it) and ``started`` is set
    once it listens."""
    from scrapy_grownup.crawl import model_process

    model_process.load_extractor(*load_args, forward_only=True)
    try:
        extractor, description = model_process.loaded_extractor(), model_process.describe()
    except GrownupError as exc:
        extractor, description = exc, None
    if os.path.exists(address):  # a server before this one died there
        os.unlink(address)
    server = ModelServer(Listener(address, FAMILY, authkey=authkey), extractor, description,
                         max_pages, max_nodes, max_wait_ms)
    if servers is not None:
        servers.append(server)
    if started is not None:
        started.set()
    server.serve_forever()


class ModelClient:
    """A page worker's connection to the model server (one per thread of a worker)."""

    def __init__(self, address: str, authkey: bytes,
                 wait_seconds: float | None = MODEL_WAIT_SECONDS):
        self.address, self.authkey = address, authkey
        self.wait_seconds = wait_seconds
        self._local = threading.local()

    def _connect(self, deadline: float) -> Connection:
        conn = getattr(self._local, "conn", None)
        while conn is None:
            try:
                conn = Client(self.address, FAMILY, authkey=self.authkey)
            except (FileNotFoundError, ConnectionRefusedError):  # (re)starting: wait for it
                if deadline is not None and time.monotonic() > deadline:
                    raise ModelError(f"no model server to score this page on after "
                                     f"{self.wait_seconds:g} s") from None
                time.sleep(0.05)
        self._local.conn = conn
        return conn

    def _forget(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def request(self, message: tuple):
        """Send ``message`` and return the server's answer. A server gone before it took the
        message is reconnected to (a restarted one) and sent it again; one gone after is a
        ``ModelError``: the page was in flight."""
        deadline = None if self.wait_seconds is None else time.monotonic() + self.wait_seconds
        for attempt in (1, 2):
            conn = self._connect(deadline)
            try:
                conn.send(message)
            except OSError:
                self._forget()
                if attempt == 2:
                    raise ModelError("the model server went away before it got this "
                                     "page") from None
                continue
            try:
                if not conn.poll(None if deadline is None
                                 else max(0.0, deadline - time.monotonic())):
                    self._forget()  # a late answer would be read as the next page's
                    raise ModelError(f"the model server gave no answer within "
                                     f"{self.wait_seconds:g} s")
                return conn.recv()
            except (EOFError, OSError):
                self._forget()
                raise ModelError("the model process ended while it held this page "
                                 "(it is restarted)") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def score(self, inputs) -> tuple[dict, tuple[int, float, int]]:
        """One page's outputs (``ArticleExtractor.batch_outputs``) and its batch's ``(pages,
        seconds, OOM splits)``; raises the page's ``GrownupError`` (``ModelError``...)."""
        answer = self.request(("score", inputs))
        if answer[0] != "ok":
            error = answer[1]
            raise error if isinstance(error, GrownupError) else ModelError(str(error))
        return answer[1], answer[2]

    def describe(self) -> dict:
        """``model_process.describe()`` of the server's model; raises its load error."""
        answer = self.request(("describe",))
        if answer[0] != "ok":
            raise answer[1]
        return answer[1]


class ModelService:
    """The crawl's side: starts the model server (a spawned ``grownup-model`` process, or a
    thread of this process where ``in_process`` is off), waits for its model, and starts a new
    one on the same address when the process dies. ``load_args``: ``load_extractor``'s."""

    def __init__(self, load_args: tuple, max_pages: int, max_nodes: int, max_wait_ms: float,
                 in_process: bool = True):
        self.load_args = load_args
        self.batching = (max_pages, max_nodes, max_wait_ms)
        self.in_process = in_process
        self._directory = tempfile.mkdtemp(prefix="grownup-model-")
        self.address = os.path.join(self._directory, "model.sock")
        self.authkey = os.urandom(32)
        self.restarts = 0
        self.process = None
        self._servers: list[ModelServer] = []
        self._watch: asyncio.Task | None = None
        self._closing = False

    def _start(self) -> None:
        args = (self.address, self.authkey, self.load_args, *self.batching)
        if self.in_process:
            context = multiprocessing.get_context("spawn")
            self.process = context.Process(target=serve, args=args, name="grownup-model",
                                           daemon=True)
            self.process.start()
        else:
            started = threading.Event()
            threading.Thread(target=serve, args=(*args, started, self._servers),
                             name="grownup-model", daemon=True).start()

    async def start(self) -> dict:
        """Start the server and return its ``describe()``; raises the model's load error."""
        self._start()
        client = ModelClient(self.address, self.authkey, wait_seconds=None)  # a load takes long
        while not os.path.exists(self.address):
            if self.process is not None and not self.process.is_alive():
                raise ModelLoadError(f"the model process exited while loading the model "
                                     f"(exit code {self.process.exitcode})")
            await asyncio.sleep(0.05)
        try:
            info = await asyncio.to_thread(client.describe)
        finally:
            client._forget()
        if self.in_process:
            self._watch = asyncio.get_running_loop().create_task(self._watch_process())
        return info

    async def _watch_process(self) -> None:
        while not self._closing:
            await asyncio.sleep(WATCH_SECONDS)
            if self._closing or self.process.is_alive():
                continue
            self.restarts += 1
            logger.warning("the model process died (exit code %s); the pages it held are "
                           "model_error drops; restarted it (%d restarts)",
                           self.process.exitcode, self.restarts)
            self._start()

    def close(self) -> None:
        """Stop the server (its process, or its thread) and remove its socket; callable from
        any thread (the watcher sees ``_closing`` and ends by itself)."""
        self._closing = True
        if self.process is not None:
            self.process.terminate()
            self.process.join(10)
            if self.process.is_alive():  # pragma: no cover - it ignored SIGTERM
                self.process.kill()
                self.process.join()
        for server in self._servers:
            server.stop()
        shutil.rmtree(self._directory, ignore_errors=True)


def _empty_cuda_cache() -> None:
    import sys

    torch = sys.modules.get("torch")  # a numpy model on a CPU never imported it
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


__all__ = ["MODEL_WAIT_SECONDS", "ModelClient", "ModelServer", "ModelService", "serve"]
