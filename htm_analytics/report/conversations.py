"""The report's "Conversation benchmark" section (:func:`~htm_analytics.evaluate_conversations`)."""

from __future__ import annotations

import pandas as pd

from ..tuning.conversations import ConversationEvaluation, plot_conversations
from .render import Figure, Section, counted

__all__ = ["conversation_section"]


def conversation_section(result: ConversationEvaluation) -> Section:
    """Strategy x category table of ``recall_any@k``, every metric over all questions, the
    abstention questions and a bar chart, from an evaluation (or its JSON document read back
    with :meth:`ConversationEvaluation.from_json`)."""
    summary = result.summary
    if not len(summary):
        return Section("conversations", "Conversation benchmark",
                       text="No conversation question was scored.")
    k = int(summary["k"].iloc[0])
    recall = f"recall_any_at_{k}"
    overall = summary[summary["category"] == "all"].drop(columns=["category", "k"])
    best = overall.sort_values([recall, f"mrr_at_{k}"], ascending=False).iloc[0]
    categories = summary[summary["category"] != "all"]
    table = categories.pivot(index="category", columns="strategy", values=recall)
    table = table.reindex(columns=list(dict.fromkeys(summary["strategy"])))
    questions = categories.groupby("category")["questions"].first()
    by_category = table.assign(questions=questions).reset_index()
    by_category.columns.name = None
    counts = result.conversations
    scored = int(counts["questions"].sum()) if len(counts) else int(best["questions"])
    text = (f"{counted(len(counts), 'conversation')} replayed into scratch memory (each "
            "speaker a robot, each turn a memory at its session's time) and "
            f"{counted(scored, 'question')} with labelled evidence turns asked of every "
            f"search strategy, k = {k}, cache off. recall_any@{k} is the share of questions "
            f"with at least one evidence turn in the top {k}, recall_all@{k} those with all "
            "of them; nothing is judged by an LLM.")
    if result.interrupted:
        text += "\n\nThe run was interrupted: these are the conversations finished before it."
    tables: list[tuple[str, pd.DataFrame]] = [
        (f"recall_any@{k} per question category (rows) and strategy (columns)", by_category),
        ("Every metric over all answerable questions, per strategy", overall)]
    if len(result.abstention):
        tables.append(("Questions that should find nothing: share for which something was "
                       "returned", result.abstention))
    section = Section(
        "conversations", "Conversation benchmark", text=text,
        findings=[f"Conversations: {best['strategy']} finds an evidence turn in the top {k} "
                  f"for {best[recall]:.1%} of {counted(int(best['questions']), 'question')} "
                  f"(MRR@{k} {best[f'mrr_at_{k}']:.3f})."],
        tables=tables,
        data={"summary": summary, "abstention": result.abstention,
              "conversations": counts})
    section.figures.append(Figure.from_axes(
        plot_conversations(summary),
        f"recall_any@{k} per question category and strategy; 'all' is every answerable "
        "question."))
    return section
