"""extras/runtime.py: how a run ends when Ctrl-C is pressed. The interrupt where the run spends its time, in a real
process: tests/e2e/test_resume.py."""

import functools
import threading
from types import SimpleNamespace

import pytest

from extras import runtime


def test_a_ctrl_c_a_library_swallowed_is_said_when_the_run_ends_before_the_grace_period(monkeypatch, capsys):
    """Issue 82: a library whose bare `except:` catches the interrupt (datasets' fingerprinting does) and goes on, the
    rest of the run taking less than GRACE: the run finished, exited 0 and said nothing of the Ctrl-C. It ends as an
    interrupted run, in one line and with Ctrl-C's exit status."""
    monkeypatch.setattr(runtime, "_pressed", threading.Event())
    monkeypatch.setattr(runtime, "_handled", threading.Event())
    monkeypatch.setattr(threading, "Timer", lambda *args: SimpleNamespace(start=lambda: None))  # no grace period's
    monkeypatch.setitem(runtime._run, "started", False)

    def main(ends, script_args, training_args, model_args):
        try:
            runtime.interrupt(2, None)  # what the handler does at Ctrl-C
        except:  # noqa: E722 (the library's)
            pass
        ends()  # the rest of the run: it finishes, or fails on what the interrupt left half done

    def fails():
        raise RuntimeError("a cache the interrupt left half written")

    for ends in (lambda: None, fails):
        runtime._pressed.clear()
        runtime._handled.clear()
        with pytest.raises(SystemExit) as stopped:
            runtime.run_main(functools.partial(main, ends), None, SimpleNamespace(output_dir=None), None)
        assert stopped.value.code == runtime.INTERRUPTED and capsys.readouterr().err.strip() == "interrupted"
        assert runtime._handled.is_set()  # the grace period's timer ends nothing more
