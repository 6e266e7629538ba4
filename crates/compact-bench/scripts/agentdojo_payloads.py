"""Writes AgentDojo's prompt-injection attacks as payloads for the injection bench.

The bench (`--example injection`, `COMPACT_INJECTION_PUBLIC`) reads the file this
writes; the file is never committed, so its phrasings stay ones nobody tuned the
guard on. Needs `pip install agentdojo` (tested with 0.1.35).

    python3 crates/compact-bench/scripts/agentdojo_payloads.py > /tmp/agentdojo.json

Each payload is one attack rendered by AgentDojo itself (its templates, its
injection goals, its user and model names) for one injection task. The split is
by injection task, drawn with random.Random(2026): half of each suite's tasks are
held out, so a held-out goal is never seen while tuning (the templates are shared:
there are only a handful).
"""

import json
import random
import sys
from types import SimpleNamespace

from agentdojo.attacks.attack_registry import load_attack
from agentdojo.task_suite.load_suites import get_suites

ATTACKS = [
    "important_instructions",
    "tool_knowledge",
    "ignore_previous",
    "system_message",
    "injecagent",
]
# Pipelines whose names AgentDojo turns into the model it addresses.
PIPELINES = ["gpt-4o-2024-05-13", "claude-3-5-sonnet-20241022", "gemini-1.5-pro-002"]


def main() -> None:
    rng = random.Random(2026)
    out = []
    for suite_name, suite in sorted(get_suites("v1").items()):
        tasks = sorted(suite.injection_tasks.items())
        held = set(rng.sample([t for t, _ in tasks], len(tasks) // 2))
        user_task = sorted(suite.user_tasks.items())[0][1]
        for k, (task_id, task) in enumerate(tasks):
            for a, attack_name in enumerate(ATTACKS):
                pipeline = SimpleNamespace(name=PIPELINES[(k + a) % len(PIPELINES)])
                attack = load_attack(attack_name, suite, pipeline)
                # One text per task: every placeholder gets the same one.
                text = sorted(set(attack.attack(user_task, task).values()))[0]
                out.append(
                    {
                        "id": f"agentdojo-{suite_name}-{task_id}-{attack_name}",
                        "lang": "en",
                        "split": "held_out" if task_id in held else "tune",
                        "text": text.strip(),
                    }
                )
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
