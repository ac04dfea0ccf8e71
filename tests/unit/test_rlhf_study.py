"""benchmarks/rlhf_study.py: which finished runs it reports instead of running again, and the figure it draws."""

import json
import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))  # where it imports `harness` from, as it does when run as a script
import rlhf_study  # noqa: E402
import yaml  # noqa: E402

BUILD = {"held_out_agreement": {"all": 0.84}, "seconds": {"all": 516}}


@pytest.fixture
def finished(tmp_path, monkeypatch):
    """A finished GRPO run, seed 1, of the recipe as it is against BUILD; a run started afresh raises."""
    monkeypatch.setattr(rlhf_study, "RUNS", tmp_path)

    def must_not_run(cmd, *args, **kwargs):
        raise AssertionError(f"ran again: {cmd}")

    monkeypatch.setattr(rlhf_study, "run_logged", must_not_run)
    monkeypatch.setattr(rlhf_study, "matmul_gflops", lambda threads: 100.0)
    script, config, _ = rlhf_study.RECIPES["grpo"]
    command = (f"python {script} --config {config} --seed 1 --output_dir "
               f"{rlhf_study.repo_relative(tmp_path / 'grpo-seed1')}")
    recipe = yaml.safe_load((REPO / config).read_text())
    (tmp_path / "grpo-seed1").mkdir()
    done = {"algo": "grpo", "seed": 1, "command": command, "true gain": 0.4}
    (tmp_path / "grpo-seed1" / "run.json").write_text(json.dumps(done | {"recipe": recipe, "reward_model": BUILD}))
    return tmp_path / "grpo-seed1" / "run.json", recipe


def test_a_finished_run_is_reported_only_with_the_same_recipe_settings_and_reward_model(finished):
    path, recipe = finished
    assert rlhf_study.run("grpo", 1, [], 1, BUILD)["true gain"] == 0.4  # the same: reported, not run
    with pytest.raises(AssertionError, match="ran again"):  # another flag
        rlhf_study.run("grpo", 1, ["--max_steps", "2"], 1, BUILD)
    with pytest.raises(AssertionError, match="ran again"):  # another reward model
        rlhf_study.run("grpo", 1, [], 1, {**BUILD, "seconds": {"all": 517}})
    for changed in ({**recipe, "learning_rate": 2e-5}, None):  # the recipe's settings then, or none kept
        run = json.loads(path.read_text())
        path.write_text(json.dumps(run | {"recipe": changed}))
        with pytest.raises(AssertionError, match="ran again"):
            rlhf_study.run("grpo", 1, [], 1, BUILD)


def test_the_comparison_figure_is_a_small_png(tmp_path):
    def runs(gain: float) -> list[dict]:
        return [{"algo": algo, "seed": seed, "true gain": gain + seed / 100, "kl after": 5.0 + seed}
                for algo in ("grpo", "ppo") for seed in (1, 2, 3)]

    studies = [{"label": label, "reward_model": {"held_out_agreement": {"all": agreement}}, "runs": runs(gain)}
               for label, agreement, gain in (("then", 0.68, 0.1), ("now", 0.84, 0.4))]
    curves = {algo: {seed: [(16 * step, step / 10, step / 40) for step in range(1, 21)] for seed in (1, 2, 3)}
              for algo in ("grpo", "ppo")}
    rlhf_study.comparison(studies, curves, tmp_path / "figure.png")
    png = (tmp_path / "figure.png").read_bytes()
    assert png[:4] == b"\x89PNG" and len(png) < 200_000  # docs/ holds one: under 200 KB


def test_agreement_drift_counts_the_pairs_the_reward_model_orders_as_the_truth(tmp_path, monkeypatch):
    """Right on every counted pair of the first steps' completions, wrong on every one of the last steps'; the one
    pair it gets the other way ("near" against "text 3") is not counted: their true scores are under 0.1 apart."""
    monkeypatch.setattr(rlhf_study, "RUNS", tmp_path)
    (tmp_path / "grpo-seed1").mkdir()
    truth = {f"text {i}": i / 5 for i in range(4)} | {"near": 0.65}
    learned = truth | {"near": 0.55}  # below "text 3" (0.6), which the truth puts below it
    monkeypatch.setattr(rlhf_study, "sentiment_reward", lambda completions: [truth[c] for c in completions])
    rows = [{"step": step, "prompt": "p", "completion": text, "reward_model": learned[text] * (1 if step < 3 else -1)}
            for step in range(1, 5) for text in truth]
    (tmp_path / "grpo-seed1" / "completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    drift = rlhf_study.agreement_drift(rlhf_study.scored("grpo", 1), steps=2)
    assert drift == {"RM right, first 2 steps": 1.0, "RM right, last 2 steps": 0.0}
