"""Exception types of the package: callers catch ``GrownupError`` to skip one bad page."""


class GrownupError(Exception):
    """Base class of every error this package raises on purpose."""


class NotHTMLError(GrownupError):
    """The bytes are not an HTML document (a PDF, an image, other binary data)."""


class EmptyPageError(GrownupError):
    """The document holds no element at all (empty body, whitespace only)."""


class ModelLoadError(GrownupError):
    """A model or encoder file is missing, corrupt, or of an incompatible version."""


class ModelError(GrownupError):
    """The model failed on this page (the message names the original error)."""
