"""What a run prints about itself, from a stand-in trainer: the distributed mode, and the note for a busy machine."""

from types import SimpleNamespace

import pytest
import torch

from extras import outputs


@pytest.mark.parametrize("load, threads, noted", [(1.6, 2, True), (0.4, 2, False), (1.6, 1, False)])
def test_a_busy_machine_is_named_with_what_to_set(monkeypatch, capsys, load, threads, noted):
    """With a load average above half the cores and torch on more than one thread, the run says to set
    OMP_NUM_THREADS=1 (BENCHMARKS.md section 13: 3.5x faster beside other work); idle, or on one thread, it does
    not."""
    accelerator = SimpleNamespace(is_main_process=True, device=torch.device("cpu"), num_processes=1,
                                  state=SimpleNamespace(distributed_type=None, backend=None))
    monkeypatch.setattr(outputs.os, "getloadavg", lambda: (load, 0.0, 0.0))
    monkeypatch.setattr(outputs.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    outputs.print_distributed_mode(SimpleNamespace(accelerator=accelerator))
    printed = capsys.readouterr().out
    assert printed.startswith("distributed: single process, 1 process on cpu\n")
    assert ("OMP_NUM_THREADS=1" in printed) is noted
    if noted:
        assert f"load average {load:.1f} on 2 cores" in printed
