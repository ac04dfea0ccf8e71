"""--help, readable: what a user sets first on its first screen, the defaults a run takes, and no refused option
(cli.py calls it where a command asks for help).
"""

import argparse
import dataclasses
from pathlib import Path


def readable_help(parser, refused: dict[str, str], default_recipe: Path | None = None) -> None:
    """--help with what a user sets first on its first screen: the recipe, model, data and output folder, then the
    script's own options, then TRL's. Refused options are not listed. The defaults are those of a run that names its
    model: where one is not TRL's (the CPU's settings) TRL's is shown beside it, as TRL's help text describes its own,
    and where the default run's recipe sets another, that recipe's value."""
    parser.usage = "%(prog)s [--config recipe.yaml] [--option value ...]"
    recipe = {}
    if default_recipe is not None and default_recipe.is_file():
        import yaml

        recipe = yaml.safe_load(default_recipe.read_text())
    named = str(Path(*default_recipe.parts[-3:])) if default_recipe else ""  # recipes/tiny/<algo>.yaml
    parser.description = (
        "Every option is a flag and a key of a YAML recipe given with --config; flags win. The defaults below are "
        "those of a run that names its model" + (f"; a run that names none is the default run, whose settings are "
                                                 f"{named}'s (shown as `default run:`)" if recipe else "")
        + ". docs/options.md lists the options you will use; refused options are not listed.")
    script_class = parser.dataclass_types[0]
    inherited = {f.name for base in script_class.__mro__[1:] if dataclasses.is_dataclass(base)
                 for f in dataclasses.fields(base)}
    trl_defaults = {f.name: f.default for cls in parser.dataclass_types[1:] for f in dataclasses.fields(cls)
                    if f.default not in (dataclasses.MISSING, None)}
    for action in parser._actions:
        if action.dest in refused:
            action.help = argparse.SUPPRESS
            continue
        if action.help and action.dest in trl_defaults and action.default != trl_defaults[action.dest]:
            action.help += f" (TRL's default: {trl_defaults[action.dest]})"
        if action.help and action.dest in recipe and action.option_strings[0].startswith("--") and not (
                action.option_strings[0].startswith("--no_")):
            action.help += f" (default run: {recipe[action.dest]})".replace("%", "%%")  # argparse formats help
    first = ["help", "model_name_or_path", "dataset_name", "output_dir"]
    first += [f.name for f in dataclasses.fields(script_class) if f.name not in inherited]
    group = parser._optionals  # every field's flag is there, in the order of the dataclasses
    front = [action for dest in first for action in group._group_actions if action.dest == dest]
    config = argparse.Action(["--config"], dest="config", metavar="RECIPE.yaml", default=argparse.SUPPRESS, help=(
        "A YAML file of `option: value` lines (recipes/ has one per model and algorithm); flags override it. A run "
        "whose recipe and flags name no model is the default run" + (f", {named}" if named else "")))
    group._group_actions[:] = front[:1] + [config] + front[1:] + [a for a in group._group_actions if a not in front]
