"""The no-signal watchdog's advice fits the trainer it watches: GRPO's groups, PPO's single completions, and a task
already solved, which is no fault. Fed the logs the trainers write, on the callback itself."""

from types import SimpleNamespace

import pytest

from extras.outputs import NoSignalWatchdog

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
    logs = [{"reward": 2.0, "frac_reward_zero_std": 1.0}] * 3
    said, stopped = advice(NoSignalWatchdog(3, stop=True, groups=groups, maximum=2.0), logs, capsys)
    assert said.splitlines()[0] == ("NOTE: every completion has scored the reward's maximum, 2, for 3 logging steps "
                                    "(step 3): the policy solves these prompts, and there is nothing left to learn "
                                    "from them; harder prompts would teach it more.")
    assert "WARNING" not in said and "fixes" not in said and stopped
    # below the maximum it is a warning again
    said, _ = advice(NoSignalWatchdog(3, groups=groups, maximum=2.0), [{"reward": 1.0}] * 3, capsys)
    assert said.startswith("WARNING: no learning signal")
