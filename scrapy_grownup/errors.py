"""Exception types of the package: callers catch ``GrownupError`` to skip one bad page.

Every per-page step (parsing, the model, metadata, text and Markdown assembly) raises only
``GrownupError`` subclasses for a bad page: an unexpected failure inside a step becomes that
step's type (``ParseError`` and ``ArticleError`` through ``own_error``, ``ModelError`` through
``extractor.run_split_on_oom``), so a page's error stays its own and is counted as what it is.
"""

from __future__ import annotations

from contextlib import contextmanager


class GrownupError(Exception):
    """Base class of every error this package raises on purpose."""


class NotHTMLError(GrownupError):
    """The bytes are not an HTML document: a PDF, an image, other binary or random data, JSON,
    or plain text without a single tag."""


class EmptyPageError(GrownupError):
    """The document holds no element at all (empty body, whitespace only)."""


class ModelLoadError(GrownupError):
    """A model or encoder file is missing, corrupt, or of an incompatible version."""


class SettingsError(GrownupError, ValueError):
    """A ``GROWNUP_*`` setting holds a value it cannot take; the message (one line) names the
    setting, its value and the values allowed."""


class OptionError(GrownupError, ValueError):
    """An argument of ``ArticleExtractor`` holds a value it cannot take; the message (one line)
    names the argument, its value and what it may be."""


class DeviceError(GrownupError):
    """The device asked for (``cuda``, ``cuda:1``, ``mps``...) is not there on this machine."""


class WorkerCrashedError(GrownupError):
    """A worker process died twice while working on this page."""


class PageTimeoutError(GrownupError):
    """This page took longer than its time budget (``GROWNUP_PAGE_TIMEOUT``): its parsing and
    its article, in a page worker or in the model's process."""


class RequestMetaError(GrownupError):
    """``request.meta["grownup"]`` holds a key or value the add-on does not take."""


class ModelError(GrownupError):
    """The model failed on this page (the message names the original error)."""


class ParseError(GrownupError):
    """Parsing this page failed unexpectedly (a bug; the message names the original error)."""


class ArticleError(GrownupError):
    """Building this page's article (metadata, text or Markdown) failed unexpectedly (a bug;
    the message names the original error)."""


class DatasetNotAvailable(GrownupError, FileNotFoundError):
    """A training or evaluation dataset is neither unpacked nor there as an archive; the message
    says where it was looked for (``GROWNUP_DATA_DIR``). Also a ``FileNotFoundError``."""


class CorpusConfigError(GrownupError, ValueError):
    """A WARC corpus directory was written with other settings (encoder, shard size...): its
    finished shards cannot be reused, so the run refuses to write there. Also a
    ``ValueError``."""


class UserError(Exception):
    """A mistake in a ``grownup`` command line or its files: one line on stderr, exit status 2.

    Not a ``GrownupError``: a command's per-page ``except GrownupError`` must not take it for
    one bad page."""


@contextmanager
def own_error(kind: type[GrownupError]):
    """Let ``GrownupError`` through; turn any other exception into ``kind`` (chained), its
    message naming the original error."""
    try:
        yield
    except GrownupError:
        raise
    except Exception as exc:  # noqa: BLE001 - this is the one place that converts them
        raise kind(f"{type(exc).__name__}: {exc}"[:2000]) from exc
