"""Retrieval on a conversational benchmark (LoCoMo, LongMemEval, JSON Lines), every strategy.

Usage: python benchmarks/bench_conversations.py FILE [--embedder minilm] [--split held-out]
       [--strategies vector,fulltext_any,rrf,vector_bm25] [--k 10]
       [--out bench-results/conversations]

FILE is the user's own copy of the benchmark (LoCoMo's ``data/locomo10.json`` from
snap-research/locomo is CC BY-NC 4.0 and is not shipped). Each conversation is replayed into a
scratch database on the embedded server (or HTM_DBURL's server) by
``htm_analytics.evaluate_conversations`` and dropped afterwards. ``--split tune`` keeps
LoCoMo's conv-26, conv-30 and conv-41 (the conversations the default was tuned on; in a file
without those names, its first three conversations), ``--split held-out`` the others.
``--out`` writes the per-question frame, which holds the benchmark's questions: keep it out of
the repository (``bench-results/`` is ignored by git).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

from htm_analytics.agent.embeddings import get_embedder
from htm_analytics.store.connection import mask_url, resolve_database_url
from htm_analytics.tuning.conversation_formats import read_conversations
from htm_analytics.tuning.conversations import evaluate_conversations, plot_conversations

matplotlib.use("Agg")
STRATEGIES = "vector,fulltext_any,rrf,vector_bm25"
TUNE = ("conv-26", "conv-30", "conv-41")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--format", default=None)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--strategies", default=STRATEGIES)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--split", choices=["all", "tune", "held-out"], default="all")
    parser.add_argument("--scope", choices=["conversation", "benchmark"], default="conversation")
    parser.add_argument("--bare-turns", action="store_true",
                        help="remember the turn's text without 'speaker: '")
    parser.add_argument("--out", default=None, help="folder for the CSV files and the plot")
    args = parser.parse_args()
    conversations = read_conversations(args.file, format=args.format)
    names = [c.conversation_id for c in conversations]
    tuning = set(TUNE) if set(TUNE) <= set(names) else set(names[:len(TUNE)])
    if args.split != "all":
        conversations = [c for c in conversations
                         if (c.conversation_id in tuning) == (args.split == "tune")]
    started = time.perf_counter()
    embedder = get_embedder(args.embedder)
    print(f"{mask_url(resolve_database_url())}; {len(conversations)} conversations "
          f"({', '.join(c.conversation_id for c in conversations[:12])}"
          f"{' ...' if len(conversations) > 12 else ''}), embedder {embedder.name}/"
          f"{embedder.model}, k={args.k}, scope {args.scope}, "
          f"{'bare turns' if args.bare_turns else 'speaker: turn'}")
    result = evaluate_conversations(conversations, strategies=args.strategies.split(","),
                                    k=args.k, embedding_service=embedder, scope=args.scope,
                                    speaker_prefix=not args.bare_turns)
    print(f"\n## every strategy, all answerable questions ({time.perf_counter() - started:.0f} s"
          " with the replay)\n")
    k = args.k
    overall = result.summary.query("category == 'all'").drop(columns=["category", "k"])
    print(overall.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print("\n## per category\n")
    table = result.summary.query("category != 'all'").pivot(
        index="category", columns="strategy", values=f"recall_any_at_{k}")
    counts = result.summary.query("category != 'all'").groupby("category")["questions"].first()
    print(table.assign(questions=counts).to_string(float_format=lambda v: f"{v:.3f}"))
    if len(result.abstention):
        print("\n## abstention questions: share for which something was returned\n")
        print(result.abstention.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    totals = result.conversations[["turns", "memories", "questions", "abstention",
                                   "unresolved"]].sum()
    print(f"\n{totals['turns']} turns ({totals['memories']} memories), {totals['questions']} "
          f"scored questions, {totals['abstention']} abstention, {totals['unresolved']} "
          "dropped (no evidence id names a turn)")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        result.summary.to_csv(out / "conversations.csv", index=False)
        result.per_question.to_csv(out / "conversations-per-question.csv", index=False)
        plot_conversations(result.summary).figure.savefig(out / "conversations.png", dpi=110)


if __name__ == "__main__":
    main()
