"""Every option either acts or stops the run, and what a run parses is what its recipe and flags say.

The scripts parse every field of TRL's configs (GRPOConfig / PPOConfig include transformers' TrainingArguments),
of ModelConfig and of their own arguments. Those that would train silently wrong are each script's REFUSED, with
a reason; those the trainer never reads, or computes itself, are extras/cli.py's UNREAD and COMPUTED, checked
against the trainers' source by test_option_audit.py; every other one was checked to act (trl 1.12.0, transformers
5.23: the audit read the trainers' code paths and ran the doubtful ones; trl 1.16.0, GRPO's now, has the same GRPOConfig
fields, and test_option_audit.py passes on it). AUDITED holds a digest of the acting fields
so audited: an upgrade that adds, removes or renames a field fails test_every_option_is_audited until the field is
sorted, and the digest updated.
"""

import contextlib
import hashlib
import io
from dataclasses import asdict, fields

import pytest
import yaml
from conftest import ALGOS, TINY_MODEL, ppo_script

import grpo_trl_example as grpo
from extras import cli

ppo = ppo_script()
SCRIPTS = {"grpo": grpo, "ppo": ppo}
AUDITED = {"grpo": "a3c1dd1e451a", "ppo": "e0f25bf1a897"}  # sha256 of the acting fields, sorted and space-joined


def all_fields(name: str) -> set[str]:
    return {f.name for cls in SCRIPTS[name].make_parser().dataclass_types for f in fields(cls)}


def refused(name: str) -> dict[str, str]:
    config = SCRIPTS[name].make_parser().dataclass_types[1].__name__
    return {**dict.fromkeys(cli.UNREAD[config] + cli.COMPUTED.get(config, []), "never read, or computed"),
            **SCRIPTS[name].REFUSED}


@pytest.mark.parametrize("name", ALGOS)
def test_every_option_is_audited(name):
    assert set(refused(name)) <= all_fields(name), set(refused(name)) - all_fields(name)
    acting = sorted(all_fields(name) - set(refused(name)))
    digest = hashlib.sha256(" ".join(acting).encode()).hexdigest()[:12]
    assert digest == AUDITED[name], (
        f"the options changed (digest {digest}): check what each field does in the trainer, refuse the ones it does "
        f"not read (extras/cli.py's UNREAD, or the script's REFUSED), then update AUDITED. Acting now: {acting}")


@pytest.mark.parametrize("name", ALGOS)
def test_each_refused_option_is_refused_when_set(name):
    parser = SCRIPTS[name].make_parser()
    defaults = vars(parser.parse_known_args([])[0])
    values = parser.parse_known_args([])[0]
    cli.refuse(refused(name), defaults, values)  # the defaults pass: no false alarm
    for option in refused(name):
        default = getattr(values, option)
        setattr(values, option, object())
        with pytest.raises(SystemExit, match=f"error: --{option} is not supported here: "):
            cli.refuse(refused(name), defaults, values)
        setattr(values, option, default)


# (script, flags, recipe keys, the option refused): as a flag, as a key of a --config recipe, and both at once
REFUSED = [
    ("ppo", {"eval_delay": "2"}, {}, "eval_delay"),
    ("ppo", {}, {"logging_steps": 3}, "logging_steps"),
    ("ppo", {"fp16": "true"}, {}, "fp16"),
    ("ppo", {}, {"max_grad_norm": 0.1}, "max_grad_norm"),
    ("ppo", {"max_grad_norm": 0.5}, {"max_grad_norm": 0.1}, "max_grad_norm"),
    ("ppo", {"learning_rate": 1e-4}, {"logging_steps": 3, "learning_rate": 1e-5}, "logging_steps"),
    ("ppo", {"max_steps": 3}, {}, "max_steps"),
    ("grpo", {}, {"remove_unused_columns": True}, "remove_unused_columns"),
    ("grpo", {"remove_unused_columns": "true"}, {"remove_unused_columns": True}, "remove_unused_columns"),
    ("grpo", {"gradient_checkpointing": "true"}, {}, "gradient_checkpointing"),
]


@pytest.mark.parametrize("name, flags, keys, option", [pytest.param(*case, marks=pytest.mark.ppo_trainer)
                                                       if case[0] == "ppo" else case for case in REFUSED])
def test_refused_from_a_flag_a_recipe_key_or_both(tmp_path, name, flags, keys, option):
    argv = [str(a) for k, v in flags.items() for a in (f"--{k}", v)]
    if keys:
        (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(keys))
        argv += ["--config", str(tmp_path / "recipe.yaml")]
    with pytest.raises(SystemExit, match=f"error: --{option} is not supported here: "):
        cli.parse(SCRIPTS[name].make_parser(), SCRIPTS[name].REFUSED, argv)


@pytest.mark.ppo_trainer
def test_ppo_accepts_the_options_its_trainer_reads(tmp_path):
    """PPOTrainer trains num_train_epochs x the dataset's prompts when total_episodes is unset, and gathers ZeRO-3's
    weights for generation unless ds3_gather_for_generation is false: both act, as a flag or a recipe key."""
    (tmp_path / "recipe.yaml").write_text("num_train_epochs: 1\n")
    for argv in (["--ds3_gather_for_generation", "false", "--num_train_epochs", "1"],
                 ["--ds3_gather_for_generation", "false", "--config", str(tmp_path / "recipe.yaml")]):
        _, training_args, _ = cli.parse(ppo.make_parser(), ppo.REFUSED, argv)
        assert (training_args.ds3_gather_for_generation, training_args.num_train_epochs) == (False, 1)


@pytest.mark.ppo_trainer
@pytest.mark.parametrize("option", ["batch_size", "world_size"])
def test_ppo_refuses_what_its_trainer_computes_saying_so(option):
    with pytest.raises(SystemExit, match=f"--{option} is not supported here: PPOConfig's trainer computes it "):
        cli.parse(ppo.make_parser(), ppo.REFUSED, [f"--{option}", "3"])


@pytest.mark.parametrize("name", ALGOS)
def test_a_recipe_of_acting_options_is_not_refused(tmp_path, name):
    """A recipe that sets options that act, one from each of the three dataclasses, runs, and its values arrive."""
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump({"learning_rate": 1e-5, "lora_r": 4, "system_prompt": "Hi."}))
    script_args, training_args, model_args = cli.parse(SCRIPTS[name].make_parser(), SCRIPTS[name].REFUSED,
                                                       ["--config", str(tmp_path / "recipe.yaml"), "--seed", "3"])
    assert (training_args.learning_rate, model_args.lora_r, script_args.system_prompt, training_args.seed) == \
           (1e-5, 4, "Hi.", 3)


def resolved(parsed) -> list[dict]:
    return [{f.name: getattr(args, f.name) for f in fields(args)} for args in parsed]


@pytest.mark.parametrize("name", ALGOS)
def test_the_default_run_is_its_recipe(name, monkeypatch, tmp_path):
    """A run that names no model is `--config recipes/tiny/<algo>.yaml` from the repository root (its paths then
    relative), and a recipe of one's own replaces the default run's settings rather than adding to them; a recipe
    that names no model stops in one line, where it would otherwise train the bundled model with its settings."""
    import os

    from conftest import REPO, TINY_MODEL

    monkeypatch.chdir(REPO)
    script = SCRIPTS[name]
    plain = resolved(script.parse_args([]))
    recipe = resolved(script.parse_args(["--config", f"recipes/tiny/{name}.yaml"]))
    for a, b in zip(plain, recipe):
        assert a.keys() == b.keys()
        for key in a:
            if key == "output_dir":  # where it holds a run, the default run alone takes the next free one (below)
                continue
            assert a[key] == (os.path.abspath(b[key]) if key in ("model_name_or_path", "dataset_name") else b[key]), key
    other = tmp_path / "a-model-and-a-seed.yaml"
    other.write_text(f"model_name_or_path: {TINY_MODEL}\nseed: 7\n")
    _, training_args, _ = script.parse_args(["--config", str(other)])
    assert training_args.learning_rate != plain[1]["learning_rate"]  # TRL's default, not the tiny model's
    (tmp_path / "only-a-seed.yaml").write_text("seed: 7\n")
    with pytest.raises(SystemExit, match="only-a-seed.yaml names no model: add `model_name_or_path: ...` to it"):
        script.parse_args([f"--config={tmp_path / 'only-a-seed.yaml'}"])


@pytest.mark.parametrize("name", ALGOS)
def test_the_default_run_takes_a_new_folder_where_its_own_holds_a_run(name, tmp_path, monkeypatch, capsys):
    """Issue 82: the default run's recipe replaced the run in its folder, and with it a refused command's (an unknown
    reward) before its checks ran. Where its folder holds anything, the default run now goes to the next free one, and
    says where; a folder named by flag, or by a recipe that names its model, is the one named, as it is."""
    script = SCRIPTS[name]
    monkeypatch.chdir(tmp_path)
    folder = f"outputs/{name}-tiny-addition"
    assert script.parse_args([])[1].output_dir == folder
    (tmp_path / folder).mkdir(parents=True)
    (tmp_path / folder / "metrics.jsonl").write_text("{}\n")
    assert script.parse_args([])[1].output_dir == f"{folder}-2"
    assert f"{folder} holds files already: this run writes to {folder}-2 (--output_dir names another)" in (
        capsys.readouterr().out)
    assert script.parse_args(["--output_dir", folder])[1].output_dir == folder  # refused later, by run_folder
    assert "holds files already" not in capsys.readouterr().out  # said where the run goes, not where it does not
    recipe = tmp_path / "mine.yaml"
    recipe.write_text(f"model_name_or_path: {TINY_MODEL}\ndataset_name: d\noutput_dir: {folder}\n")
    assert script.parse_args(["--config", str(recipe)])[1].output_dir == folder


@pytest.mark.parametrize("name", ALGOS)
def test_a_recipes_yaml_scalar_for_a_text_option_is_its_text(name, tmp_path):
    """`resume_from_checkpoint: true` in a recipe was a traceback: YAML reads a bool, where the option takes text, as
    the flag's `true`. A text option takes the value as written, which YAML 1.1 reads as an octal, a sexagesimal, a
    float or a date."""
    recipe = tmp_path / "mine.yaml"
    recipe.write_text(f"model_name_or_path: {TINY_MODEL}\ndataset_name: d\nresume_from_checkpoint: true\n"
                      "hub_model_id: 0123\nrun_name: 1:30\nmodel_revision: 2024-10-01\n"
                      "reward_funcs: [accuracy, 2024.10]\n")
    script_args, training_args, model_args = SCRIPTS[name].parse_args(["--config", str(recipe)])
    assert training_args.resume_from_checkpoint == "true" and training_args.hub_model_id == "0123"
    assert training_args.run_name == "1:30" and model_args.model_revision == "2024-10-01"
    assert script_args.reward_funcs == ["accuracy", "2024.10"]


@pytest.mark.parametrize("name", ALGOS)
def test_overwrite_output_dir_is_gone_in_one_line(name, tmp_path, capsys):
    """Removed, as transformers 5 removed it: a run never empties a folder. As a flag or a recipe key, one line."""
    recipe = tmp_path / "old.yaml"
    recipe.write_text(f"model_name_or_path: {TINY_MODEL}\noverwrite_output_dir: true\n")
    for argv in (["--overwrite_output_dir", "true"], ["--config", str(recipe)]):
        with pytest.raises(SystemExit, match=r"overwrite_output_dir.?: it is gone, as from transformers 5: a run never "
                                             r"empties a folder; give another --output_dir"):
            SCRIPTS[name].parse_args(argv)


@pytest.mark.parametrize("name", ALGOS)
def test_the_default_run_without_its_recipe_says_what_to_name(name, monkeypatch, tmp_path):
    """A copy with extras/ and no recipes/: a run that names no model stops in one line, naming the file it lacks and
    the flags that replace it, before anything loads."""
    script = SCRIPTS[name]
    monkeypatch.setattr(script, "DEFAULT_RECIPE", tmp_path / "recipes" / "tiny" / f"{name}.yaml")
    with pytest.raises(SystemExit, match=rf"^error: a run that names no model is the default run, which reads "
                                         rf"recipes/tiny/{name}.yaml, not beside .*: name your model with "
                                         r"--model_name_or_path and your prompts with --dataset_name"):
        script.parse_args([])


# Flags that TRL's configs check in __post_init__, each against the recipe's other settings: what the default run
# does with them, `--config recipes/tiny/<algo>.yaml` does (a group of 16 took a generation batch of TRL's 8 in the
# default run, parsed first with TRL's defaults, and was refused)
CHECKED_FLAGS = {
    "grpo": [["--num_generations", "16"], ["--eval_strategy", "steps", "--per_device_eval_batch_size", "12"],
             ["--eval_strategy", "steps", "--per_device_eval_batch_size", "12", "--num_generations", "4"],
             ["--save_strategy", "steps", "--save_steps", "2.5"], ["--save_strategy", "steps", "--save_steps", "50"]],
    "ppo": [["--per_device_eval_batch_size", "12"], ["--save_strategy", "steps", "--save_steps", "2.5"],
            ["--save_strategy", "steps", "--save_steps", "10", "--per_device_train_batch_size", "32"]],
}


@pytest.mark.parametrize("name", ALGOS)
def test_the_default_run_and_its_recipe_take_a_checked_flag_alike(name, monkeypatch, capsys):
    """One parse, with the recipe's values as defaults: the default run and its recipe given with --config take each
    flag alike, the same settings or the same refusal, and a group of 16 trains in both."""
    import os

    from conftest import REPO

    monkeypatch.chdir(REPO)
    script = SCRIPTS[name]

    def outcome(argv):  # where outputs/ holds a run, the default run alone takes the next free folder
        try:
            return [{key: os.path.abspath(value) if key in ("model_name_or_path", "dataset_name") else value
                     for key, value in args.items() if key != "output_dir"}
                    for args in resolved(script.parse_args(argv))]
        except (SystemExit, ValueError) as stop:  # a config's own check raises ValueError, ours one line
            return str(getattr(stop, "code", stop))

    outcomes = {}
    for flags in CHECKED_FLAGS[name]:
        default_run, recipe = outcome(flags), outcome(["--config", f"recipes/tiny/{name}.yaml", *flags])
        assert default_run == recipe, flags
        outcomes[" ".join(flags)] = isinstance(default_run, list)
    if name == "grpo":
        assert outcomes["--num_generations 16"]
        assert not outcomes["--eval_strategy steps --per_device_eval_batch_size 12"]
    assert not outcomes["--save_strategy steps --save_steps 2.5"] and list(outcomes.values()).count(True) >= 2


# How a user may name a model: the flag whole, with an equals sign, in its dashed spelling, or in a recipe; PPO also
# takes TRL's name for the policy, --sft_model_path
NAMINGS = [["--model_name_or_path", "{model}"], ["--model_name_or_path={model}"], ["--model-name-or-path", "{model}"],
           ["--config", "{recipe}"]]
# What argparse took for a flag it begins: a flag short of its last letters ran TRL's defaults, 3 epochs of 512-token
# completions, where the user meant --learning_rate (issue 75)
ABBREVIATIONS = [(["--model_name", "{model}"], "--model_name_or_path"), (["--model_name_or={model}"],
                 "--model_name_or_path"), (["--learning_rat", "1e-5"], "--learning_rate"),
                 (["--mod", "{model}"], "--model_name_or_path")]  # one of the flags it begins, named


@pytest.mark.parametrize("name", ALGOS)
@pytest.mark.parametrize("naming", NAMINGS + [["--sft_model_path", "{model}"]], ids=" ".join)
def test_a_run_that_names_its_model_gets_the_same_defaults_however_it_is_named(name, naming, tmp_path, capsys):
    """Which defaults a run gets is decided from the parsed values: a model named in any spelling the parser accepts
    means TRL's defaults, never the default run's recipe (lr 3e-4, 4-token completions, its output folder); and the
    run says in one line where its settings came from and what it leaves off."""
    from conftest import TINY_MODEL

    script = SCRIPTS[name]
    (tmp_path / "recipe.yaml").write_text(f"model_name_or_path: {TINY_MODEL}\n")
    argv = [a.format(model=TINY_MODEL, recipe=tmp_path / "recipe.yaml") for a in naming]
    if naming[0] == "--sft_model_path" and name == "grpo":
        with pytest.raises(SystemExit, match="error: unknown option --sft_model_path: that is PPO's option"):
            script.parse_args(argv)
        return
    script_args, training_args, model_args = script.parse_args(argv)
    assert str(TINY_MODEL) in (model_args.model_name_or_path, getattr(training_args, "sft_model_path", None))
    trl_config = type(training_args)
    assert training_args.learning_rate == trl_config.learning_rate != 3e-4
    assert training_args.output_dir != f"outputs/{name}-tiny-addition" and script_args.eval_num_samples == 0
    said = capsys.readouterr().out.strip().splitlines()[-1]
    origin = f"TRL's defaults, then {tmp_path / 'recipe.yaml'}" if "--config" in naming else "TRL's defaults"
    assert said.startswith(f"settings: {origin}, then the flags: learning_rate {trl_config.learning_rate:g}, ")
    assert said.endswith("; off: the held-out evaluation (--eval_num_samples K)")


@pytest.mark.parametrize("name", ALGOS)
@pytest.mark.parametrize("abbreviation, meant", ABBREVIATIONS, ids=[a[0][0] for a in ABBREVIATIONS])
def test_an_abbreviated_flag_stops_naming_the_flags_it_begins(name, abbreviation, meant):
    from conftest import TINY_MODEL

    flag = abbreviation[0].split("=")[0]
    with pytest.raises(SystemExit) as stop:
        SCRIPTS[name].parse_args([a.format(model=TINY_MODEL) for a in abbreviation])
    said = stop.value.code
    assert said.startswith(f"error: unknown option {flag}; did you mean ") and said.endswith("?") and meant in said


@pytest.mark.parametrize("name", ALGOS)
def test_the_default_run_says_so(name, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    SCRIPTS[name].parse_args(["--max_steps" if name == "grpo" else "--total_episodes", "64"])
    said = capsys.readouterr().out.strip().splitlines()[-1]
    assert said.startswith(f"settings: recipes/tiny/{name}.yaml (the default run: no model named), then the flags: "
                           "learning_rate 0.0003, ") and "64" in said and "off:" not in said


@pytest.mark.parametrize("name", ALGOS)
def test_typing_each_option_of_the_default_recipe_changes_nothing(name, monkeypatch, tmp_path):
    """Every option of the default recipe typed as a flag at the recipe's own value gives the trainer the
    configuration the default run gives it: a value acts the same whether it was typed or came from the recipe.
    main() runs up to the trainer's construction, which is caught."""
    script = SCRIPTS[name]
    recipe = yaml.safe_load(script.DEFAULT_RECIPE.read_text())
    here = script.DEFAULT_RECIPE.parents[2]  # where the default run reads its paths from
    typed = [str(a) for key, value in recipe.items() if value is not None for a in (
        f"--{key}", *(map(str, value) if isinstance(value, list) else [str(here / value) if key in (
            "model_name_or_path", "dataset_name") else value]))]
    trainer = "GRPOTrainer" if name == "grpo" else "PPOTrainerWithRewardLogs"

    class Caught(Exception):
        pass

    def catch(*args, **kwargs):
        raise Caught(kwargs["args"])

    monkeypatch.setattr(script, trainer, catch)
    monkeypatch.setattr(script, "outputs", None)
    configs = []
    for argv in ([], typed):
        with pytest.raises(Caught) as caught:
            script.main(*script.parse_args(argv + ["--output_dir", str(tmp_path)]))
        configs.append(caught.value.args[0].to_dict())
    assert typed and configs[0] == configs[1]


@pytest.mark.parametrize("name", ALGOS)
def test_a_default_never_depends_on_the_disk(name, tmp_path, monkeypatch):
    """The default run's settings are the same before and after its output folder, or the bundled model's, exists:
    the model and data resolve from the script's folder whether they are there or not, and `output_dir` stays as
    the recipe writes it (relative to where the run starts)."""
    script = SCRIPTS[name]
    root = tmp_path / "copy"
    (root / "recipes" / "tiny").mkdir(parents=True)
    (root / "recipes" / "tiny" / f"{name}.yaml").write_text(script.DEFAULT_RECIPE.read_text())
    monkeypatch.setattr(script, "DEFAULT_RECIPE", root / "recipes" / "tiny" / f"{name}.yaml")
    monkeypatch.chdir(root)

    def parsed():
        with contextlib.redirect_stdout(io.StringIO()) as shown:
            settings = script.parse_args([])
            with pytest.raises(SystemExit):
                script.parse_args(["--help"])
        return [asdict(args) for args in settings], shown.getvalue()

    before = parsed()
    for key in ("output_dir", "model_name_or_path", "dataset_name"):
        (root / before[0][1 if key == "output_dir" else 0 if key == "dataset_name" else 2][key]).mkdir(parents=True)
    assert parsed() == before
    assert before[0][2]["model_name_or_path"] == str(root / "assets" / "tiny-llama-addition")


# (command line, YAML recipe, what the one error line says): every mistake of the command line or a recipe
MISTAKES = [
    (["--learning_rte", "1e-5"], None, "error: unknown option --learning_rte; did you mean --learning_rate?"),
    (["--learning-rte=1e-5"], None, "error: unknown option --learning-rte; did you mean --learning_rate?"),
    (["oops"], None, "error: unexpected argument 'oops'"),
    (["--conf", "x.yaml"], None, "error: unknown option --conf; did you mean --config?"),  # a prefix TrlParser refuses
    (["--config_file", "x.yaml"], None, "error: unknown option --config_file; did you mean --config?"),
    (["--learning_rate", "fast"], None, "error: argument --learning_rate/--learning-rate: invalid float value: 'fast'"),
    (["--max_steps"], None, "error: argument --max_steps/--max-steps: expected one argument"),
    (["--config"], None, "error: --config needs the path of a YAML recipe"),
    (["--config", "no-such.yaml"], None, "error: --config no-such.yaml: no such file or directory"),
    ([], "learning_rte: 1.0e-5\n", "error: {recipe}: unknown key 'learning_rte'; did you mean learning_rate?"),
    ([], "learning_rate: fast\n", "error: {recipe}: learning_rate: 'fast' is not a number"),
    ([], "seed: 4.5\n", "error: {recipe}: seed: 4.5 is not an integer"),
    ([], "use_peft: maybe\n", "error: {recipe}: use_peft: 'maybe' is not true or false"),
    ([], "lr_scheduler_type: cos\n", "error: {recipe}: lr_scheduler_type: 'cos' is not one of linear, cosine,"),
    ([], "max_steps: [1\n", "error: --config {recipe} is not valid YAML (line 2)"),
    ([], "- max_steps\n", "error: --config {recipe} must hold `option: value` lines"),
]


@pytest.mark.parametrize("name", ALGOS)
@pytest.mark.parametrize("argv, yaml_text, message", MISTAKES)
def test_every_mistake_is_one_sentence(tmp_path, capsys, name, argv, yaml_text, message):
    """A mistyped option, a bad value, a broken recipe: one `error:` line, naming the nearest valid option where
    there is one, before anything is built (argparse's own errors print no usage)."""
    recipe = tmp_path / "recipe.yaml"
    if yaml_text is not None:
        recipe.write_text(yaml_text)
        argv = argv + ["--config", str(recipe)]
    with pytest.raises(SystemExit) as stop:
        cli.parse(SCRIPTS[name].make_parser(), SCRIPTS[name].REFUSED, argv)
    assert str(stop.value.code).startswith(message.format(recipe=recipe)), stop.value.code
    assert "\n" not in str(stop.value.code) and capsys.readouterr() == ("", "")


@pytest.mark.parametrize("name", ALGOS)
def test_help_starts_with_the_scripts_own_options(name, capsys):
    """--help: a one-line usage naming --config, a pointer to docs/options.md, the script's own options before TRL's,
    and none of the refused options."""
    with pytest.raises(SystemExit):
        SCRIPTS[name].parse_args(["--help"])
    text = capsys.readouterr().out
    usage, description = text.split("\n\n")[:2]
    assert usage.count("\n") == 0 and "--config recipe.yaml" in usage and "docs/options.md" in description
    assert text.index("--reward_funcs") < text.index("--learning_rate")
    assert [option for option in refused(name) if f"--{option} " in text] == []


@pytest.mark.parametrize("name", ALGOS)
def test_the_documented_defaults_are_the_scripts(name, monkeypatch, tmp_path):
    """docs/options.md's table for each script gives the defaults a run that names its model gets on this machine,
    and the default run's value beside each one its recipe replaces, for every row that names one flag and one value.
    Activation checkpointing's default depends on the machine, for both scripts alike (make_parser), and the table
    says so."""
    import re

    import torch
    from conftest import REPO, TINY_MODEL

    monkeypatch.chdir(tmp_path)  # where no default run's folder holds a run
    text = (REPO / "docs" / "options.md").read_text()
    rows = dict(re.findall(r"^\| `--(\w+)` \| ([^|]*) \|", text.split("## PPO's flags")[name == "ppo"], re.M))
    assert rows["activation_checkpointing"].strip() == "on a GPU, off on a CPU"

    def values(argv):
        return {k: v for args in resolved(SCRIPTS[name].parse_args(argv)) for k, v in args.items()}

    named, default_run = values(["--model_name_or_path", str(TINY_MODEL)]), values([])
    checked = 0
    for flag, cell in rows.items():
        default, _, run = cell.strip().partition(" (default run: ")
        for documented, value in [(default, named[flag]), (run.removesuffix(")"), default_run[flag])]:
            if not documented or flag == "model_name_or_path" and value == str(TINY_MODEL):  # the one named here
                continue
            documented = documented.strip("`").replace("on a GPU, off on a CPU",
                                                       "on" if torch.cuda.is_available() else "off")
            if isinstance(value, bool):
                assert (documented in ("on", "true")) is value and documented in ("on", "off", "true", "false"), (
                    flag, documented)
            elif documented == "none":
                assert value is None, (flag, value)
            elif isinstance(value, (int, float)) and re.fullmatch(r"[-\d.e]+", documented):
                assert float(documented) == value, (flag, documented, value)
            elif isinstance(value, str) and re.fullmatch(r"[\w/.-]+", documented):
                assert value == documented or value == str(REPO / documented), (flag, documented, value)
            else:
                continue
            checked += 1
    assert checked >= 16


@pytest.mark.parametrize("name", ALGOS)
def test_a_recipe_may_give_one_value_for_a_list(tmp_path, name):
    """`reward_funcs: accuracy` in a recipe is the list [accuracy], not the characters of "accuracy"; ModelConfig
    keeps `lora_target_modules: all-linear` as peft's shorthand."""
    (tmp_path / "recipe.yaml").write_text("reward_funcs: accuracy\nlora_target_modules: all-linear\n")
    script_args, _, model_args = cli.parse(SCRIPTS[name].make_parser(), SCRIPTS[name].REFUSED,
                                           ["--config", str(tmp_path / "recipe.yaml")])
    assert script_args.reward_funcs == ["accuracy"] and model_args.lora_target_modules == "all-linear"


@pytest.mark.parametrize("name", ALGOS)
def test_help_shows_what_a_user_sets_first_on_its_first_screen(name, capsys):
    """--config, the model, the data, the output folder and the script's own options come first. The defaults shown
    are what a run that names its model gets; the default run's recipe is named, and its value shown beside each
    default it replaces; where a default here is not TRL's (the CPU's), TRL's is shown too."""
    with pytest.raises(SystemExit):
        SCRIPTS[name].parse_args(["--help"])
    text = capsys.readouterr().out
    first_screen = "\n".join(text.splitlines()[:60])
    for flag in ("--config RECIPE.yaml", "--model_name_or_path", "--dataset_name", "--output_dir", "--system_prompt"):
        assert flag in first_screen, flag
    words = " ".join(text.split())  # the help wraps lines at the terminal's width
    assert f"a run that names none is the default run, whose settings are recipes/tiny/{name}.yaml's" in words
    assert f"AdamW. (default run: 0.0003) (default: {'1e-06' if name == 'grpo' else '3e-06'})" in words
    assert "(default run: 8) (default: 0)" in words  # --eval_num_samples


@pytest.mark.parametrize("name", ALGOS)
def test_config_with_an_equals_sign(tmp_path, name):
    (tmp_path / "recipe.yaml").write_text("seed: 7\n")
    _, training_args, _ = cli.parse(SCRIPTS[name].make_parser(), SCRIPTS[name].REFUSED,
                                    [f"--config={tmp_path / 'recipe.yaml'}"])
    assert training_args.seed == 7


@pytest.mark.ppo_trainer  # both scripts' options, in one environment
def test_the_other_scripts_name_for_an_option_is_answered_with_this_ones(capsys):
    """--reward_model_name_or_path is GRPO's name for PPO's --reward_model_path: typed into PPO, the nearest spelling
    would be --model_name_or_path, which would put a reward model in the policy's place. Each pair of extras/cli.py's
    COUNTERPARTS names an option of the one script that the other lacks, and an option of the other."""
    for name, pairs in [("ppo", cli.COUNTERPARTS["PPOConfig"]), ("grpo", cli.COUNTERPARTS["GRPOConfig"])]:
        for theirs, ours in pairs:
            assert theirs not in all_fields(name) and theirs in all_fields("grpo" if name == "ppo" else "ppo")
            assert ours is None or ours in all_fields(name)
            with pytest.raises(SystemExit) as stop:
                cli.parse(SCRIPTS[name].make_parser(), SCRIPTS[name].REFUSED, [f"--{theirs}", "x"])
            other = "GRPO" if name == "ppo" else "PPO"
            assert stop.value.code == f"error: unknown option --{theirs}: that is {other}'s option; " + (
                f"here it is --{ours}" if ours else cli.COUNTERPARTS_WHY[theirs])


@pytest.mark.ppo_trainer
@pytest.mark.parametrize("argv, stop_token, stop_token_id", [
    ([], "eos", None), (["--stop_token", "none"], None, None), (["--stop_token", "None"], None, None),
    (["--stop_token_id", "7"], "eos", 7)])  # parse_args drops the default `eos` where a stop token id is given
def test_ppo_takes_every_stop_token_setting_as_a_flag(argv, stop_token, stop_token_id):
    _, training_args, _ = cli.parse(ppo.make_parser(), ppo.REFUSED, argv)
    assert (training_args.stop_token, training_args.stop_token_id) == (stop_token, stop_token_id)


@pytest.mark.ppo_trainer
def test_ppo_help_writes_the_stop_token_as_it_is_typed(capsys):
    """`--stop_token {eos,None}`, argparse's picture of the parsed values, where `none` is what a user types."""
    with pytest.raises(SystemExit):
        ppo.parse_args(["--help"])
    assert "--stop_token {eos,none}" in capsys.readouterr().out


@pytest.mark.parametrize("name", ALGOS)
def test_eval_only_of_a_runs_folder_samples_as_the_run_did(name, tmp_path, capsys):
    """Issue 83: --eval_only of a run's folder without the run's flags sampled at TRL's defaults (temperature 1.0, 512
    tokens), though its summary.json held the run's. Each sampling option left at its default takes the run's, said
    in one line; a flag, or a recipe's value, is kept."""
    import json

    length = "max_completion_length" if name == "grpo" else "response_length"
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({
        "model_args": {"model_name_or_path": str(TINY_MODEL)},
        "training_args": {"temperature": 0.5, length: 24, "seed": 3, "learning_rate": 0.5},
        "script_args": {"eval_num_samples": 4, "system_prompt": "Be brief.", "dataset_test_split": "validation"}}))
    script_args, training_args, _ = SCRIPTS[name].parse_args(
        ["--model_name_or_path", str(run), "--dataset_name", "d", "--eval_only", "--seed", "7"])
    assert (training_args.temperature, getattr(training_args, length), training_args.seed) == (0.5, 24, 7)
    assert (script_args.eval_num_samples, script_args.system_prompt) == (4, "Be brief.")
    assert script_args.dataset_test_split == "validation" and training_args.learning_rate != 0.5  # sampling alone
    assert (f"--eval_only {run} samples as its run did, from its summary.json: temperature 0.5, {length} 24, "
            "system_prompt Be brief., eval_num_samples 4, dataset_test_split validation (a flag sets another)"
            ) in capsys.readouterr().out
    SCRIPTS[name].parse_args(["--model_name_or_path", str(run), "--dataset_name", "d"])  # training: none of it
    assert "samples as its run did" not in capsys.readouterr().out
