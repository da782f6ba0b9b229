"""What the conversation-benchmark tests share: the folder of small benchmark files written
for the suite, and a LoCoMo sample of one session made of the turns and questions given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "conversations"


def locomo_sample(turns: list[dict[str, Any]], qa: list[dict[str, Any]],
                   sample_id: str = "conv-1") -> dict[str, Any]:
    return {"sample_id": sample_id, "qa": qa, "conversation": {
        "speaker_a": "A", "speaker_b": "B", "session_1": turns,
        "session_1_date_time": "1:56 pm on 8 May, 2023"}}
