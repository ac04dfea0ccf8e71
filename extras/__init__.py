"""The opt-in extras of grpo_trl_example.py and ppo_trl_example.py, each imported when a run uses it:

    runtime.py          how a run starts and ends: Ctrl-C in one line, the trl named (PPO: in .venv-ppo from .venv),
                        a CPU's OpenMP wait and LM-head scoring, the upstream notices silenced while it runs
    cli.py              the command line, parsed once: mistakes in one sentence, refused options, the settings line,
                        and the default run, which names no model
    help.py             --help's first screen: what a user sets first, the defaults a run takes
    checks.py           the run's paths, models, launch and packages, checked before anything loads
    lora_targets.py     --lora_target_modules checked against the model's module names, before it loads
    run_folder.py       --output_dir: a new folder, or the run it holds continued; nothing removed the run did not write
    evaluation.py       held-out pass@k, maj@k and greedy accuracy before and after training (--eval_num_samples)
    stats.py            the held-out figures: pass@k, maj@k, means, and standard errors over the prompts
    during_training.py  the held-out curve during training, and the best checkpoint by it (--eval_strategy steps)
    eval_only.py        a saved model or adapter evaluated once, as a run evaluates its policy (--eval_only)
    outputs.py          what a run records as it trains: metrics.jsonl, completions.jsonl, short logs, how it starts
    watchdogs.py        the warnings while it trains: no learning signal, one answer to every prompt, a runaway KL
    plots.py            reward_curve.png and training_curves.png
    summary.py          the end of a run: summary.json, the plots and the closing summary
    tools.py            tool-calling GRPO (--tools, --environment_factory)
    code_sandbox.py     the `code` reward's sandbox
    ppo.py              PPO's checks, evaluation, DeepSpeed, resume and stop on request, which trl 1.12's PPOTrainer
                        lacks
    export.py           a run's model merged, as a GGUF file, or answering prompts (python -m extras.export RUN)
"""
