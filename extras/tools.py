"""Tools for tool-calling GRPO, and the registry that `--tools` picks them from by name.

A tool is a plain Python function with a type hint on every argument and a docstring whose `Args:` section
describes each one: transformers turns those into the JSON schema the chat template shows the model
(`transformers.utils.get_json_schema`). During generation GRPOTrainer parses each tool call out of a completion,
calls the tool, appends its result as a `tool` message and lets the model go on, with the result's tokens masked
out of the loss (`--max_tool_calling_iterations` bounds the rounds). A tool that raises counts as a failed call
(`tools/failure_frequency` in metrics.jsonl) and the model reads {"error": "<the message>"}, so raise with a
message the model can act on. Tools receive what the model wrote: treat every argument as hostile.

Tools here: `tool_names()`; `--tools calculator python`. Your own, in your own module:

    def lookup(word: str) -> str:
        \"\"\"Look a word up in the dictionary.

        Args:
            word: The word to look up.
        \"\"\"
        return DICTIONARY.get(word.lower(), "not found")

and `--tools my_module.lookup`.

A stateful environment (a game, a session, files that persist between calls) is a class: `--environment_factory
notebook` or `my_module.MyEnv`. GRPOTrainer makes one instance per rollout and calls `reset(**row)` with the
dataset row before each episode (a string it returns is appended to the prompt); every public method is a tool,
with the same rules as above; an optional `get_reward()` becomes one more reward. `Notebook` below is the pattern.
"""

import ast
import inspect
import math
import operator
from collections.abc import Callable

from transformers.utils import get_json_schema

from rewards import import_dotted

TOOLS: dict[str, Callable] = {}
ENVIRONMENTS: dict[str, type] = {}


def register(tool: Callable) -> Callable:
    """Add a tool (a function) or an environment (a class) to the registry under its own name."""
    registry, name = (ENVIRONMENTS, tool.__name__.lower()) if inspect.isclass(tool) else (TOOLS, tool.__name__)
    if name in registry:
        raise ValueError(f"a tool named {name!r} is already registered")
    registry[name] = tool
    return tool


# ---- calculator: arithmetic, parsed and evaluated node by node, never eval'd ---------------------------------------

MAX_EXPRESSION = 200  # characters
MAX_DIGITS = 100  # digits in any intermediate integer: bounds the work of every operation
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


@register
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: Numbers, + - * / // % ** and parentheses, e.g. "12*(3+4)".
    """
    if isinstance(expression, (int, float)) and not isinstance(expression, bool):
        expression = str(expression)
    if not isinstance(expression, str):
        raise ValueError(f"expression must be a string, not {type(expression).__name__}")
    expression = expression.strip().removesuffix("=").strip()
    if len(expression) > MAX_EXPRESSION:
        raise ValueError(f"expression too long: {len(expression)} characters, at most {MAX_EXPRESSION}")
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None
    value = _evaluate(tree.body)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)  # 6/3 -> "2", as a person would write it
    return str(value) if isinstance(value, int) else format(value, ".12g")


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):  # not bool, complex or str
        return _checked(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = _evaluate(node.left)
        right = _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and left not in (0, 1, -1) and abs(right) * math.log10(abs(left)) > MAX_DIGITS:
            raise ValueError(f"result too large: more than {MAX_DIGITS} digits")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
        except OverflowError:
            raise ValueError("result too large") from None
        if isinstance(value, complex):  # (-8) ** 0.5
            raise ValueError("the result is not a real number")
        return _checked(value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitXor):
        raise ValueError("^ is not a power here: write ** (2**10)")
    raise ValueError(f"not allowed in an arithmetic expression: {ast.unparse(node)!r}")


def _checked(value: int | float) -> int | float:
    if isinstance(value, int) and abs(value) >= 10**MAX_DIGITS or isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"number too large: more than {MAX_DIGITS} digits")
    return value


# ---- python: run code in the code reward's sandbox, return what it prints ------------------------------------------


@register
def python(code: str) -> str:
    """Run a Python program and return what it prints.

    Args:
        code: The program. Print the values you need: only the output comes back.
    """
    if not isinstance(code, str):
        raise ValueError(f"code must be a string, not {type(code).__name__}")
    from extras import code_sandbox  # Linux only; imported when used

    return code_sandbox.run_code(code)  # the same sandbox and limits as the `code` reward (code_sandbox.LIMITS)


# ---- an environment: state that lasts one episode -------------------------------------------------------------------


@register
class Notebook:
    """Named notes the model writes and reads back within one episode (`--environment_factory notebook`).

    The pattern for a stateful environment: `reset` starts an episode (it receives the dataset row, and may return
    text to append to the prompt), each public method is a tool, and state lives on the instance.
    """

    MAX_NOTES = 32
    MAX_LENGTH = 200

    def reset(self, **row) -> None:
        self.notes: dict[str, str] = {}

    def write(self, key: str, value: str) -> str:
        """Write a note, replacing any note under the same key.

        Args:
            key: The note's name.
            value: The note.
        """
        key = str(key)[: self.MAX_LENGTH]
        value = str(value)[: self.MAX_LENGTH]
        if key not in self.notes and len(self.notes) >= self.MAX_NOTES:
            raise ValueError(f"the notebook is full ({self.MAX_NOTES} notes)")
        self.notes[key] = value
        return "written"

    def read(self, key: str) -> str:
        """Read the note written under a key.

        Args:
            key: The note's name.
        """
        if str(key) not in self.notes:
            raise ValueError(f"no note named {str(key)[: self.MAX_LENGTH]!r}; the notes are: {sorted(self.notes)}")
        return self.notes[str(key)]


# ---- the registry -------------------------------------------------------------------------------------------------


def tool_names() -> list[str]:
    return sorted(TOOLS)


def environment_names() -> list[str]:
    return sorted(ENVIRONMENTS)


def check_tool(tool, name: str) -> None:
    """Raise ValueError, saying what to fix, unless `tool` is a function the chat template can describe: a type hint
    on every argument and a docstring with an `Args:` entry for each (what `get_json_schema` needs)."""
    if not callable(tool) or inspect.isclass(tool):
        raise ValueError(f"tool '{name}' is a {type(tool).__name__}, not a function")
    try:
        get_json_schema(tool)
    except Exception as err:  # TypeHintParsingException, DocstringParsingException: both say which argument
        raise ValueError(f"tool '{name}' cannot be shown to the model: {err}. A tool needs a type hint on every "
                         "argument and a docstring with an Args: line for each (see tools.py)") from None


def get_tools(names: list[str]) -> list[Callable]:
    """Resolve `--tools` names (see `tool_names()`) or dotted paths `module.function` to checked tools.

    >>> [tool.__name__ for tool in get_tools(["calculator"])]
    ['calculator']
    """
    tools = []
    for name in names:
        tool = TOOLS.get(name) or _import(name, "tool", tool_names())
        check_tool(tool, name)
        if tool is python:  # at start-up, not at the first call: the sandbox must work on this machine
            try:
                from extras import code_sandbox

                code_sandbox.sandbox_mode()
            except (ImportError, RuntimeError, ValueError) as err:
                raise ValueError(f"tool 'python' runs code in code_sandbox.py's sandbox, which does not work "
                                 f"here: {err}") from None
        tools.append(tool)
    seen = [tool.__name__ for tool in tools]
    if len(set(seen)) < len(seen):
        raise ValueError(f"two tools with one name ({', '.join(seen)}): the model calls a tool by its name")
    return tools


def get_environment_factory(name: str) -> type:
    """Resolve `--environment_factory` (see `environment_names()`, or a dotted path to a class or to a function that
    makes an instance) and check that one instance has a `reset` method and that each of its tools can be shown to
    the model."""
    factory = ENVIRONMENTS.get(name) or _import(name, "environment", environment_names())
    if not callable(factory):
        raise ValueError(f"environment '{name}' is a {type(factory).__name__}, not a class")
    try:
        instance = factory()
    except Exception as err:
        raise ValueError(f"environment '{name}' could not be made with no arguments ({type(err).__name__}: {err}); "
                         "give a class, or a function that returns one instance") from None
    if not callable(getattr(instance, "reset", None)):
        raise ValueError(f"environment '{name}' has no reset(**row) method, which starts each episode")
    methods = [(member_name, member) for member_name, member in inspect.getmembers(instance, inspect.ismethod)
               if member_name not in ("reset", "get_reward") and not member_name.startswith("_")]
    if not methods:
        raise ValueError(f"environment '{name}' has no public methods, so the model has no tools to call")
    for member_name, method in methods:
        check_tool(method, f"{name}.{member_name}")
    return factory


def _import(name: str, kind: str, choices: list[str]):
    if "." not in name:
        raise ValueError(f"unknown {kind} '{name}'; choose one of: {', '.join(choices)}, or give a dotted path "
                         f"like my_module.my_{kind}")
    return import_dotted(name, kind)


def setup(script_args, model_args, train_dataset, reward_funcs: list) -> tuple[list, type | None, list]:
    """`--tools` and `--environment_factory` for GRPOTrainer, checked before any weights load: the tools, the
    environment, and the rewards with the first synchronous one logging each episode's messages (`log_extra`), so
    that completions.jsonl shows tool calls and results. Each failure stops the run in one line."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema, supports_tool_calling
    from trl.data_utils import is_conversational

    try:
        tools = get_tools(script_args.tools)
        factory = get_environment_factory(script_args.environment_factory) if script_args.environment_factory else None
    except ValueError as err:  # an unknown name, an import error, a tool without type hints or docstring
        raise SystemExit(f"error: {err}") from None
    name = model_args.model_name_or_path
    tokenizer = AutoTokenizer.from_pretrained(name, revision=model_args.model_revision)
    if not supports_tool_calling(tokenizer):
        raise SystemExit(f"error: --tools: the chat template of {name} cannot render a tool call and its result "
                         "(trl.chat_template_utils.supports_tool_calling); use a model trained for tool calling, e.g. "
                         "Qwen/Qwen2.5-0.5B-Instruct or Qwen/Qwen3-0.6B")
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        try:  # what GRPOTrainer would do itself, later: a parser for the chat templates trl knows
            add_response_schema(tokenizer)
        except ValueError:
            raise SystemExit(f"error: --tools: trl cannot parse tool calls out of {name}'s completions: its chat "
                             "template is not one trl.chat_template_utils knows (Qwen2.5, Qwen3, Llama 3.1/3.2, "
                             "GLM-4.5, GPT-OSS, ...) and its tokenizer sets no response_template; set one "
                             "(transformers' docs: chat response parsing) and save it with the tokenizer") from None
    if not is_conversational(train_dataset[0]):
        raise SystemExit("error: --tools needs conversational prompts (lists of messages), which the chat template "
                         "renders with the tools' descriptions: give the prompts as messages, or set --system_prompt")
    logged = list(reward_funcs)
    sync = [i for i, func in enumerate(reward_funcs) if not inspect.iscoroutinefunction(func)]
    if sync:
        logged[sync[0]] = LogEpisodes(reward_funcs[sync[0]])
    return tools, factory, logged


class LogEpisodes:
    """A reward, passed through, that also logs each completion's messages through TRL's `log_extra`."""

    def __init__(self, reward_func):
        self.reward_func = reward_func
        self.__name__ = reward_func.__name__  # TRL names the metrics after it
        self.columns = getattr(reward_func, "columns", ())

    def __call__(self, completions, log_extra=None, **kwargs):
        if log_extra is not None:
            import json

            log_extra("messages", [json.loads(json.dumps(c, default=str)) if isinstance(c, list) else None
                                   for c in completions])
        return self.reward_func(completions=completions, log_extra=log_extra, **kwargs)
