"""Checks of vectors at the API boundary: real numbers, one dimension, finite, not all zero,
at most ``MAX_EMBEDDING_DIMENSION`` long, a norm pgvector can compute in single precision."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ValidationError

__all__ = ["MAX_EMBEDDING_DIMENSION", "prepare_embedding", "checked_vector", "check_norms",
           "real_vector", "real_matrix"]

MAX_EMBEDDING_DIMENSION = 2000


def prepare_embedding(embedding: Any, *, field: str = "embedding",
                      pad_to: int = MAX_EMBEDDING_DIMENSION) -> tuple[np.ndarray, int]:
    """Validate a vector and zero-pad it to ``pad_to`` dimensions.

    Zero padding leaves cosine similarity unchanged, which is why the reference schema can
    keep vectors of every model in one ``vector(2000)`` column.

    Parameters
    ----------
    embedding : sequence of float, numpy array or pgvector ``Vector``
        The vector, 1 to 2000 finite numbers, not all zero.

    Returns
    -------
    padded : numpy.ndarray
        float32 array of length ``pad_to``.
    dimension : int
        The original number of dimensions.
    """
    vector = checked_vector(embedding, field=field)
    padded = np.zeros(pad_to, dtype=np.float32)
    padded[:vector.shape[0]] = vector
    return padded, int(vector.shape[0])


_FAST_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def checked_vector(embedding: Any, *, field: str = "embedding") -> np.ndarray:
    """The vector as float32, unpadded, if :func:`prepare_embedding` accepts it.

    A one-dimensional float32 or float64 array (what embedding models return) is checked
    with one pass over its float32 values: a squared norm that is finite and not zero in
    single precision rules out NaN, infinities, all zeros and values past float32's range.
    Anything else, and any vector failing that test, goes through every check in turn, so
    each error names its own cause. A float32 array comes back as it is, not copied.
    """
    if type(embedding) is np.ndarray and embedding.ndim == 1 \
            and embedding.dtype in _FAST_DTYPES \
            and 0 < embedding.shape[0] <= MAX_EMBEDDING_DIMENSION:
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            vector = np.ascontiguousarray(embedding, dtype=np.float32)
            square = vector.dot(vector)  # float32, as pgvector sums (a tenth of einsum's cost)
        if np.isfinite(square) and square >= _FLOAT32_TINY:
            return vector
    array = real_vector(embedding, field=field)
    dimension = int(array.shape[0])
    if dimension == 0:
        raise ValidationError("must not be empty", field=field)
    if dimension > MAX_EMBEDDING_DIMENSION:
        raise ValidationError(
            f"has {dimension} dimensions; at most {MAX_EMBEDDING_DIMENSION} fit the "
            "vector(2000) column", field=field)
    if not np.isfinite(array).all():
        raise ValidationError("contains NaN or infinite values", field=field)
    if not array.any():
        raise ValidationError("is all zeros, so its cosine similarity is undefined", field=field)
    if np.abs(array).max() > np.finfo(np.float32).max:
        raise ValidationError("has values too large for float32", field=field)
    vector = array.astype(np.float32)
    check_norms(vector[None, :], field=field)
    return vector


def _norms_fine(vectors: np.ndarray) -> np.ndarray:
    """Whether each float32 row's squared norm, summed in single precision as pgvector
    does, is finite and above zero (call with numpy's warnings silenced)."""
    squares = np.einsum("ij,ij->i", vectors, vectors, dtype=np.float32)
    return np.isfinite(squares) & (squares >= _FLOAT32_TINY)


_FLOAT32_TINY = np.finfo(np.float32).tiny


def check_norms(vectors: np.ndarray, *, field: str) -> None:
    """Reject float32 rows whose squared norm is zero or infinite in float32.

    pgvector sums squares in single precision: a vector of tiny values (1e-30) has a norm of
    0 there, one of huge values (1e30) an infinite norm, and either gives NaN similarities.
    """
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        bad = np.flatnonzero(~_norms_fine(vectors))
    if bad.size:
        which = f"row {int(bad[0])} " if vectors.shape[0] > 1 else ""
        raise ValidationError(
            f"{which}has a norm of 0 or infinity in single precision (values too small or too "
            "large), so its cosine similarity is undefined", field=field)


_REAL_KINDS = frozenset("iuf")  # signed and unsigned integers, floats: not bool or complex


def _is_real_type(kind: type) -> bool:
    return issubclass(kind, (int, float, np.integer, np.floating)) and not issubclass(kind, bool)


def _real_entries(value: Any, field: str, where: str = "") -> None:
    """Reject entries that are not real numbers: bools, complex numbers, strings, bytes,
    Decimals and other objects (numpy would turn most of them into numbers silently)."""
    if isinstance(value, np.ndarray) and value.dtype.kind != "O":
        if value.dtype.kind not in _REAL_KINDS:
            raise ValidationError(f"{where}must hold real numbers, got an array of "
                                  f"{value.dtype}", field=field)
        return
    # The types present, found in C; entries are visited one by one only to name a bad one.
    if all(_is_real_type(kind) for kind in set(map(type, value))):
        return
    for i, item in enumerate(value):
        if isinstance(item, (list, tuple, np.ndarray)):
            raise ValidationError(f"{where}must be one-dimensional: entry {i} is a "
                                  f"{type(item).__name__}", field=field)
        if not _is_real_type(type(item)):
            raise ValidationError(f"{where}must be a sequence of numbers: entry {i} is "
                                  f"{type(item).__name__} {item!r:.40}, not a real number",
                                  field=field)


def _as_array(value: Any, field: str, rows: bool) -> np.ndarray:
    if hasattr(value, "to_numpy"):  # pgvector Vector, pandas objects
        value = value.to_numpy()
    if value is None or isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise ValidationError(f"must be a sequence of numbers, got {type(value).__name__}",
                              field=field)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        raise ValidationError("must be a sequence of numbers, got a 0-d array", field=field)
    if rows and not (isinstance(value, np.ndarray) and value.dtype.kind != "O"):
        for i, row in enumerate(value):
            if hasattr(row, "to_numpy"):
                row = row.to_numpy()
            if row is None or isinstance(row, (str, bytes)) or not hasattr(row, "__len__") \
                    or (isinstance(row, np.ndarray) and row.ndim == 0):
                raise ValidationError(f"row {i} is {type(row).__name__}, not a vector",
                                      field=field)
            _real_entries(row, field, f"row {i}: ")
    else:
        _real_entries(value, field)
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:  # ragged rows, huge integers
        raise ValidationError(f"must be {'an (n, d) array' if rows else 'a sequence'} of "
                              f"numbers ({exc})", field=field) from None


def real_vector(value: Any, *, field: str = "embedding") -> np.ndarray:
    """``value`` as a float64 vector if every entry is a real number.

    Accepts a sequence of ints and floats (Python or numpy), a numeric numpy array, a pandas
    Series or a pgvector ``Vector``; rejects bools, complex numbers, strings, bytes and other
    objects, which numpy would otherwise convert. Shape and values are checked by the callers
    (:func:`prepare_embedding`).
    """
    array = _as_array(value, field, rows=False)
    if array.ndim != 1:
        raise ValidationError(f"must be one-dimensional, got shape {array.shape}", field=field)
    return array


def real_matrix(value: Any, *, field: str = "embeddings") -> np.ndarray:
    """``value`` as a float64 ``(n, d)`` matrix if every entry is a real number (the rules of
    :func:`real_vector`, row by row)."""
    array = _as_array(value, field, rows=True)
    if array.ndim != 2:
        raise ValidationError(f"must be an (n, d) array, got shape {array.shape}", field=field)
    return array
