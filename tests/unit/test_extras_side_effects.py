"""Importing an extra changes nothing outside it: warnings, logging, the environment and sys.path are as they were.
The scripts' own quieting of upstream notices (extras/outputs.quiet) lasts only while a run does."""

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.xdist_group("extras-probe")  # one worker: the module's probe imports the libraries once
EXTRAS = sorted(p.stem for p in (REPO / "extras").glob("*.py") if p.stem != "__init__")

# In a fresh interpreter: the libraries the extras import are imported first (what they change on import is theirs),
# then the process's warnings, logging, environment and sys.path are described before and after each action in turn.
PROBE = """
import json, logging, os, sys, warnings
from contextlib import nullcontext
import accelerate, datasets, matplotlib, peft, torch, transformers, trl
from transformers import GenerationConfig, TrainerCallback
from transformers.trainer_callback import ProgressCallback
from transformers.utils import get_json_schema
from trl.data_utils import apply_chat_template

def state():
    loggers = {name: [logger.level, repr(logger.filters), repr(logger.handlers), logger.propagate, logger.disabled]
               for name, logger in logging.root.manager.loggerDict.items() if isinstance(logger, logging.Logger)}
    loggers["root"] = [logging.root.level, repr(logging.root.filters), repr(logging.root.handlers)]
    return {"warnings": [repr(f) for f in warnings.filters], "loggers": loggers, "environ": dict(os.environ),
            "sys.path": list(sys.path)}

seen = []
for action in json.loads(sys.argv[1]):
    before = state()
    scope = {"nullcontext": nullcontext, "logging": logging, "warnings": warnings}
    exec(action, scope)
    after = state()
    new_loggers = {name: value for name, value in after["loggers"].items() if name not in before["loggers"]}
    after["loggers"] = {name: value for name, value in after["loggers"].items() if name in before["loggers"]}
    seen.append({"before": before, "after": after, "new_loggers": new_loggers, "result": scope.get("result")})
print(json.dumps(seen))
"""


def probe(*actions: str) -> list[dict]:
    """What each action changed, in one interpreter, one after the other: {"before", "after", "new_loggers"} each, and
    the `result` the action set, if any."""
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(actions)], cwd=REPO, capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout.splitlines()[-1])


# outputs.quiet(), after every extra is imported: what it shows inside the context and after it
QUIET = """
import extras.outputs as outputs

shown = []
handler = logging.Handler()
handler.emit = lambda record: shown.append(record.getMessage())
logging.getLogger("DeepSpeed").addHandler(handler)
def notices(quieted):
    shown.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with outputs.quiet() if quieted else nullcontext():
            warnings.warn("`is_gradient_checkpointing` is deprecated", FutureWarning)
            logging.getLogger("DeepSpeed").warning("Setting accelerator to CPU.")
    return [str(w.message) for w in caught] + shown
result = {"inside": notices(True), "after": notices(False)}
logging.getLogger("DeepSpeed").removeHandler(handler)
"""


@pytest.fixture(scope="module")
def seen() -> dict:
    """Each extra imported in turn, then a run's quieting, in one interpreter, which imports the libraries once (9 s):
    what an extra changes is seen at its own import, or at that of the extra that imports it first."""
    return dict(zip([*EXTRAS, "quiet"], probe(*(f"import extras.{name}" for name in EXTRAS), QUIET)))


@pytest.mark.parametrize("name", EXTRAS)
def test_importing_an_extra_changes_nothing_outside_it(name, seen):
    seen = seen[name]
    assert seen["after"]["warnings"] == seen["before"]["warnings"]
    assert seen["after"]["loggers"] == seen["before"]["loggers"]
    assert seen["after"]["environ"] == seen["before"]["environ"]
    assert seen["after"]["sys.path"] == seen["before"]["sys.path"]
    # a logger the import made (logging.getLogger(__name__)) has no setting of its own
    assert all(value[:4] == [logging.NOTSET, "[]", "[]", True] for value in seen["new_loggers"].values())


def test_a_run_quiets_upstream_notices_only_while_it_lasts(seen):
    """Inside outputs.quiet() a deprecation and a logged notice it names are not shown; after it, they are, and
    warnings and logging are as before it."""
    quiet = seen["quiet"]
    assert quiet["result"] == {"inside": [], "after": ["`is_gradient_checkpointing` is deprecated",
                                                        "Setting accelerator to CPU."]}
    assert quiet["after"]["warnings"] == quiet["before"]["warnings"]
    assert quiet["after"]["loggers"] == quiet["before"]["loggers"]
