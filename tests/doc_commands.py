"""The training commands the docs print, read from them: the README's and docs/'s shell blocks and the recipes'
headers (their indented `#   ` lines), a command's `\\` continuations joined and its comment cut. What a user
copies from a page is what the tests run, so a command added to a page is covered, or fails, without a list kept by
hand (tests/e2e/test_gpu_commands.py).

>>> page = "```bash\\nX=1 accelerate launch --num_processes 8 \\\\\\n  grpo_trl_example.py --config r.yaml"
>>> [c.text for c in read(page + "  # eight\\n```\\n", "page.md")]
['X=1 accelerate launch --num_processes 8 grpo_trl_example.py --config r.yaml']
"""

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = ("grpo_trl_example.py", "ppo_trl_example.py")


@dataclass(frozen=True)
class Command:
    """One printed command: where it is, its text, and its parts."""

    where: str
    text: str
    env: dict = field(default_factory=dict, hash=False)  # the `NAME=value` words before it
    launch: dict = field(default_factory=dict, hash=False)  # `accelerate launch`'s options, {} for `python`
    script: str = ""
    args: tuple = ()

    @property
    def flags(self) -> dict:
        """The script's options, `--name value...` (a bare flag is true)."""
        return options(self.args)

    @property
    def recipe(self) -> dict:
        import yaml

        return yaml.safe_load((REPO / self.flags["config"]).read_text()) if "config" in self.flags else {}

    def setting(self, name: str):
        """What the run sets `name` to: its flag, else its recipe's key."""
        return self.flags.get(name, self.recipe.get(name))


def options(words) -> dict:
    """`--a 1 --b x y --c` -> {"a": "1", "b": ["x", "y"], "c": True}."""
    found, name = {}, None
    for word in words:
        if word.startswith("--"):
            name, _, value = word[2:].partition("=")
            found[name] = value or True
        elif name is not None:
            previous = found[name]
            found[name] = word if previous is True else [*([previous] if isinstance(previous, str) else previous),
                                                         word]
    return found


def read(text: str, where: str, recipe: bool = False) -> list[Command]:
    """The commands of one page: its shell blocks, or a recipe's `#   ` header lines."""
    if recipe:
        blocks = ["\n".join(line[1:] for line in text.splitlines() if line.startswith("#   "))]
    else:
        blocks = re.findall(r"```(?:bash|sh|shell)?\n(.*?)```", text, re.S)
    found = []
    for block in blocks:
        line = ""
        for part in block.splitlines():
            line = f"{line} {part.strip()}".strip()
            if line.endswith("\\"):
                line = line[:-1].rstrip()
                continue
            line = re.sub(r"(^|\s+)#.*$", "", line).rstrip(" &")
            if any(script in line for script in SCRIPTS):
                found.append(parse(line, where))
            line = ""
    return found


def parse(text: str, where: str) -> Command:
    words = shlex.split(text)
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    at = next(i for i, word in enumerate(words) if word.endswith(SCRIPTS))
    launcher, script, args = words[:at], Path(words[at]).name, tuple(words[at + 1:])
    launch = options(launcher[2:]) if launcher[:2] == ["accelerate", "launch"] else {}
    return Command(where, text, env, launch, script, args)


def printed() -> list[Command]:
    """Every command that names a script, in the README, docs/ and the recipes' headers."""
    commands = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        commands += read(page.read_text(), str(page.relative_to(REPO)))
    for recipe in sorted((REPO / "recipes").glob("*/*/*.yaml")):
        commands += read(recipe.read_text(), str(recipe.relative_to(REPO)), recipe=True)
    return commands


def is_local(path) -> bool:
    """A path of the repository's (assets/, outputs/), not a hub id."""
    return isinstance(path, str) and path.split("/")[0] in ("assets", "outputs", ".", "..")


def for_a_gpu(command: Command) -> bool:
    """A command written for a GPU machine: launched across processes, or training a model this repository does not
    bundle (a hub id: a GPU recipe's, or a flag's). A model named by a shell variable (`$MODEL`) is the page's own
    shell's, which a test of that page sets (docs/your-own-run.md: tests/e2e/test_your_own_run.py)."""
    models = [command.setting(key) for key in ("model_name_or_path", "sft_model_path")]
    return bool(command.launch) or any(model and not is_local(model) and not str(model).startswith("$")
                                       for model in models)
