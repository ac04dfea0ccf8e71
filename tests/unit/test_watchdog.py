"""The no-signal watchdog's advice fits the trainer it watches: GRPO's groups, PPO's single completions, and a task
already solved, which is no fault. Fed the logs the trainers write, on the callback itself."""

from types import SimpleNamespace

import pytest

from extras.watchdogs import NoSignalWatchdog

STATE = SimpleNamespace(is_world_process_zero=True, global_step=3)


def advice(watchdog, logs: list[dict], capsys) -> str:
    control = SimpleNamespace(should_training_stop=False)
    for log in logs:
        watchdog.on_log(None, STATE, control, logs=log)
    return capsys.readouterr().out.strip(), control.should_training_stop


@pytest.mark.parametrize("groups", [True, False], ids=["grpo", "ppo"])
def test_advice_names_only_the_trainers_own_options(groups, capsys):
    said, stopped = advice(NoSignalWatchdog(3, stop=True, groups=groups), [{"reward": 0.25}] * 3, capsys)
    assert said.startswith("WARNING: no learning signal for 3 logging steps (step 3): the mean reward has stayed at")
    assert ("--num_generations" in said) is groups and "--temperature" in said and stopped


@pytest.mark.parametrize("groups", [True, False], ids=["grpo", "ppo"])
def test_a_reward_held_at_its_maximum_is_a_solved_task_not_a_fault(groups, capsys):
    logs = [{"reward": 2.0, "groups_without_spread": 1.0}] * 3
    said, stopped = advice(NoSignalWatchdog(3, stop=True, groups=groups, maximum=2.0), logs, capsys)
    assert said.splitlines()[0] == ("NOTE: every completion has scored the reward's maximum, 2, for 3 logging steps "
                                    "(step 3): the policy solves these prompts, and there is nothing left to learn "
                                    "from them; harder prompts would teach it more.")
    assert "WARNING" not in said and "fixes" not in said and stopped
    # below the maximum it is a warning again
    said, _ = advice(NoSignalWatchdog(3, groups=groups, maximum=2.0), [{"reward": 1.0}] * 3, capsys)
    assert said.startswith("WARNING: no learning signal")


@pytest.mark.parametrize("groups", [True, False], ids=["grpo", "ppo"])
def test_a_flat_reward_far_from_the_reference_is_a_collapse_not_a_missing_signal(groups, capsys):
    """Issue 83: a PPO run's reward was 0.575 at update 1 and 0 from update 2, its KL 3 to 9, and the warning said
    'no learning signal', whose fixes (more samples, partial credit) cannot help a policy that ran away. Held far
    from its reference, a flat reward is said to be a collapse with what holds the policy nearer; near it, or with
    no KL logged (GRPO at beta 0), it is no learning signal as before."""
    key, scale = ("kl", 0.1) if groups else ("objective/kl", 1.0)
    fell = [{key: scale * k, "reward": r} for k, r in [(0.3, 0.575), (2.9, 0.0), (3.5, 0.0), (5.0, 0.0)]]
    said, stopped = advice(NoSignalWatchdog(3, stop=True, groups=groups), fell, capsys)
    assert said.startswith(f"WARNING: the policy has collapsed (step 3): the mean reward has stayed at 0 for 3 logging "
                           f"steps while it has moved far from its reference ({key} {3.8 * scale:.3g}, past "
                           f"{scale:g})") and "no learning signal" not in said and stopped
    assert ("--kl_coef" in said and "--num_ppo_epochs" in said) if not groups else "--beta" in said
    near = [{key: scale * 0.5, "reward": 0.0}] * 3
    for logs in (near, [{"reward": 0.0}] * 3):
        assert advice(NoSignalWatchdog(3, groups=groups), logs, capsys)[0].startswith("WARNING: no learning signal")


@pytest.mark.parametrize("ppo", [True, False], ids=["ppo", "grpo"])
def test_a_kl_that_runs_away_while_the_reward_falls_is_said_once(ppo, capsys):
    """Issue 75: a PPO run whose KL to the reference reached 2.1, then 3.7, while its reward fell and its held-out
    pass@1 went from 0.087 to 0.013, said nothing while it trained. A KL that rises while the reward rises, or holds
    within its noise (the default GRPO run's, at step 170), is a run learning: no alarm."""
    from extras.watchdogs import DriftWatch

    key, scale = ("objective/kl", 1.0) if ppo else ("kl", 0.1)
    climbing = [{key: scale * k, "reward": r} for k, r in [(0.5, 0.36), (0.6, 0.35), (0.7, 0.37), (0.8, 0.36),
                                                             (1.5, 0.3), (2.1, 0.25), (3.0, 0.19), (3.7, 0.2),
                                                             (4.0, 0.18)]]
    said, _ = advice(DriftWatch(ppo=ppo), climbing, capsys)
    assert said.count("WARNING: the policy is running away from its reference without gaining") == 1
    assert f"({key}) rose from {0.5 * scale:.3g} to {1.85 * scale:.3g} since the run's first log" in said  # log 7
    # issue 83: a PPO policy that fell within the first window (reward 0.575 at update 1, 0 from update 2, KL 3 to 9)
    # has every later window alike, and was said to have no learning signal: it is said to run away
    fell = [{key: scale * k, "reward": r} for k, r in [(0.3, 0.575), (2.9, 0.0), (3.5, 0.0), (5.0, 0.0), (6.0, 0.0),
                                                         (9.0, 0.0), (7.0, 0.0), (8.0, 0.0)]]
    said, _ = advice(DriftWatch(ppo=ppo), fell, capsys)
    assert f"({key}) rose from {0.3 * scale:.3g} to {4.35 * scale:.3g} since the run's first log" in said
    assert ("--kl_coef" in said and "--num_ppo_epochs" in said) if ppo else "--beta" in said
    learning = [{key: scale * k, "reward": r} for k, r in [(0.5, 0.3), (0.6, 0.35), (0.7, 0.4), (0.8, 0.42),
                                                             (1.5, 0.5), (2.1, 0.55), (3.7, 0.6), (4.0, 0.6)]]
    flat = [{key: scale * k, "reward": r} for k, r in [(0.5, 0.75), (0.6, 0.8), (0.7, 0.7), (0.8, 0.76),
                                                         (1.5, 0.73), (2.1, 0.7), (3.7, 0.78), (4.0, 0.72)]]
    tiny = [{key: scale * k / 10, "reward": 0.3 - k / 100} for k in (0.1, 0.2, 0.3, 0.3, 1, 2, 3, 4)]  # below floor
    for logs in (learning, flat, tiny):
        assert advice(DriftWatch(ppo=ppo), logs, capsys)[0] == ""


@pytest.mark.parametrize("ppo", [True, False], ids=["ppo", "grpo"])
def test_a_policy_that_gives_one_answer_to_every_prompt_is_said_to_have_collapsed(ppo, capsys):
    """Issue 83: a GRPO run gave `<answer>1</answer>` to all 16 prompts for its last 43 steps, and nothing said so. One
    answer to every prompt of the batch for `patience` logs is said once while training, and in the closing summary
    while it lasts; a group of one prompt's completions alike, or answers that differ, is no collapse."""
    from extras.summary import one_answer
    from extras.watchdogs import OneAnswer

    batches = iter([])
    watch = OneAnswer(lambda: next(batches), patience=3, ppo=ppo)
    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[watch]))

    def asked(answers, prompts=range(4)):
        return [{"prompt": f"how many? {i}", "completion": answer} for i in prompts for answer in answers]

    one = [asked(["<answer>1</answer>", "<answer>1</answer> "], range(4 * k, 4 * k + 4)) for k in range(4)]
    batches = iter([asked(["<answer>1</answer>", "<answer>2</answer>"]), asked(["<answer>1</answer>"], [0])] * 3
                   + [asked(["<answer>7</answer>"]), *one, asked(["<answer>2</answer>"])])
    said = [advice(watch, [{"reward": 0.3}], capsys)[0] for _ in range(10)]
    assert said[:9] == [""] * 9  # answers that differ; one prompt's group alike; one answer, then another
    assert said[9].startswith("WARNING: the policy has given one answer to all 12 prompts of the last 3 logs (step 3): "
                              "'<answer>1</answer>'. It has collapsed onto it")
    assert ("--kl_coef" in said[9]) is ppo
    advice(watch, [{"reward": 0.3}], capsys)
    assert one_answer(trainer) == [
        "  WARNING: the policy ended giving one answer, '<answer>1</answer>', to all 16 prompts of its last 4 logs, up "
        "to step 3: it collapsed onto it (completions.jsonl)"]
    assert advice(watch, [{"reward": 0.3}], capsys)[0] == "" and one_answer(trainer) == []  # another answer: over
