"""benchmarks/compare_ppo_grpo.py --quick: the study's outputs are complete and well-formed, and its picks follow
its own sweep. The full study is a benchmark (BENCHMARKS.md), not a test."""

import importlib.util
import json
import statistics
import sys

import model_zoo
from conftest import BESIDE_MULTIPROCESS, REPO, run_script

sys.path.insert(0, str(REPO / "benchmarks"))  # where it imports `harness` from, as it does when run as a script
spec = importlib.util.spec_from_file_location("compare_ppo_grpo", REPO / "benchmarks" / "compare_ppo_grpo.py")
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)
QUICK = compare.QUICK


@BESIDE_MULTIPROCESS  # the longest tests of the suite
def test_quick_study_writes_every_run_the_table_and_the_plot(tmp_path):
    out = tmp_path / "study"
    done = run_script("benchmarks/compare_ppo_grpo.py", "--quick", "--checkpoints", 1, "--output_dir", out,
                      cwd=tmp_path, timeout=900)
    summary = json.loads((out / "summary.json").read_text())
    runs = json.loads((out / "runs.json").read_text())
    assert summary["settings"] == QUICK
    assert summary["matmul_gflops"] > 0 and f"at {summary['matmul_gflops']:.1f} GFLOP/s" in done.stdout

    # the sweep: every learning rate for both; for GRPO every group size, then every iterations count; sweep seeds only
    sweep = summary["sweep"]
    assert {(r["algo"], r["lr"]) for r in sweep} == {(a, lr) for a in ("grpo", "ppo") for lr in QUICK["lrs"]}
    assert {r["group"] for r in sweep if r["algo"] == "grpo"} == set(QUICK["groups"])
    assert {r["iterations"] for r in sweep if r["algo"] == "grpo"} == set(QUICK["iterations"])
    assert {r["kl"] for r in sweep if r["algo"] == "ppo"} == set(QUICK["kl_coefs"])
    assert {r["seed"] for r in sweep} == set(QUICK["sweep_seeds"])
    assert summary["recipes"] == {"grpo": "recipes/tiny/grpo.yaml", "ppo": "recipes/tiny/ppo.yaml"}

    def best(rows):
        means = {}
        for r in rows:
            means.setdefault((r["lr"], r["group"], r["iterations"], r["kl"]), []).append(r["reward_last_20pct"])
        return dict(zip(("lr", "group", "iterations", "kl"), max(means, key=lambda key: statistics.mean(means[key]))))

    grpo = [r for r in sweep if r["algo"] == "grpo"]
    lr = best([r for r in grpo if (r["group"], r["iterations"]) == (8, 1)])["lr"]
    group = best([r for r in grpo if r["lr"] == lr and r["iterations"] == 1])["group"]
    assert summary["picks"]["grpo"] == best([r for r in grpo if r["lr"] == lr and r["group"] == group])
    ppo = [r for r in sweep if r["algo"] == "ppo"]
    ppo_lr = best([r for r in ppo if r["kl"] == QUICK["kl_coefs"][0]])["lr"]
    assert summary["picks"]["ppo"] == best([r for r in ppo if r["lr"] == ppo_lr])

    # the study: each algorithm at its picks, every budget and seed, each run's curve up to its budget
    study = [r for r in runs if r["stage"] == "study"]
    assert sorted((r["algo"], r["budget"], r["seed"]) for r in study) == sorted(
        (a, b, s) for a in ("grpo", "ppo") for b in QUICK["budgets"] for s in QUICK["seeds"])
    for r in study:
        assert {key: r[key] for key in ("lr", "group", "iterations", "kl")} == summary["picks"][r["algo"]]
        completions, seconds, rewards = zip(*r["curve"])
        assert completions[-1] == r["budget"] and list(completions) == sorted(set(completions))
        assert list(seconds) == sorted(seconds) and 0 < seconds[-1] <= r["wall_s"]
        assert all(0 <= x <= 1 for x in (*rewards, r["pass@1 before"], r["pass@1 after"]))
        assert r["peak_rss_mib"] > 100
        assert r["s_per_100"] > 0 if len(r["curve"]) > 1 else r["s_per_100"] is None  # PPO's one update: not timed

        # the held-out curve: before, the checkpoint halfway (GRPO's 4 steps; PPO's one update has none before its
        # end), after; the checkpoint's point is what --eval_only wrote for it
        heldout = r["heldout"]
        assert [p["completions"] for p in heldout] == ([0, 32, 64] if r["algo"] == "grpo" else [0, 64])
        assert (heldout[0]["pass@1"], heldout[-1]["pass@1"]) == (r["pass@1 before"], r["pass@1 after"])
        assert [p["seconds"] for p in heldout] == sorted(p["seconds"] for p in heldout)
        assert all(0 <= p[key] <= 1 for p in heldout for key in ("pass@1", "greedy"))
        if r["algo"] == "grpo":
            run_dir = next((out / "runs").glob(f"study-grpo-*-s{r['seed']}"))
            only = json.loads((run_dir / "eval-checkpoint-2" / "eval.json").read_text())["model"]["accuracy"]
            assert (heldout[1]["pass@1"], heldout[1]["greedy"]) == (only["pass@1"], only["greedy_accuracy"])

    table = summary["table"]
    assert set(table) == {f"{a} {b}" for a in ("grpo", "ppo") for b in QUICK["budgets"]}
    for key, row in table.items():
        runs_here = [r for r in study if f"{r['algo']} {r['budget']}" == key]
        assert row["pass@1 after"]["n"] == len(QUICK["seeds"])
        assert row["pass@1 after"]["mean"] == round(statistics.mean(r["pass@1 after"] for r in runs_here), 4)
        below = sum(r["pass@1 after"] < r["pass@1 before"] for r in runs_here)
        assert row["ended_below_start"] == below / len(runs_here)
        assert row["greedy after"]["mean"] == round(statistics.mean(r["heldout"][-1]["greedy"] for r in runs_here), 4)
        assert [p["completions"] for p in row["heldout"]] == [p["completions"] for p in runs_here[0]["heldout"]]
        assert key in done.stdout
    assert (out / "compare_ppo_grpo.png").read_bytes()[:4] == b"\x89PNG"


@BESIDE_MULTIPROCESS
def test_the_study_runs_on_the_real_models_recipes(tmp_path):
    """Each algorithm from its SmolLM2 recipe, for one tiny budget: the real-model study's path end to end (the study
    itself is a benchmark, issue 25). Completions are counted in the recipes' own batches (16 per step and update).
    One value of each setting: nothing to sweep (the quick study above tests the sweep). The model is a tiny chat
    model (model_zoo.build_qwen2), named over the recipes': four SmolLM2 runs were 200 s of a core, and what runs
    SmolLM2 with each recipe is tests/e2e/test_smollm2.py."""
    out = tmp_path / "study"
    model = model_zoo.build_qwen2(tmp_path / "chat-model")
    recipes = REPO / "recipes" / "SmolLM2-135M-Instruct"
    run_script("benchmarks/compare_ppo_grpo.py", "--grpo_config", recipes / "grpo" / "config_chat_addition.yaml",
               "--ppo_config", recipes / "ppo" / "config_chat_addition_lora.yaml", "--grpo_lrs", 2e-5,
               "--ppo_lrs", 3e-4, "--kl_coefs", 0.05, "--groups", 8, "--iterations", 1, "--budgets", 16,
               "--seeds", 1, 2, "--sweep_seeds", 101, "--eval_num_samples", 1, "--extra_args",
               f"--eval_max_prompts 2 --model_name_or_path {model}",
               "--parallel", 1, "--output_dir", out, cwd=tmp_path, timeout=900)  # one core; the other is a worker's
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sweep"] == [] and summary["picks"]["grpo"]["lr"] == 2e-5 and summary["picks"]["ppo"]["kl"] == 0.05
    assert summary["recipes"] == {"grpo": "recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml",
                                  "ppo": "recipes/SmolLM2-135M-Instruct/ppo/config_chat_addition_lora.yaml"}
    study = [r for r in json.loads((out / "runs.json").read_text()) if r["stage"] == "study"]
    assert sorted((r["algo"], r["seed"]) for r in study) == [("grpo", 1), ("grpo", 2), ("ppo", 1), ("ppo", 2)]
    for r in study:
        assert f"--config recipes/SmolLM2-135M-Instruct/{r['algo']}/" in r["command"]
        assert r["curve"][-1][0] == 16  # one GRPO step of 16 completions, one PPO update of 16
    assert (out / "compare_ppo_grpo.png").read_bytes()[:4] == b"\x89PNG"
