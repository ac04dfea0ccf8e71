"""The opt-in extras of grpo_trl_example.py and ppo_trl_example.py, each imported when a run uses it:

    cli.py           mistakes stopped in one sentence before anything loads, refused options, a readable --help
    evaluation.py    held-out pass@k, maj@k and greedy accuracy before and after training (--eval_num_samples)
    outputs.py       metrics.jsonl, completions.jsonl, summary.json, the plots, short logs, the no-signal watchdog
    tools.py         tool-calling GRPO (--tools, --environment_factory)
    code_sandbox.py  the `code` reward's sandbox
"""
