"""Issues 28 and 53's representative hostile inputs, each run as a real `specdec` process under a
1 GiB address-space limit (RLIMIT_AS), timed, its peak resident memory read from the kernel
(wait4's rusage): a case passes when it exits 2 with one `Error:` line, no traceback, in
under 2 s (URL cases: within the fetch deadline) and under the limit; an interrupt case (a
signal 1 s in) when it exits 128 + the signal with one line, within 2 s of the signal. No
process of a case may outlive it, and the special outputs named (FIFO, symlink, device node)
must still be there, unreplaced.

    .venv/bin/python benchmarks/bench_hostile.py          # the table, for RESULTS.md

tests/test_hostile_limits.py runs the same cases in the fast suite.
"""
from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT_BYTES = 1 << 30
V1 = "SpecDecoding metrics: Accepted: 5 tokens, Drafted: 10 tokens, Per-position acceptance rate: "
COUNTERS = ("vllm:spec_decode_num_drafts 100\nvllm:spec_decode_num_draft_tokens 300\n"
            "vllm:spec_decode_num_accepted_tokens 150\n")
PER_POS = 'vllm:spec_decode_num_accepted_tokens_per_pos{{position="{}"}} 50\n'


def serve(drip_s: float = 2.0) -> tuple[int, int]:
    """A local HTTP server (/drip: a byte every drip_s seconds; /big: 1 GiB; any other path a
    one-line /metrics page) and a socket answering bytes that are not HTTP: their ports."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            chunks = {"/drip": (b"v", 60), "/big": (b"x" * (1 << 20), 1024)}
            chunk, count = chunks.get(self.path, (b"vllm:spec_decode_num_drafts 1\n", 1))
            try:
                for _ in range(count):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    if self.path == "/drip":
                        time.sleep(drip_s)
            except OSError:
                pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    junk = socket.socket()
    junk.bind(("127.0.0.1", 0))
    junk.listen(8)

    def answer() -> None:
        while True:
            conn, _ = junk.accept()
            conn.recv(4096)
            conn.sendall(b"\x00\x01garbage\r\n\r\n")
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    return server.server_address[1], junk.getsockname()[1]


def cases(tmp: Path) -> list[tuple[str, list[str], float]]:
    """(label, argv, seconds allowed) of every representative case, its files written into tmp."""
    def write(name: str, text: str | bytes) -> str:
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return str(path)

    http_port, junk_port = serve()
    plan = ["plan", "--c", "0.1", "--from"]
    costs = ["costs", "--config", str(ROOT / "benchmarks" / "data" / "shapes" / "tiny.json"), "--hardware", "h100-sxm"]
    a_file = write("a_file", "x")
    config_only = tmp / "config-only"
    config_only.mkdir(exist_ok=True)
    (config_only / "config.json").write_text("{}")
    (tmp / "out" / "validation.json").mkdir(parents=True, exist_ok=True)
    (tmp / "out" / "validation.md").write_text("old results\n")
    study = {"k": 16, "heads_pass_ms": 1.0, "verify_step_ms": {"0": 10.0, "3": 14.0},
             "by_depth": [{"method": "base", "depth": 3, "block_efficiency": float("nan"), "options": {"p": 1}}]}
    return [
        ("V0 log, k = 1e9", plan + [write("v0.log", "Speculative metrics: Number of speculative tokens: 1000000000, "
                                                   "Number of draft tokens: 1000000000, Number of emitted tokens: "
                                                   "20.\n")], 2),
        ('position="100000000"', plan + [write("pos.txt", COUNTERS + PER_POS.format(100000000))], 2),
        ('position="-1"', plan + [write("neg.txt", COUNTERS + PER_POS.format(-1))], 2),
        ("counter +Inf", plan + [write("inf.txt", COUNTERS.replace("100\n", "+Inf\n", 1) + PER_POS.format(0))], 2),
        ("100,000-digit rate", plan + [write("rx.log", V1 + "1" * 100_000 + "x\n")], 2),
        ("rate 1.500", plan + [write("r15.log", V1 + "1.500, 0.2\n")], 2),
        ("Drafted: 10^30 tokens", plan + [write("d30.log", V1.replace("10 tokens", "1" + "0" * 30 + " tokens")
                                                + "0.5, 0.2\n")], 2),
        ("histogram count 2.5", plan + [write("frac.json", json.dumps(
            {"speculative_decoding": {"acceptance_histogram": [2.5, 1, 1]}}))], 2),
        ("decode JSON, reached grows", plan + [write("grow.json", json.dumps(
            {"stats": {"gamma": 3, "reached": [10, 12, 14], "accepted": [8, 6, 4]}}))], 2),
        ("--draft-length contradicts", plan + [write("k3.txt", COUNTERS + "".join(PER_POS.format(i) for i in range(3))),
                                               "--draft-length", "5"], 2),
        ("100,000-deep JSON, --from", plan + [write("deep.json", "[" * 100_000 + "]" * 100_000)], 2),
        ("100,000-deep JSON, plan-trees", ["plan-trees", str(tmp / "deep.json")], 2),
        ("100,000-deep JSON, figures --lattice", ["figures", "--lattice", str(tmp / "deep.json"),
                                                  "--out", str(tmp / "figs")], 2),
        ("verify cost of k = 1 only", ["plan", "--alpha", "0.8", "--c", "0.01", "--verify-cost-file",
                                       write("k1.json", "[1]")], 2),
        ("batch_sizes: []", plan + [str(tmp / "k3.txt"), "--batch-cost-file", write("bc.json", json.dumps(
            {"kind": "specdec.estimate", "batch_timing": {"batch_sizes": [], "seconds": []}}))], 2),
        ("study row with NaN", ["plan-trees", write("study.json", json.dumps(study).replace("NaN", "NaN"))], 2),
        ("URL: a byte every 2 s", plan + [f"http://127.0.0.1:{http_port}/drip"], 12),
        ("URL: 1 GiB answer", plan + [f"http://127.0.0.1:{http_port}/big"], 12),
        ("URL: not HTTP", plan + [f"http://127.0.0.1:{junk_port}/"], 2),
        ("19 MB prompt line", ["estimate", "--prompts-file", write("big.txt", "word " * 4_000_000)], 2),
        ("empty --prompts-file", ["estimate", "--prompts-file", write("empty.txt", "")], 2),
        ("binary --prompts-file", ["estimate", "--prompts-file", write("bin.txt", bytes(range(256)))], 2),
        ("ngram: not a model", ["estimate", "--drafter", "ngram:" + write("lm.binary", "x")], 2),
        ("model: not a model", ["estimate", "--drafter", f"model:{tmp}"], 2),
        ("lookup:99999999999999999999", ["estimate", "--drafter", "lookup:99999999999999999999"], 2),
        ("--bootstrap 1e12", ["estimate", "--bootstrap", "1000000000000"], 2),
        ("heads train --out FILE/sub", ["heads", "train", "--out", a_file + "/sub"], 2),
        ("plan --figure FILE/x.png", plan + [str(tmp / "k3.txt"), "--batch-cost-file", str(tmp / "bc.json"),
                                            "--figure", a_file + "/x.png"], 2),
        ("validate --out, validation.json a folder", ["validate", "--drafter", "lookup", "--out", str(tmp / "out")], 2),
        ("ngram build --memory lots", ["ngram", "build", "--order", "3", "--out", str(tmp / "ng"), "--memory", "lots"],
         2),
        ("--rollback -1", ["bild", "--rollback", "-1"], 2),
        # round three (issue 53): outputs that are not regular files, bounds before loading, GGUF headers
        ("costs --out FIFO", costs + ["--out", special(tmp / "fifo.json", "fifo")], 2),
        ("costs --out symlink", costs + ["--out", special(tmp / "link.json", "symlink")], 2),
        ("costs --out ''", costs + ["--out", ""], 2),
        ("costs --tflops 1e-320", costs + ["--tflops", "1e-320"], 2),
        ("eagle train --tokens 10^15", ["eagle", "train", "--out", str(tmp / "e"), "--tokens", str(10 ** 15)], 2),
        ("heads train --vocab 10^6", ["heads", "train", "--out", str(tmp / "h"), "--vocab", str(10 ** 6)], 2),
        ("costs --config /dev/zero", ["costs", "--config", "/dev/zero", "--hardware", "h100-sxm"], 2),
        ("--verify-cost-file /dev/zero", ["plan", "--alpha", "0.8", "--c", "0", "--verify-cost-file", "/dev/zero"], 2),
        ("plan-trees /dev/zero", ["plan-trees", "/dev/zero"], 2),
        ("figures --lattice /dev/zero", ["figures", "--lattice", "/dev/zero", "--out", str(tmp / "figs0")], 2),
        ("config: a 100,000-digit number", ["costs", "--config", write("digits.json", '{"num_hidden_layers": '
                                                                     + "1" * 100_000 + "}"), "--hardware", "h100-sxm"], 2),
        ("cost file: not UTF-8", ["plan", "--alpha", "0.8", "--c", "0", "--verify-cost-file",
                                  write("sur.json", b"[1, 1.1\xed\xa0\x80]")], 2),
        ("block efficiency 1e308", ["plan-trees", write("be.json", json.dumps(
            {"k": 4, "by_depth": [{"method": "base", "depth": 3, "block_efficiency": 1e308}],
             "verify_step_ms": {"0": 10.0, "3": 14.0}}))], 2),
        ("figures --lattice, empty lists", ["figures", "--out", str(tmp / "figs1"), "--lattice", write(
            "empty-study.json", json.dumps({"k": 4, "by_depth": [], "block_efficiency": [], "oracle_curve": [],
                                            "repetition": [], "wins": []}))], 2),
        ("figures --out ''", ["figures", "--out", ""], 2),
        ("batch cost file of k = 1 only", plan + [str(tmp / "k3.txt"), "--batch-cost-file", write("k1b.json", json.dumps(
            {"kind": "specdec.estimate", "batch_timing": {"batch_sizes": [1, 2], "seconds": [[0.01], [0.02]]}}))], 2),
        ("context_tokens NaN", plan + [str(tmp / "k3.txt"), "--batch-cost-file", write("nanctx.json", json.dumps(
            {"kind": "specdec.estimate", "batch_timing": {"batch_sizes": [1], "seconds": [[0.01, 0.012]],
                                                          "context_tokens": float("nan")}}))], 2),
        ("GGUF: a header only", ["estimate", "--target", header_gguf(tmp / "header.gguf", "llama")], 2),
        ("GGUF: mamba", ["estimate", "--target", header_gguf(tmp / "mamba.gguf", "mamba")], 2),
        ("GGUF: a 2^40-byte key", ["estimate", "--target", write("huge.gguf", b"GGUF" + (3).to_bytes(4, "little")
                                                                  + (0).to_bytes(8, "little") + (1).to_bytes(8, "little")
                                                                  + (1 << 40).to_bytes(8, "little"))], 2),
        # round three, the rest of its classes: one case each where there was none
        ("costs --out a read-only place (/sys)", costs + ["--out", "/sys/specdec-costs.json"], 2),
        *([("costs --out a device node", costs + ["--out", special(tmp / "dev.json", "device")], 2)]
          if os.geteuid() == 0 else []),  # mknod needs root; the node is the test folder's own, never /dev's
        ("HF folder: config.json only", ["estimate", "--target", str(config_only)], 2),
        ("vLLM: Accepted 5000 of Drafted 1800", plan + [write("over.log", V1.replace("5 tokens", "5000 tokens")
                                                              .replace("10 tokens", "1800 tokens") + "0.5, 0.2\n")], 2),
        ("/metrics: a series twice", plan + [write("dup.txt", (COUNTERS + PER_POS.format(0)) * 2)], 2),
        ("vLLM and llama.cpp lines in one log", plan + [write("mixed.log", V1 + "0.5, 0.2\n" + LLAMA_LINE)], 2),
        ("plan --method with a quote", plan + [str(tmp / "k3.txt"), "--method", "x' ; touch " + str(tmp / "F")
                                               + " ; echo '"], 2),
        ("heads:DIR,k=8,p=1000 (no DIR)", ["estimate", "--drafter", f"heads:{tmp}/none,k=8,p=1000"], 2),
        ("heads:DIR,k=2,p=16 (3 heads: 8 paths)",
         ["estimate", "--drafter", f"heads:{heads_card(tmp / 'heads')},k=2,p=16"], 2),
        ("eagle:DIR,tree=\u00b2", ["estimate", "--drafter", f"eagle:{tmp},tree=\u00b2"], 2),
    ]


LLAMA_LINE = ("0.30.100.632 I slot print_timing: id  0 | task 0 | draft acceptance = 0.42708 (   41 accepted /    96 "
              "generated), mean len = 21.50\n")


def heads_card(folder: Path) -> str:
    """A heads folder whose card states 3 heads over 8192 ids (its weights file is never read)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "card.json").write_text(json.dumps({"format": "specdec-heads/1", "n_heads": 3, "vocab": 8192}))
    (folder / "heads.safetensors").write_bytes(b"never read")
    return str(folder)


def signal_cases(tmp: Path) -> list[tuple[str, list[str], int]]:
    """(label, argv, signal) of the interrupt cases: `plan --from -` waits on an open, silent pipe
    and gets the signal 1 s after it starts; it must exit 128 + the signal with one line."""
    return [("SIGINT while plan --from - waits", ["plan", "--c", "0.1", "--from", "-"], signal.SIGINT),
            ("SIGTERM while plan --from - waits", ["plan", "--c", "0.1", "--from", "-"], signal.SIGTERM)]


def special(path: Path, kind: str) -> str:
    """A FIFO, a device node (root only) or a symbolic link to a regular file, at `path` (an output
    that must not be replaced)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # a null device of the folder's own
    else:
        target = path.with_name(path.name + ".target")
        target.write_text("old")
        path.symlink_to(target)
    return str(path)


def header_gguf(path: Path, arch: str) -> str:
    """A GGUF file with the metadata of a 2-block `arch` model and no tensors."""
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return str(path)


def run_case(argv: list[str], timeout: float = 30.0, signum: int | None = None,
             after: float = 1.0) -> tuple[int | None, float, float, str]:
    """(exit status or None on timeout, seconds, peak resident MiB, stderr) of `specdec argv`
    under the RLIMIT_AS limit; with `signum`, its standard input an open pipe that stays silent
    and the signal sent to specdec `after` seconds (the seconds then count from the signal). A
    process of the case still running afterwards (found by an environment marker) is killed and
    named on a last stderr line, which fails the case."""
    # A small launcher sets the limit, runs specdec as its own child and reports that child's
    # rusage: a child forked straight from a large parent (a pytest process) would count the
    # parent's pages, which it held until exec, in its peak RSS.
    launcher = ("import os, resource, subprocess, sys; "
                "resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]),) * 2); "
                "p = subprocess.Popen([sys.executable, '-m', 'specdec', *sys.argv[2:]], stdout=subprocess.DEVNULL); "
                "print(p.pid, flush=True); _, status, usage = os.wait4(p.pid, 0); print(usage.ru_maxrss); "
                "sys.exit(os.waitstatus_to_exitcode(status) % 256)")
    start = time.perf_counter()
    marker = f"{os.getpid()}-{time.monotonic_ns()}"  # every process of this case inherits it
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-c", launcher, str(LIMIT_BYTES), *argv], stdout=subprocess.PIPE,
                                stderr=err, cwd=ROOT, start_new_session=True,
                                stdin=subprocess.PIPE if signum is not None else None,
                                env={**os.environ, "SPECDEC_HOSTILE_CASE": marker})
        try:
            if signum is not None:
                child = int(proc.stdout.readline())
                time.sleep(after)
                os.kill(child, signum)
                start = time.perf_counter()
                proc.wait(timeout=timeout)  # stdin still open: it must stop on the signal, not on an EOF
            out, _ = proc.communicate(timeout=timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            code = None
        seconds = time.perf_counter() - start
        err.seek(0)
        text = err.read().decode(errors="replace")
    left = survivors(marker)
    if left:  # an orphan fails the case (a second stderr line) and is ended here
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        text += f"\n{len(left)} process(es) of the case outlived it: {left}"
    rss_kib = int(out.split()[-1]) if out.split() and out.split()[-1].isdigit() else 0
    return code, seconds, rss_kib / 1024, text


def survivors(marker: str) -> list[int]:
    """The processes still running whose environment holds SPECDEC_HOSTILE_CASE=marker (what a
    case started and left behind: torchrun ranks, engine servers, in any process group)."""
    needle = f"SPECDEC_HOSTILE_CASE={marker}".encode()
    left = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    left.append(int(entry.name))
    return left


def passes(code: int | None, seconds: float, rss_mib: float, stderr: str, allowed: float,
           signum: int | None = None) -> bool:
    """One `Error:` line and exit 2 (with `signum`: one line and exit 128 + signum), no traceback,
    within `allowed` seconds and the memory limit."""
    lines = stderr.strip().splitlines()
    expected = 2 if signum is None else 128 + signum
    return (code == expected and len(lines) == 1 and (signum is not None or lines[0].startswith("Error:"))
            and "Traceback" not in stderr and seconds < allowed and rss_mib < LIMIT_BYTES / (1 << 20))


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        print("| case | exit | seconds | peak RSS MiB | passes | message |")
        print("|---|---|---|---|---|---|")
        failed = 0
        runs = [(label, argv, allowed, None) for label, argv, allowed in cases(tmp)]
        runs += [(label, argv, 2, signum) for label, argv, signum in signal_cases(tmp)]
        for label, argv, allowed, signum in runs:
            code, seconds, rss, stderr = run_case(argv, signum=signum)
            ok = passes(code, seconds, rss, stderr, allowed, signum)
            failed += not ok
            message = (stderr.strip().splitlines() or [""])[-1][:110].replace("|", "/").replace(str(tmp), "T")
            print(f"| {label} | {code} | {seconds:.2f} | {rss:.0f} | {'yes' if ok else 'NO'} | {message} |", flush=True)
        old = (tmp / "out" / "validation.md").read_text()
        kept = outputs_kept(tmp)
        print(f"\nvalidate's old validation.md untouched: {old == 'old results' + chr(10)}; FIFO, symlink and device "
              f"outputs kept: {kept}; the quoted --method ran nothing: {not (tmp / 'F').exists()}; "
              f"cases failing: {failed} of {len(runs)}")
        sys.exit(1 if failed or old != "old results\n" or not kept or (tmp / "F").exists() else 0)


def outputs_kept(tmp: Path) -> bool:
    """Whether the special outputs the cases named are still what they were (never replaced)."""
    device = tmp / "dev.json"
    return ((tmp / "fifo.json").is_fifo() and (tmp / "link.json").is_symlink()
            and (tmp / "link.json.target").read_text() == "old"
            and (not device.exists() or stat.S_ISCHR(os.lstat(device).st_mode)))


if __name__ == "__main__":
    main()
