"""Tools for tool-calling GRPO (tools.py): the calculator on hostile input, the python tool's sandbox, the registry's
checks, the environment example; then the script's errors, and runs on the bundled tool task."""

import json
import os
import re
import shutil
import time

import pytest
from conftest import (ADDITION, MULTIPROCESS, REPO, accelerate_ddp, assert_summary_means, ddp_flags,
                      default_run, read_jsonl, run_script)

from extras import code_sandbox
from extras import tools
from extras.tools import Notebook, calculator, get_environment_factory, get_tools

FAST = code_sandbox.Limits(timeout=3, cpu=2, memory=256 << 20, processes=8, open_files=32)
TOOL_MODEL = REPO / "assets" / "tiny-llama-tools"
TOOL_TASK = REPO / "assets" / "tool-addition"
RECIPE = REPO / "recipes" / "tiny" / "tools.yaml"
CALLS_RISE, ACCURACY_RISE = 0.39, 0.24  # test_tool_task_learns: mean - 3 sd over 8 seeds
# The recipe names the bundled files relative to the repository, where the README runs it; tests run elsewhere.
TOOL_RUN = ["--config", RECIPE, "--model_name_or_path", TOOL_MODEL, "--dataset_name", TOOL_TASK]


@pytest.mark.parametrize("expression, result", [
    ("123+456", "579"), ("964 + 494=", "1458"), ("12*(3+4)", "84"), ("6/3", "2"), ("1/3", "0.333333333333"),
    ("7//2", "3"), ("7%4", "3"), ("2**10", "1024"), ("-3--3", "0"), ("1.5*2", "3"), ("0.1+0.2", "0.3"),
    ("99**50", str(99**50)), (42, "42"), (2.5, "2.5"),
])
def test_calculator_computes(expression, result):
    assert calculator(expression) == result


@pytest.mark.parametrize("expression, message", [
    ("__import__('os').system('touch /tmp/calculator-pwned')", "not allowed"),  # a call
    ("().__class__.__bases__[0].__subclasses__()", "not allowed"),  # attribute and subscript
    ("open('/etc/passwd').read()", "not allowed"),
    ("lambda: 1", "not allowed"), ("[1, 2]", "not allowed"), ("x + 1", "not allowed"), ("'a' * 3", "not allowed"),
    ("1 if 1 else 2", "not allowed"), ("(x := 3)", "not allowed"), ("1 < 2", "not allowed"),
    ("True + 1", "not allowed"),
    ("1j * 1j", "not allowed"), ("1,234", "not allowed"), ("2 ^ 3", r"write \*\*"), ("1 << 4", "not allowed"),
    ("9**9**9", "too large"), ("10**99 * 10**99", "too large"), ("(10**60)**2", "too large"), ("2**-4000", "too large"),
    ("1e308 * 10", "too large"), ("1e999", "too large"), ("0.1 ** -400", "too large"),
    ("1/0", "division by zero"), ("5 % 0", "division by zero"), ("(-8) ** 0.5", "not a real number"),
    ("(" * 150 + "1" + ")" * 150, "too long"), ("1+", "not an arithmetic expression"), ("", "not an arithmetic"),
    ("\x00", "not an arithmetic"), (None, "must be a string"), (["1+1"], "must be a string"),
    (True, "must be a string"),
])
def test_calculator_refuses_with_a_message_the_model_can_read(expression, message):
    start = time.monotonic()
    with pytest.raises(ValueError, match=message):
        calculator(expression)
    assert time.monotonic() - start < 1
    assert not os.path.exists("/tmp/calculator-pwned")


def test_calculator_never_evaluates_python(monkeypatch):
    def no_eval(*args, **kwargs):
        raise AssertionError("eval called")

    monkeypatch.setattr("builtins.eval", no_eval)
    monkeypatch.setattr("builtins.exec", no_eval)
    assert calculator("2*(3+4)") == "14"


@pytest.mark.xdist_group("sandbox")  # timed against its limits: with the other sandbox tests, one at a time
def test_python_tool_returns_what_the_code_prints(monkeypatch):
    monkeypatch.setattr(code_sandbox, "LIMITS", FAST)
    assert tools.python("print(6 * 7)") == "42\n"
    out = tools.python("print('before')\ndef f():\n    return 1 / 0\nf()")
    assert out.startswith("before\nTraceback") and out.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "SyntaxError" in tools.python("print(")
    assert tools.python("print('x' * 10000)").endswith(f"[output cut at {code_sandbox.MAX_OUTPUT} bytes]")


@pytest.mark.xdist_group("sandbox")
def test_python_tool_runs_in_the_code_rewards_sandbox(monkeypatch):
    monkeypatch.setattr(code_sandbox, "LIMITS", FAST)
    monkeypatch.setenv("HF_TOKEN", "hf_fake_secret_4242")
    start = time.monotonic()
    assert tools.python("print('started')\nwhile True: pass").startswith("started\n\n[")  # CPU limit (2 s) or timeout
    assert time.monotonic() - start < FAST.timeout + 3
    assert tools.python("import time\ntime.sleep(60)") == f"\n[killed: still running after {FAST.timeout:g} s]"
    assert "hf_fake_secret_4242" not in tools.python("import os\nprint(dict(os.environ))")
    assert "MemoryError" in tools.python("x = bytearray(1 << 30)")  # FAST.memory is 256 MiB
    if code_sandbox.sandbox_mode() != "rlimits":
        out = tools.python("import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)")
        assert "Error" in out  # no network: only its own loopback, where nothing listens


@pytest.mark.xdist_group("sandbox")
def test_python_tool_contains_a_fork_bomb_and_works_after_it(monkeypatch):
    monkeypatch.setattr(code_sandbox, "LIMITS", FAST)
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    start = time.monotonic()
    assert "[killed: " in tools.python(bomb)
    assert time.monotonic() - start < FAST.timeout + 3
    fork = "import os\npid = os.fork()\nif pid == 0:\n    print('forked')\n    os._exit(0)\nos.waitpid(pid, 0)"
    assert tools.python(fork) == "forked\n"  # the slot's next run can fork


def test_python_tool_needs_a_working_sandbox_at_start_up(monkeypatch):
    monkeypatch.setenv("CODE_SANDBOX", "nosuchmode")
    with pytest.raises(ValueError, match="tool 'python' runs code in code_sandbox.py's sandbox, which does not work"):
        get_tools(["python"])


def test_registry_resolves_names_and_dotted_paths(tmp_path, monkeypatch):
    (tmp_path / "my_tools.py").write_text(
        'def shout(text: str) -> str:\n    """Upper-case a text.\n\n    Args:\n        text: The text.\n    """\n'
        "    return text.upper()\n\n"
        "def untyped(text):\n    \"\"\"Upper-case.\n\n    Args:\n        text: The text.\n    \"\"\"\n\n"
        "def undocumented(text: str) -> str:\n    return text\n\nNUMBER = 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert [t.__name__ for t in get_tools(["calculator", "my_tools.shout"])] == ["calculator", "shout"]
    for names, message in [
        (["calculater"], "unknown tool 'calculater'; choose one of: calculator, python"),
        (["my_tools.missing"], "tool 'my_tools.missing': module my_tools .* has no 'missing'; it defines: shout"),
        (["no_such_module.f"], "cannot import tool 'no_such_module.f'"),
        (["my_tools.untyped"], "tool 'my_tools.untyped' cannot be shown to the model: .*type hint"),
        (["my_tools.undocumented"], "tool 'my_tools.undocumented' cannot be shown to the model: .*docstring"),
        (["my_tools.NUMBER"], "tool 'my_tools.NUMBER' is a int, not a function"),
        (["extras.tools.Notebook"], "is a type, not a function"),
        (["calculator", "calculator"], "two tools with one name"),
    ]:
        with pytest.raises(ValueError, match=message):
            get_tools(names)


def test_environment_factory_checks_the_class(tmp_path, monkeypatch):
    (tmp_path / "my_envs.py").write_text(
        "class NoReset:\n    def act(self, x: int) -> int:\n        \"\"\"Act.\n\n        Args:\n            x: X.\n"
        "        \"\"\"\n        return x\n\n"
        "class NoTools:\n    def reset(self, **row):\n        pass\n\n"
        "class Untyped:\n    def reset(self, **row):\n        pass\n\n    def act(self, x):\n        return x\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert get_environment_factory("notebook") is Notebook
    for name, message in [("my_envs.NoReset", "no reset"), ("extras.tools.calculator", "could not be made"),
                          ("my_envs.NoTools", "no public methods"),
                          ("my_envs.Untyped", "'my_envs.Untyped.act' cannot be shown"),
                          ("notepad", "unknown environment 'notepad'; choose one of: notebook")]:
        with pytest.raises(ValueError, match=message):
            get_environment_factory(name)


def test_notebook_keeps_notes_for_one_episode():
    notebook = Notebook()
    notebook.reset(prompt="p", answer="1")
    assert notebook.write("x", "41") == "written" and notebook.read("x") == "41"
    with pytest.raises(ValueError, match="no note named 'y'; the notes are: \\['x'\\]"):
        notebook.read("y")
    for i in range(Notebook.MAX_NOTES - 1):
        notebook.write(f"k{i}", "v")
    with pytest.raises(ValueError, match="full"):
        notebook.write("one more", "v")
    notebook.reset(prompt="q", answer="2")
    with pytest.raises(ValueError, match="no note named 'x'"):
        notebook.read("x")


def test_bundled_tool_model_renders_and_parses_tool_calls():
    """The bundled tool model's tokenizer is one trl can use for tool calling: Qwen2.5's template, which renders
    the calculator and the whole exchange, and a response parser that reads the call back out of token ids."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import (add_response_schema, is_chat_template_prefix_preserving, parse_response,
                                         supports_tool_calling)

    tokenizer = AutoTokenizer.from_pretrained(REPO / "assets" / "tiny-llama-tools")
    assert supports_tool_calling(tokenizer) and is_chat_template_prefix_preserving(tokenizer)
    add_response_schema(tokenizer)
    row = json.loads((REPO / "assets" / "tool-addition" / "train.jsonl").read_text().splitlines()[0])
    prompt = tokenizer.apply_chat_template(row["prompt"], tools=[calculator], add_generation_prompt=True)["input_ids"]
    assert '"name": "calculator"' in tokenizer.decode(prompt) and len(prompt) < 64
    expression = row["prompt"][0]["content"].removesuffix("=")
    arguments = json.dumps({"name": "calculator", "arguments": {"expression": expression}})
    call = f"<tool_call>\n{arguments}\n</tool_call><|im_end|>"
    parsed = parse_response(tokenizer, tokenizer(call)["input_ids"], prefix=prompt)
    assert parsed["tool_calls"][0]["function"] == {"name": "calculator", "arguments": {"expression": expression}}
    assert calculator(expression) == row["answer"]


def test_a_conversation_is_logged_as_the_text_the_model_saw():
    """completions.jsonl's prompt and completion as trl 1.12 logs them, the ids decoded without special tokens,
    whether trl hands the script text (1.12) or messages (1.13 on): the prompt with the tools it showed, then the
    whole exchange, or a plain answer's content."""
    from transformers import AutoTokenizer

    from extras.outputs import logged_text

    tokenizer = AutoTokenizer.from_pretrained(TOOL_MODEL)
    prompt = [{"role": "user", "content": "2+3="}]
    shown = tokenizer.apply_chat_template(prompt, tools=[calculator], add_generation_prompt=True)["input_ids"]
    exchange = [{"role": "assistant", "tool_calls": [{"type": "function", "function": {
                    "name": "calculator", "arguments": {"expression": "2+3"}}}]},
                {"role": "tool", "name": "calculator", "content": "5"}, {"role": "assistant", "content": "It is 5"}]
    row = logged_text(tokenizer, prompt, exchange, [calculator], None)
    assert row["prompt"] == tokenizer.decode(shown, skip_special_tokens=True)
    assert '"name": "calculator"' in row["prompt"] and row["prompt"].endswith("user\n2+3=\nassistant\n")
    assert row["completion"].startswith('<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+3"}}')
    assert "5" in row["completion"] and row["completion"].rstrip().endswith("It is 5")
    plain = [{"role": "assistant", "content": "5"}]
    assert logged_text(tokenizer, prompt, plain, [calculator], None)["completion"] == "5"
    assert logged_text(tokenizer, "2+3=", "5", [], None) == {"prompt": "2+3=", "completion": "5"}


# ---- the script ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unparsable_tool_model(tmp_path_factory):
    """The bundled tool model with a chat template that renders tools but that trl has no parser for."""
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("unparsable")
    shutil.copytree(TOOL_MODEL, out, dirs_exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(TOOL_MODEL)
    tokenizer.chat_template = "{#- my own template -#}\n" + tokenizer.chat_template
    tokenizer.save_pretrained(out)
    return out


@pytest.mark.parametrize("script, args, message", [
    ("grpo_trl_example.py", ["--tools", "calculator", *default_run("grpo"),
                             "--system_prompt", "Add."],
     "error: --tools: the chat template of .*tiny-llama-addition cannot render a tool call"),
    ("grpo_trl_example.py", ["--tools", "calculator", *default_run("grpo"), "--model_name_or_path", "UNPARSABLE",
                             "--dataset_name", TOOL_TASK],
     "error: --tools: trl cannot parse tool calls out of .*completions"),
    ("grpo_trl_example.py", ["--tools", "abacus"], "error: unknown tool 'abacus'; choose one of: calculator, python"),
    ("grpo_trl_example.py", ["--tools", "os.path.join"], "error: tool 'os.path.join' cannot be shown to the model"),
    ("grpo_trl_example.py", ["--environment_factory", "extras.tools.calculator"],
     "error: environment 'extras.tools.calculator' could not be made with no arguments"),
    ("grpo_trl_example.py", ["--tools", "calculator", "--dataset_name", ADDITION],
     "error: --tools needs conversational prompts"),
    ("grpo_trl_example.py", ["--max_tool_calling_iterations", "2"], "error: --max_tool_calling_iterations "
                                                                    "bounds the rounds of tool calls: add --tools"),
    ("grpo_trl_example.py", ["--tools", "calculator", "--eval_num_samples", "2"],
     "error: --eval_num_samples 2: the before/after evaluation generates without the tool loop; with --tools set "
     "--eval_num_samples 0"),
    ("ppo_trl_example.py", ["--tools", "calculator"], "error: --tools is not supported here: .*tool calling is GRPO's"),
    ("ppo_trl_example.py", ["--environment_factory", "notebook"], "error: --environment_factory is not supported"),
])
def test_tool_errors_stop_the_run_with_one_line(script, args, message, unparsable_tool_model, tmp_path,
                                                fails_early):
    """Each mistake stops the run before any weights load, with one line that says what to do."""
    if script == "grpo_trl_example.py" and "--model_name_or_path" not in args:
        args = [*default_run("grpo"), "--model_name_or_path", TOOL_MODEL, "--dataset_name", TOOL_TASK, *args]
    if script == "grpo_trl_example.py" and "--eval_num_samples" not in args:  # the default run's evaluation has
        args = ["--eval_num_samples", "0", *args]  # no tool loop: its own error, tested above
    args = [unparsable_tool_model if a == "UNPARSABLE" else a for a in args]
    assert re.match(message, fails_early(tmp_path, *args, script=script))


def test_tool_task_learns(tmp_path):
    """The bundled tool task, seeded, as the README runs it: the tool-call rate and the accuracy both rise from
    the first 20% of logged steps to the last, and the outputs show the episodes.

    Margins: mean - 3 sd over 8 seeds (1-7, 42), measured by `python benchmarks/learning_seeds.py --scripts tools`
    with one thread, as here (BENCHMARKS.md, "Does the default run learn?"): the tool-call rate rises by
    0.477 +- 0.029 (min 0.444), the accuracy by 0.338 +- 0.031 (min 0.275). Seed 42: calls 0.412 -> 0.856,
    accuracy 0.250 -> 0.525.
    """
    out = tmp_path / "out"
    proc = run_script("grpo_trl_example.py", *TOOL_RUN, "--output_dir", out, "--use_cpu", "true", cwd=tmp_path)
    summary = assert_summary_means(out, proc.stdout)
    assert summary["global_step"] == 60 and summary["script_args"]["tools"] == ["calculator"]
    (calls_first, calls_last), (first, last) = (summary["first_last_20pct"][key] for key in (
        "tools/call_frequency", "rewards/accuracy/mean"))
    assert calls_last - calls_first >= CALLS_RISE and last - first >= ACCURACY_RISE
    assert f"tools/call_frequency, first -> last 20%: {calls_first:.3f} -> {calls_last:.3f}" in proc.stdout

    logs = [m for m in read_jsonl(out / "metrics.jsonl") if "reward" in m]
    assert all(0 <= m["tools/call_frequency"] <= 1 and m["tools/failure_frequency"] >= 0 for m in logs)
    rows = read_jsonl(out / "completions.jsonl")
    assert len(rows) == 12 * 16  # 12 logging steps x the 16 completions of the latest step
    called = [r for r in rows if r["messages"][0].get("tool_calls")]
    assert called and len(called) < len(rows)
    for row in called:  # the call, the calculator's answer to it, then the model's last word, which is what is scored
        call, result, answer = row["messages"]
        assert call["role"] == "assistant" and result == {"role": "tool", "name": "calculator", "content": result[
            "content"]}
        expression = call["tool_calls"][0]["function"]["arguments"]["expression"]
        try:
            assert result["content"] == calculator(expression)
        except ValueError:  # a malformed expression: the model read the calculator's error
            assert "error" in result["content"]
        a, b = map(int, re.findall(r"(\d+)\+(\d+)=", row["prompt"])[-1])
        assert answer["role"] == "assistant"
        if answer["content"].strip() == str(a + b):
            assert row["accuracy"] == 1.0
    assert (out / "training_curves.png").read_bytes()[:4] == b"\x89PNG"


def test_a_tool_of_your_own_by_dotted_path(tmp_path):
    """--tools my_tools.calculator: the user's function, from their own module, is the one the model calls."""
    (tmp_path / "my_tools.py").write_text(
        "import json, os\n"
        "from extras import tools\n\n"
        "def calculator(expression: str) -> str:\n"
        '    """Evaluate an arithmetic expression.\n\n    Args:\n'
        '        expression: Numbers, + - * / // % ** and parentheses, e.g. \\"12*(3+4)\\".\n    """\n'
        "    with open(os.environ['CALLS_FILE'], 'a') as f:\n"
        "        f.write(json.dumps(expression) + '\\n')\n"
        "    return tools.calculator(expression)\n"
    )
    out = tmp_path / "out"
    run_script("grpo_trl_example.py", *TOOL_RUN, "--tools", "my_tools.calculator", "--max_steps", 3,
               "--logging_steps", 1, "--output_dir", out, cwd=tmp_path,
               env={"PYTHONPATH": str(tmp_path), "CALLS_FILE": str(tmp_path / "calls.jsonl")})
    calls = read_jsonl(tmp_path / "calls.jsonl")
    assert calls, "the tool from my_tools.py was never called"
    assert len(calls) <= round(sum(m["tools/call_frequency"] for m in read_jsonl(out / "metrics.jsonl")) * 16)
    for row in read_jsonl(out / "completions.jsonl"):  # every step is logged: each call that ran is one of ours
        if row["messages"][0].get("tool_calls") and "error" not in row["messages"][1]["content"]:
            assert row["messages"][0]["tool_calls"][0]["function"]["arguments"]["expression"] in calls


@MULTIPROCESS
def test_tools_with_two_processes(tmp_path):
    """The tool loop under DDP: each process runs its own completions' calls; the logs gather both."""
    out, steps = tmp_path / "out", 2
    proc = run_script("grpo_trl_example.py", *TOOL_RUN, "--max_steps", steps, "--logging_steps", 1,
                      "--output_dir", out, *ddp_flags(2), cwd=tmp_path, launcher=accelerate_ddp(2))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_step"] == steps
    assert proc.stdout.count("GRPO: 2 steps") == 1
    rows = read_jsonl(out / "completions.jsonl")
    assert len(rows) == steps * 2 * 16 and all(len(r["messages"]) in (1, 3) for r in rows)
    assert all("tools/call_frequency" in m for m in read_jsonl(out / "metrics.jsonl"))


def test_an_environment_of_your_own(tmp_path):
    """--environment_factory my_envs.Counter: one instance per rollout, reset with the dataset row before each
    episode, and its public methods offered as tools next to --tools."""
    (tmp_path / "my_envs.py").write_text(
        "import json, os\n\n"
        "class Counter:\n"
        "    def reset(self, **row):\n"
        "        self.count = 0\n"
        "        with open(os.environ['RESETS_FILE'], 'a') as f:\n"
        "            f.write(json.dumps(row['answer']) + '\\n')\n\n"
        "    def increment(self, by: int) -> str:\n"
        '        """Add to the counter.\n\n        Args:\n            by: How much to add.\n        """\n'
        "        self.count += by\n"
        "        return str(self.count)\n"
    )
    out, steps = tmp_path / "out", 2
    proc = run_script("grpo_trl_example.py", *TOOL_RUN, "--environment_factory", "my_envs.Counter",
                      "--max_steps", steps, "--logging_steps", 1, "--output_dir", out, cwd=tmp_path,
                      env={"PYTHONPATH": str(tmp_path), "RESETS_FILE": str(tmp_path / "resets.jsonl")})
    answers = {row["answer"] for row in read_jsonl(TOOL_TASK / "train.jsonl")}
    resets = read_jsonl(tmp_path / "resets.jsonl")
    assert len(resets) == steps * 16 and set(resets) <= answers  # every rollout, with its own row
    prompt = read_jsonl(out / "completions.jsonl")[0]["prompt"]
    assert '"name": "increment"' in prompt and '"name": "calculator"' in prompt  # both tools shown to the model
    assert "GRPO: 2 steps" in proc.stdout
