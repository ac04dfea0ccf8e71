"""The project's shape: two scripts and rewards.py at the top, every other module an opt-in extra in extras/.

The default GRPO run's imports are counted in tests/e2e/test_grpo.py (test_default_run_learns), on the run itself.
The scripts' lengths are a figure the docs report (docs/testing.md), not a limit: a cap met exactly bought compressed
code (issue 47).
"""

import ast

from conftest import REPO

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
