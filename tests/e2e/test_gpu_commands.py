"""Every GPU command the README, docs/ and the recipes' headers print runs here, on a CPU, for two steps: a GPU
user's first run, before their GPU meets it (tests/doc_commands.py reads the commands off the pages).

Each command runs as printed, with only what this machine cannot have replaced: the model by a twin of its shape
(tests/model_zoo.py: Qwen's module names and 151,936-row vocabulary, or Pythia's), the hub dataset by a local one of
its layout, vLLM by TRL's own generation (`--use_vllm false`: vLLM runs only on a GPU), the lengths and step counts by
tiny ones, and 8 or 16 GPUs by 2 processes on gloo (two "machines" of one process each, on 127.0.0.1, where it names
two). The recipe's keys run as it sets them: LoRA targets, activation checkpointing, schedulers, eval and save
intervals, system prompts, reward models; and the accelerate config as the command names it, bf16 included, which
DeepSpeed runs on a CPU (GRPO given --bf16 true, its default on a GPU with bf16, which the config requires).

Commands that differ only in what this machine replaces run once: `--max_steps 20` is the recipe's run, and
`accelerate launch --num_processes 8` without a config file is accelerate's default on 8 GPUs, DDP with no mixed
precision, which accelerate_configs/ddp.yaml sets too.
"""

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import doc_commands
import model_zoo
import pytest
import yaml
from conftest import MULTIPROCESS, REPO, THREADS, free_port, read_jsonl, run_script, script_python

from extras.outputs import describe_precision

MODEL_FLAGS = ("model_name_or_path", "sft_model_path", "reward_model_path", "value_model_path",
               "reward_model_name_or_path")
SIZES = {"max_steps", "total_episodes", "max_completion_length", "response_length", "output_dir"}  # set here
MODES = {"ddp": "DDP", "zero2": "DeepSpeed ZeRO-2", "zero3": "DeepSpeed ZeRO-3", "fsdp": "FSDP2"}


@dataclass(frozen=True)
class Run:
    """What a printed command runs, with what this machine replaces left out: the commands that map to one run
    once."""

    script: str
    recipe: str | None
    engine: str | None  # an accelerate config's name; None: one process
    machines: int
    flags: tuple  # the command's own flags but the replaced ones

    @property
    def id(self) -> str:
        recipe = Path(self.recipe).parent.parent.name + "/" + Path(self.recipe).stem if self.recipe else "no-recipe"
        where = f"-{self.engine}" + (f"-{self.machines}-machines" if self.machines > 1 else "") if self.engine else ""
        extra = "-" + "-".join(f.lstrip("-") for f in self.flags if f.startswith("--"))[:40] if self.flags else ""
        return f"{self.script.split('_')[0]}-{recipe}{where}{extra}"


def run_of(command: doc_commands.Command) -> Run:
    launch = command.launch
    engine = Path(launch["config_file"]).stem if "config_file" in launch else "ddp" if launch else None
    flags, skip = [], False
    for word in command.args:  # but --config (Run.recipe) and the sizes this machine sets
        if word.startswith("--"):
            skip = word[2:].split("=")[0] in SIZES | {"config"}
        if not skip:
            flags.append(word)
    return Run(command.script, command.flags.get("config"), engine, int(launch.get("num_machines", 1)), tuple(flags))


RUNS = {}
for command in filter(doc_commands.for_a_gpu, doc_commands.printed()):
    RUNS.setdefault(run_of(command), []).append(command)


def covers(run: Run) -> set:
    """What a run shows of the commands it stands for: its recipe and flags, run as written, and, launched, its script
    under the engine, and on two machines."""
    shown = {(run.script, run.recipe, run.flags)}
    if run.engine:
        shown |= {(run.script, run.engine)} | ({(run.script, "2 machines")} if run.machines > 1 else set())
    return shown


def chosen(runs) -> list[Run]:
    """The runs that show every command's recipe and flags once, and each script under each engine and on two
    machines once: a recipe in one process where a command runs it so (each launch holds the machine alone, and
    costs both cores), and a launch only where it shows something no other run does. A DDP launch of a recipe that
    also runs in one process repeats both (5 of the 10 launches, 190 s of the suite's exclusive time)."""
    one_process = {(run.script, run.recipe, run.flags) for run in runs if run.engine is None}
    order = sorted(runs, key=lambda run: (run.engine is not None and (run.script, run.recipe, run.flags) in
                                          one_process, run.engine is not None))  # a launch's own recipe first
    taken, shown = [], set()
    for run in order:
        if covers(run) - shown:
            taken.append(run)
            shown |= covers(run)
    return taken


CHOSEN = chosen(RUNS)


# The stand-ins: models by (family, reward model?), datasets by layout; each a folder and what builds it there
TWINS = {
    ("qwen", False): ("qwen2", model_zoo.build_qwen2_twin),
    ("qwen", True): ("qwen2-rm", lambda out: model_zoo.build_qwen2_twin(out, reward_model=True)),
    ("pythia", False): ("pythia", lambda out: model_zoo.build_pythia(out, vocab_size=model_zoo.PYTHIA_VOCAB)),
    ("pythia", True): ("pythia-rm", lambda out: model_zoo.build_pythia(out, reward_model=True,
                                                                       vocab_size=model_zoo.PYTHIA_VOCAB)),
    "openai/gsm8k": ("gsm8k", lambda out: model_zoo.write_gsm8k(out, n_test=2)),  # an evaluation of one generate call
    "trl-lib/tldr": ("tldr", model_zoo.write_tldr),
}


@pytest.fixture(scope="session")
def twins(tmp_path_factory) -> dict:
    """The stand-ins, built once for the pytest run, 30 s of a core: the workers share the folder, one builds it and
    the other waits."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "gpu-twins"
    with FileLock(f"{folder}.lock"):
        for name, build in TWINS.values():
            if not (folder / name).exists():
                build(folder / name)
    return {key: folder / name for key, (name, _) in TWINS.items()}


def twin_of(model: str, twins: dict, policy: str) -> Path:
    """A model's twin: of its family, or of the policy's (`my-org/my-reward-model`), a reward model where its name
    says so."""
    family = next((f for f in ("qwen", "pythia") if f in model.lower()), None) or next(
        f for f in ("qwen", "pythia") if f in policy.lower())
    return twins[family, "reward" in model.lower() or model.lower().endswith("-rm")]


def same(ran, wanted) -> bool:
    """A setting as summary.json has it, against a recipe's value or a flag's text."""
    if isinstance(ran, list | tuple) or isinstance(wanted, list):
        wanted = wanted if isinstance(wanted, list) else [wanted]
        return len(ran) == len(wanted) and all(map(same, ran, wanted))
    try:
        return float(ran) == float(wanted)
    except (TypeError, ValueError):
        return str(ran).lower() == str(wanted).lower()


def cpu_flags(run: Run, command: doc_commands.Command, twins: dict, out: Path) -> list:
    """The command's arguments, with what this machine replaces replaced."""
    recipe = command.recipe
    policy = command.setting("sft_model_path") or command.setting("model_name_or_path")
    flags, option = ["--config", REPO / run.recipe] if run.recipe else [], None
    for word in run.flags:  # a model by its twin, a hub dataset by its layout, a path of the repository's in full
        option = word[2:] if word.startswith("--") else option
        flags.append(word if word.startswith("--") else twin_of(word, twins, policy) if option in MODEL_FLAGS else
                     twins.get(word) or (REPO / word if doc_commands.is_local(word) else word))
    for key in MODEL_FLAGS + ("dataset_name",):  # the recipe's, likewise
        if recipe.get(key) and key not in command.flags:
            flags += [f"--{key}", twin_of(recipe[key], twins, policy) if key != "dataset_name" else twins[recipe[key]]]
    if recipe.get("use_vllm"):
        flags += ["--use_vllm", "false"]
    # One optimizer step of one micro-batch, the smallest: a step over 151,936 logits a token takes seconds here
    flags += ["--gradient_accumulation_steps", 1, "--output_dir", out]
    engine = yaml.safe_load((REPO / "accelerate_configs" / f"{run.engine}.yaml").read_text()) if run.engine else {}
    if run.script.startswith("grpo"):  # one prompt's group a process
        flags += ["--max_steps", 1, "--per_device_train_batch_size", command.setting("num_generations") or 8,
                  "--max_completion_length", 8, "--logging_steps", 1]
        if engine.get("mixed_precision") == "bf16":
            flags += ["--bf16", "true"]
    else:  # one PPO update of 4 completions a process
        flags += ["--total_episodes", 4 * (2 if run.engine else 1), "--per_device_train_batch_size", 4,
                  "--response_length", 8]
    return flags


def launcher(run: Run, machine_rank: int = 0, port: int = 0) -> list[str]:
    if run.engine is None:
        return []
    config = REPO / "accelerate_configs" / f"{run.engine}.yaml"
    launch = ["-m", "accelerate.commands.launch", "--config_file", str(config), "--num_processes", "2",
              "--main_process_port", str(port or free_port())]
    if run.machines > 1:
        launch += ["--num_machines", "2", "--machine_rank", str(machine_rank), "--main_process_ip", "127.0.0.1"]
    return launch


def run_command(run: Run, flags: list, tmp_path: Path) -> str:
    """The run's stdout: one process, 2 processes under the launcher, or two machines of one process each."""
    if run.machines == 1:
        return run_script(run.script, *flags, cwd=tmp_path, launcher=launcher(run), timeout=600).stdout
    port, env = free_port(), {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **THREADS}
    machines = []
    for rank in (0, 1):
        (tmp_path / f"machine{rank}").mkdir()
        machines.append(subprocess.Popen(
            [script_python(run.script), *launcher(run, rank, port), str(REPO / run.script), *map(str, flags)],
            cwd=tmp_path / f"machine{rank}", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [machine.communicate(timeout=600) for machine in machines]
    for machine, (stdout, stderr) in zip(machines, outputs):
        if machine.returncode != 0:
            pytest.fail(f"a machine exited with {machine.returncode}\n{stdout[-2000:]}\n{stderr[-4000:]}")
    return outputs[0][0]


@pytest.mark.parametrize("run", [pytest.param(run, marks=[MULTIPROCESS] if run.engine else [], id=run.id)
                                 for run in CHOSEN])
def test_a_printed_gpu_command_runs(run, twins, tmp_path):
    command = RUNS[run][0]
    out = tmp_path / "out"
    stdout = run_command(run, cpu_flags(run, command, twins, out), tmp_path)

    summary = json.loads((out / "summary.json").read_text())
    assert summary["global_step"] == 1
    processes = 2 if run.engine else 1
    mode = MODES[run.engine] if run.engine else "single process"
    assert summary["distributed"]["mode"] == mode and summary["distributed"]["processes"] == processes
    assert f"distributed: {mode}" in stdout
    # one record of the precision it trained in, said as it started: weights held in bf16 train only under
    # DeepSpeed, whose optimizer steps fp32 copies (the start line said fp32 there, before DeepSpeed converted them)
    assert f"weights: {describe_precision(summary['weights'])}" in stdout
    if {"bfloat16", "float16"} & set(summary["weights"]["trained"]):
        assert summary["weights"]["optimizer_steps"] == "float32 copies (DeepSpeed)" and "DeepSpeed" in mode
    metrics = read_jsonl(out / "metrics.jsonl")
    assert [m["step"] for m in metrics if "reward" in m] == [1]

    # the command's own settings ran: its recipe's keys, and its flags over them
    settings = {**summary["script_args"], **summary["training_args"], **summary["model_args"]}
    for key in ("learning_rate", "lr_scheduler_type", "use_peft", "lora_target_modules", "system_prompt",
                "reward_funcs", "reward_weights", "beta", "num_generations", "activation_checkpointing",
                "save_total_limit", "kl_coef", "missing_eos_penalty", "dataset_config", "dataset_prompt_column",
                "dataset_test_split"):
        if command.setting(key) is not None:
            assert same(settings[key], command.setting(key)), key
    if command.setting("use_peft"):
        targets = json.loads((out / "adapter_config.json").read_text())["target_modules"]
        assert set(targets) == set(command.setting("lora_target_modules"))
    else:
        assert (out / "model.safetensors").exists()
    if run.script.startswith("grpo") and command.setting("eval_strategy") == "steps":  # a fifth of 1 step: each
        assert [m["step"] for m in metrics if "eval_reward" in m] == [1]
    if run.script.startswith("grpo") and command.setting("save_strategy") == "steps":  # at the interval or the end
        assert [p.name for p in out.glob("checkpoint-*")] == ["checkpoint-1"]
    names = ["reward_model"] if command.setting("reward_model_path") else command.setting("reward_funcs")
    rows = read_jsonl(out / "completions.jsonl")
    assert rows and all(name in rows[0] for name in (names if isinstance(names, list) else [names]))


def test_every_printed_gpu_command_is_run():
    """The commands above are the pages': every GPU recipe is in one, and each command maps to a run."""
    recipes = {str(p.relative_to(REPO)) for p in (REPO / "recipes").glob("*/*/*.yaml")
               if doc_commands.for_a_gpu(doc_commands.parse(f"python {p.parent.name}_trl_example.py --config "
                                                            f"{p.relative_to(REPO)}", "recipe"))}
    assert recipes <= {run.recipe for run in RUNS}
    assert sum(len(commands) for commands in RUNS.values()) >= 25  # README's, docs/'s and the recipes' headers'
    assert {run.engine for run in CHOSEN} == {None, "ddp", "zero2", "zero3"}
    assert any(run.machines == 2 and run.engine == "zero3" for run in CHOSEN)  # the README's two-node line
    shown = set().union(*map(covers, CHOSEN))
    for run, commands in RUNS.items():  # each command's recipe and flags, and its launch, by one run or two
        assert covers(run) <= shown, [c.where for c in commands]
    print("\n".join(f"{run.id}: {', '.join(c.where for c in commands)}" + ("" if run in CHOSEN else " (shown by "
                     "the runs of its recipe and its engine)") for run, commands in RUNS.items()))
