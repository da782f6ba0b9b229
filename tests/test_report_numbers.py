"""The report's words and scales, checked on frames (no database): plurals, sentences, the
concurrency sentence, recall axes, overlap colours, partial periods, the tag graph's view."""

from __future__ import annotations

import datetime as dt

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import htm_analytics as ha
from htm_analytics._plotting import fraction_limits
from htm_analytics.report.render import counted, first_sentence


def test_counts_agree_with_their_nouns() -> None:
    assert counted(1, "memory", "memories") == "1 memory"
    assert counted(2777, "memory", "memories") == "2,777 memories"
    assert counted(1, "robot") == "1 robot" and counted(0, "robot") == "0 robots"


@pytest.mark.parametrize(("text", "sentence"), [
    ("Drop it: idx_a.b answers it. Then vacuum.", "Drop it: idx_a.b answers it."),
    ("Raise hnsw.ef_search to 40 for recall 0.95. Or rebuild.",
     "Raise hnsw.ef_search to 40 for recall 0.95."),
    ("No full stop", "No full stop."),
])
def test_first_sentence_ends_at_a_sentence_end_not_inside_a_word(text, sentence) -> None:
    assert first_sentence(text) == sentence


def test_concurrency_sentence_says_when_more_threads_did_not_help() -> None:
    flat = pd.DataFrame({"threads": [1, 2, 4], "qps": [2777.0, 2700.0, 2650.0],
                         "qps_spread": [30.0, 40.0, 20.0], "repeats": [3, 3, 3],
                         "speedup": [1.0, 0.97, 0.95], "latency_p95_ms": [0.5, 0.9, 1.8]})
    text = ha.describe_concurrency(flat)
    assert "from 1.0" not in text and "(1.0x)" not in text
    assert text.startswith("2,777 queries/s with one client thread (spread 30); more threads "
                           "did not add throughput;")
    scaling = flat.assign(qps=[100.0, 190.0, 350.0], speedup=[1.0, 1.9, 3.5],
                          qps_spread=[5.0, 9.0, 12.0])
    assert "at most 350 with 4 threads (3.5x, spread 12; beyond the noise of 3 repeats)" in \
        ha.describe_concurrency(scaling)
    # A gain smaller than the two runs' spreads together is not claimed.
    noisy = flat.assign(qps=[100.0, 104.0, 103.0], qps_spread=[3.0, 2.0, 6.0])
    assert "more threads did not add throughput (at most 104 with 2 threads, within the " \
        "noise of 3 repeats)" in ha.describe_concurrency(noisy)
    # One repeat: no spread to judge by, so the gain is shown and not claimed.
    once = scaling.assign(repeats=1, qps_spread=0.0)
    text = ha.describe_concurrency(once)
    assert "at most 350 with 4 threads (3.5x) in one run: with one repeat the noise was not " \
        "measured, so no gain is claimed" in text and "beyond the noise" not in text


def test_recall_axis_fits_the_values() -> None:
    low, high = fraction_limits([0.98, 0.99, 1.0])
    assert 0.9 < low < 0.98 and 1.0 < high < 1.05
    assert fraction_limits([0.2, 0.9, 1.0]) == (0.0, 1.02)
    assert fraction_limits([]) == (0.0, 1.02)
    sweep = pd.DataFrame({"ef_search": [10, 20, 40], "recall_mean": [0.985, 0.996, 1.0],
                          "recall_p5": [0.9, 0.95, 1.0], "k": [10] * 3})
    bottom, top = ha.plot_recall_by_ef(sweep).get_ylim()
    assert bottom > 0.8 and top < 1.05


def test_overlap_colours_keep_their_meaning() -> None:
    robots = ["a", "b", "c"]
    rows = [(r1, r2, 1.0 if r1 == r2 else 0.05 + 0.01 * (r1 < r2)) for r1 in robots
            for r2 in robots]
    frame = pd.DataFrame(rows, columns=["robot1", "robot2", "jaccard"])
    image = ha.plot_robot_overlap(frame).images[0]
    assert image.get_clim() == (0.0, 1.0)  # not 0.05-0.06: a pale colour means little overlap
    counts = frame.assign(shared_nodes=[40, 3, 5, 3, 30, 7, 5, 7, 20])
    image = ha.plot_robot_overlap(counts, value="shared_nodes").images[0]
    assert image.get_clim()[0] == 0.0


def test_the_period_in_progress_is_marked_partial() -> None:
    class Frames:
        """A source of one analytics frame: remember_trends reads only this."""

        def __init__(self, frame: pd.DataFrame) -> None:
            self.frame = frame

        def analytics_frame(self, name, params, dtypes):
            return self.frame.astype(dtypes)

    monday = pd.Timestamp.now(tz="UTC").normalize() - pd.Timedelta(
        days=pd.Timestamp.now(tz="UTC").weekday())
    periods = [monday - pd.Timedelta(weeks=2), monday - pd.Timedelta(weeks=1), monday]
    raw = pd.DataFrame({"period": periods, "group": [None] * 3,
                        "remembers": [50, 48, 3], "new_memories": [40, 38, 2],
                        "shared_remembers": [5, 5, 1], "repeated_remembers": [5, 5, 0],
                        "active_robots": [3, 3, 1], "exact": [True] * 3,
                        "missing_remembers": [0] * 3})
    trends = ha.remember_trends(Frames(raw), freq="W")
    assert trends["partial"].tolist() == [False, False, True]
    ax = ha.plot_remember_trends(trends)
    assert any("partial" in text.get_text() for text in ax.get_legend().get_texts())
    hatched = [patch.get_hatch() == "//" for patch in ax.patches]
    assert len(hatched) == 9 and hatched == [False, False, True] * 3  # the last of each kind
    # A timeframe that ends before a period does cuts it short too.
    end = (monday - pd.Timedelta(days=3)).to_pydatetime()
    cut = ha.remember_trends(Frames(raw), freq="W",
                             timeframe=(dt.datetime(2000, 1, 1, tzinfo=dt.UTC), end))
    assert cut["partial"].tolist() == [False, True, True]


def test_the_tag_graph_view_is_what_the_plot_draws() -> None:
    graph = nx.Graph(weight="npmi")
    for i in range(40):
        graph.add_node(f"t{i}", nodes=100 - i, community=i % 4)
    for i in range(39):
        graph.add_edge(f"t{i}", f"t{i + 1}", weight=0.5)
    graph.add_node("lonely", nodes=1000, community=9)  # biggest, but without a tie
    view = ha.tag_graph_view(graph, max_nodes=30)
    assert view.number_of_nodes() == 30 and "lonely" not in view
    title = ha.plot_tag_graph(graph, max_nodes=30).get_title()
    assert f"the {view.number_of_nodes()} biggest" in title
    np.testing.assert_array_equal(sorted(view), sorted(f"t{i}" for i in range(30)))


def test_long_robot_names_do_not_squeeze_the_plots() -> None:
    names = ["robot-" + "x" * 64 + "-a", "robot-" + "x" * 64 + "-b"]
    activity = pd.DataFrame({"robot": names, "nodes": [30, 20], "shared_nodes": [5, 5]})
    ax = ha.plot_robot_activity(activity)
    labels = [label.get_text() for label in ax.get_yticklabels()]
    assert len(ax.patches) == 4 and len(labels) == 2  # cut to one label, still two bars
    assert all(len(label) <= 30 and label.endswith("…") for label in labels)
    overlap = pd.DataFrame([(a, b, 1.0 if a == b else 0.2) for a in names for b in names],
                           columns=["robot1", "robot2", "jaccard"])
    ax = ha.plot_robot_overlap(overlap)
    assert max(len(label.get_text()) for label in ax.get_xticklabels()) <= 30


def test_latency_claims_say_when_they_are_within_the_noise():
    from htm_analytics.tuning.advice import compare_latency

    sweep = pd.DataFrame({"ef_search": [20, 40, 80], "latency_p50_ms": [1.00, 1.10, 2.00],
                          "latency_p50_spread_ms": [0.08, 0.05, 0.05], "repeats": [2, 2, 2]})
    assert "within the noise of 2 repeats" in compare_latency(sweep, 20, 40)  # 0.10 <= 0.13
    assert "40 is 0.90 ms faster at p50 than 80" in compare_latency(sweep, 40, 80)
    noisy = sweep.assign(latency_p50_ms=[1.2, 1.1, 2.0])  # the larger setting ran faster
    assert "within the noise" in compare_latency(noisy, 20, 40)
    slower = sweep.assign(latency_p50_ms=[1.5, 1.1, 2.0])
    assert "20 is 0.40 ms slower" in compare_latency(slower, 20, 40)
    # The table beside the sentence shows QPS: a p50 gap that QPS contradicts is no verdict.
    with_qps = sweep.assign(latency_p50_ms=[0.6, 0.9, 2.0], qps=[900.0, 1000.0, 400.0])
    text = compare_latency(with_qps, 20, 40)
    assert "faster" in text and "neither is faster" in text and " is 0." not in text
    assert "20 has the lower p50 (0.60 against 0.90 ms) but 40 the higher QPS (1,000 " \
        "against 900)" in text
    agreeing = with_qps.assign(qps=[1100.0, 1000.0, 400.0])
    assert "20 is 0.30 ms faster at p50 than 40" in compare_latency(agreeing, 20, 40)
    # A gap just past the spread is printed with the decimals that show it past (0.074 >
    # 0.066, both 0.07 at two decimals).
    close = sweep.assign(latency_p50_ms=[1.000, 1.074, 2.0],
                         latency_p50_spread_ms=[0.033, 0.033, 0.05])
    assert "20 is 0.074 ms faster at p50 than 40, beyond the 0.066 ms" in \
        compare_latency(close, 20, 40)
    # One repeat measures no noise: no setting is called faster, however large the gap.
    once = agreeing.assign(latency_p50_spread_ms=0.0, repeats=1)
    assert "with one repeat the noise was not measured, so neither is called faster" in \
        compare_latency(once, 20, 80)


def test_the_ef_search_finding_claims_speed_only_as_measured():
    from types import SimpleNamespace

    from htm_analytics.advisor.vectors import ef_search
    from htm_analytics.store import DEFAULT_EF_SEARCH

    chosen = DEFAULT_EF_SEARCH // 2  # reaches the target below the setting in use
    sweep = pd.DataFrame({"ef_search": [chosen, DEFAULT_EF_SEARCH],
                          "latency_p50_ms": [1.00, 1.05], "latency_p50_spread_ms": [0.1, 0.1],
                          "repeats": [2, 2]})
    advice = SimpleNamespace(ef_search=chosen, target_recall=0.95, evidence="swept", index="i",
                             database="d", sweep=sweep)
    [finding] = ef_search(advice)
    assert "within the noise of 2 repeats" in finding["recommendation"]
    assert "faster" not in finding["recommendation"]
    [unswept] = ef_search(SimpleNamespace(**{**vars(advice), "sweep": sweep.head(1)}))
    assert f"ef_search {DEFAULT_EF_SEARCH} was not swept" in unswept["recommendation"]
