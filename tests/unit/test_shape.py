"""The project's shape: two scripts and rewards.py at the top, every other module an opt-in extra in extras/.

The default GRPO run's imports are counted in tests/e2e/test_grpo.py (test_default_run_learns), on the run itself.
The scripts' lengths are a figure the docs report (docs/testing.md), not a limit: a cap met exactly bought compressed
code (issue 47).
"""

import ast
import io
import re
import tokenize

from conftest import REPO, script_header

SCRIPTS = ["grpo_trl_example.py", "ppo_trl_example.py"]


def test_the_top_level_holds_the_two_scripts_and_the_rewards():
    assert sorted(p.name for p in REPO.glob("*.py")) == ["grpo_trl_example.py", "ppo_trl_example.py", "rewards.py"]


def test_the_scripts_import_from_the_project_only_rewards_and_extras():
    """A copy with rewards.py alone must import: the extras come in through a guarded import or `extra()`."""
    for script in SCRIPTS:
        tree = ast.parse((REPO / script).read_text())
        nodes = list(ast.walk(tree))
        imported = {node.module.split(".")[0] for node in nodes if isinstance(node, ast.ImportFrom)}
        imported |= {a.name.split(".")[0] for node in nodes if isinstance(node, ast.Import) for a in node.names}
        assert imported & {p.stem for p in REPO.glob("*.py")} == {"rewards"}, script
        assert imported & {p.name for p in REPO.iterdir() if p.is_dir()} == {"extras"}, script


def compressed(source: str) -> list[str]:
    """The compressed constructs in `source`, one line each: several unrelated things assigned in one statement
    (`a, b = x, y`), a loop whose target is an attribute or an item (`for trainer.model, f in ...`), an assignment
    expression inside a call's arguments (`d.setdefault(k := ..., ...)`), and a line broken inside an attribute access
    (`script_args.` at a line's end)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple)
                and isinstance(node.value, ast.Tuple)):
            found.append(f"line {node.lineno}: a, b = x, y")
        if isinstance(node, (ast.For, ast.comprehension)) and any(
                isinstance(target, (ast.Attribute, ast.Subscript)) for target in ast.walk(node.target)):
            found.append(f"line {getattr(node, 'lineno', node.target.lineno)}: a loop's target is an attribute")
        if isinstance(node, ast.Call) and any(isinstance(arg, ast.NamedExpr) for arg in [*node.args, *(
                keyword.value for keyword in node.keywords)]):
            found.append(f"line {node.lineno}: := in a call's arguments")
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for dot, after in zip(tokens, tokens[1:]):
        if dot.string == "." and after.type == tokenize.NL:
            found.append(f"line {dot.start[0]}: a line broken inside an attribute access")
    return found


def test_compressed_constructs_are_found():
    assert compressed("a, b = 1, 2\nfor t.m, f in x: pass\nd.setdefault(k := 1, 2)\ny = (s.\n  t)\n") == [
        "line 1: a, b = x, y", "line 2: a loop's target is an attribute", "line 3: := in a call's arguments",
        "line 4: a line broken inside an attribute access"]
    assert compressed("a, b = f()\nfor m, f in x: pass\nif (k := 1): pass\ny = (s\n  .t)\n") == []


def test_the_scripts_and_extras_say_one_thing_per_statement():
    files = [*SCRIPTS, "rewards.py", *(str(p.relative_to(REPO)) for p in sorted((REPO / "extras").glob("*.py")))]
    assert {name: found for name in files if (found := compressed((REPO / name).read_text()))} == {}


def test_each_script_declares_what_it_runs_on_and_both_agree_with_the_requirements():
    """`uv run SCRIPT` installs the header (tests/e2e/test_uv_run.py runs it); setup.sh installs it beside
    requirements.txt, whose lines down to its tools are what both scripts run on, but trl."""
    from packaging.requirements import Requirement

    lines = (REPO / "requirements.txt").read_text().split("\n# The repository's tools\n")[0].splitlines()
    shared = {str(Requirement(line)) for line in lines if line.strip() and not line.startswith("#")}
    for script in SCRIPTS:
        checked = re.search(r'^(?:GRPO|PPO)_TRL = "(.+)"$', (REPO / script).read_text(), re.M)[1]  # the check at start
        own = {f"trl=={checked}"} | ({"requests>=2.31"} if script.startswith("ppo") else set())  # trl 1.12 needs it
        declared = {str(Requirement(d)) for d in script_header(script)["dependencies"]}
        assert declared == shared | own, script
        assert script_header(script)["requires-python"] == ">=3.11"  # trl 1.15 and later need it
