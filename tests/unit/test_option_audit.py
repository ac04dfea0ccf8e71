"""extras/cli.py refuses, for each trainer, the options it never reads (UNREAD) and those it computes itself and
overwrites (COMPUTED). Both lists are checked here against the installed trainer's own source, so an upgrade that
starts reading a refused option fails a test that names the line reading it. A hand-kept list of what PPOTrainer
reads was wrong twice (--num_train_epochs, --ds3_gather_for_generation).

The scan parses, with `ast`, the trainer's module and those of its base classes in trl, and collects where the
config's fields are read (Load) and written (Store): `args.NAME`, `training_args.NAME`, `X.args.NAME` (so
`self.args.NAME`), a name bound to one of these (`args = self.args`), and getattr/hasattr/setattr with a literal
name. It reads trl's code only: transformers' methods the trainer inherits are not scanned.
"""

import ast
import functools
import inspect
import warnings
from pathlib import Path
from typing import NamedTuple

import pytest
import trl
from conftest import HAS_PPO_TRAINER

from extras import cli

TRAINERS = {"GRPOConfig": trl.GRPOTrainer}
if HAS_PPO_TRAINER:  # trl 1.12 (conftest.py): its PPO cases are marked
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="You are importing from 'trl.experimental'")
        from trl.experimental.ppo import PPOTrainer
    TRAINERS["PPOConfig"] = PPOTrainer
CONFIGS = ["GRPOConfig", pytest.param("PPOConfig", marks=pytest.mark.ppo_trainer)]
SITE = Path(trl.__file__).parents[1]

# Fields the trainer reads and cli.UNREAD still refuses as never read, each with the reason (trl 1.12). Keep this
# short: an entry whose read stops, or whose field leaves UNREAD, fails test_each_exception_is_still_needed.
READ_YET_REFUSED = {
    ("PPOConfig", "logging_steps"): "copied to state.logging_steps, which only transformers' DefaultFlowCallback "
                                    "reads, to set control.should_log; PPOTrainer.train logs every update and never "
                                    "reads should_log",
}


class Access(NamedTuple):
    name: str
    stored: bool
    function: str  # qualified: "PPOTrainer.__init__"
    always: bool  # an assignment that is a statement of the function's own body, under no `if` or loop
    line: int
    where: str  # path:line: source


class Scan(ast.NodeVisitor):
    """Each access to the config in one module's tree, as (field, stored, function, always, line)."""

    def __init__(self, tree: ast.Module):
        self.names = {"args", "training_args"}  # names bound to the config
        self.scope = []  # the class and function names around the node visited
        self.top = set()  # the targets of the assignments in the current function's own body
        self.found = []
        for node in ast.walk(tree):  # names bound to the config: `args = self.args`
            if isinstance(node, ast.Assign) and self.is_config(node.value):
                self.names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        self.visit(tree)

    def is_config(self, node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id in self.names) or (
            isinstance(node, ast.Attribute) and node.attr == "args")

    def visit_ClassDef(self, node):
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node):
        outer = self.top
        self.top = {id(t) for s in node.body if isinstance(s, ast.Assign) for t in s.targets}
        self.visit_ClassDef(node)  # its name joins the scope, as a class's does
        self.top = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Attribute(self, node):
        if self.is_config(node.value):
            stored = isinstance(node.ctx, (ast.Store, ast.Del))
            self.found.append((node.attr, stored, ".".join(self.scope), stored and id(node) in self.top, node.lineno))
        self.generic_visit(node)

    def visit_Call(self, node):
        if (isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) > 1
                and self.is_config(node.args[0]) and isinstance(node.args[1], ast.Constant)):
            self.found.append((node.args[1].value, node.func.id == "setattr", ".".join(self.scope), False, node.lineno))
        self.generic_visit(node)


@functools.cache
def accesses(config: str) -> list[Access]:
    """Every access to the config in the modules of the trainer and of its base classes in trl, in source order."""
    found = []
    for path in dict.fromkeys(inspect.getsourcefile(c) for c in TRAINERS[config].__mro__
                              if c.__module__.split(".")[0] == "trl"):
        source = Path(path).read_text()
        lines = source.splitlines()
        found += [Access(*access, f"{Path(path).relative_to(SITE)}:{access[-1]}: {lines[access[-1] - 1].strip()}")
                  for access in Scan(ast.parse(source)).found]
    return found


def reads(config: str) -> dict[str, str]:
    """Each field the trainer loads, with the first place it does."""
    return {a.name: a.where for a in reversed(accesses(config)) if not a.stored}


@pytest.mark.parametrize("config", CONFIGS)
def test_no_option_refused_as_never_read_is_read(config):
    """No field of UNREAD is read by its trainer (but for READ_YET_REFUSED), or written by it (COMPUTED's class)."""
    trainer = TRAINERS[config].__name__
    written = {a.name for a in accesses(config) if a.stored}
    wrong = [f"--{name}: {trainer} reads it at {reads(config)[name]}" for name in cli.UNREAD[config]
             if name in reads(config) and name not in written and (config, name) not in READ_YET_REFUSED]
    wrong += [f"--{name}: {trainer} writes it: move it to COMPUTED" for name in cli.UNREAD[config] if name in written]
    assert not wrong, ("extras/cli.py's UNREAD refuses options the trainer reads; take each out of UNREAD (and update "
                       "AUDITED in test_options.py), or give it the reason it cannot act:\n" + "\n".join(wrong))


@pytest.mark.ppo_trainer  # only PPOConfig has computed options
@pytest.mark.parametrize("config", list(cli.COMPUTED))
def test_each_computed_option_is_overwritten_before_it_is_read(config):
    """Each field of COMPUTED is assigned by a statement of the trainer's own __init__, under no `if`, before
    __init__ reads it: the trainer never reads the value a user would set."""
    init = f"{TRAINERS[config].__name__}.__init__"
    for name in cli.COMPUTED[config]:
        mine = [a for a in accesses(config) if a.name == name and a.function == init]
        computed = next((a for a in mine if a.always), None)
        assert computed, f"--{name}: {init} no longer always computes it: {[a.where for a in mine]}"
        early = [a.where for a in mine if not a.stored and a.line < computed.line]
        assert not early, f"--{name}: {init} reads it before it computes it ({computed.where}): {early}"


@pytest.mark.ppo_trainer  # every entry is PPO's
def test_each_exception_is_still_needed():
    """Each READ_YET_REFUSED entry is in UNREAD, and its trainer still reads it."""
    stale = [(config, name) for config, name in READ_YET_REFUSED
             if name not in cli.UNREAD[config] or name not in reads(config)]
    assert not stale, f"drop these from READ_YET_REFUSED: {stale}"
