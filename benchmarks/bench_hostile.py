"""Issue 28's representative hostile inputs, each run as a real `specdec` process under a 1 GiB
address-space limit (RLIMIT_AS), timed, its peak resident memory read from the kernel
(wait4's rusage): a case passes when it exits 2 with one `Error:` line, no traceback, in
under 2 s (URL cases: within the fetch deadline) and under the limit.

    .venv/bin/python benchmarks/bench_hostile.py          # the table, for RESULTS.md

tests/test_hostile_limits.py runs the same cases in the fast suite.
"""
from __future__ import annotations

import http.server
import json
import os
import signal
import socket
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
    ]


def special(path: Path, kind: str) -> str:
    """A FIFO, or a symbolic link to a regular file, at `path` (an output that must not be replaced)."""
    if kind == "fifo":
        os.mkfifo(path)
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


def run_case(argv: list[str], timeout: float = 30.0) -> tuple[int | None, float, float, str]:
    """(exit status or None on timeout, seconds, peak resident MiB, stderr) of `specdec argv`
    under the RLIMIT_AS limit."""
    # A small launcher sets the limit, runs specdec as its own child and reports that child's
    # rusage: a child forked straight from a large parent (a pytest process) would count the
    # parent's pages, which it held until exec, in its peak RSS.
    launcher = ("import os, resource, subprocess, sys; "
                "resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]),) * 2); "
                "p = subprocess.Popen([sys.executable, '-m', 'specdec', *sys.argv[2:]], stdout=subprocess.DEVNULL); "
                "_, status, usage = os.wait4(p.pid, 0); print(usage.ru_maxrss); "
                "sys.exit(os.waitstatus_to_exitcode(status) % 256)")
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-c", launcher, str(LIMIT_BYTES), *argv], stdout=subprocess.PIPE,
                                stderr=err, cwd=ROOT, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            code = None
        seconds = time.perf_counter() - start
        err.seek(0)
        text = err.read().decode(errors="replace")
    rss_kib = int(out.split()[-1]) if out.split() and out.split()[-1].isdigit() else 0
    return code, seconds, rss_kib / 1024, text


def passes(code: int | None, seconds: float, rss_mib: float, stderr: str, allowed: float) -> bool:
    lines = stderr.strip().splitlines()
    return (code == 2 and len(lines) == 1 and lines[0].startswith("Error:") and "Traceback" not in stderr
            and seconds < allowed and rss_mib < LIMIT_BYTES / (1 << 20))


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        print("| case | exit | seconds | peak RSS MiB | passes | message |")
        print("|---|---|---|---|---|---|")
        failed = 0
        for label, argv, allowed in cases(tmp):
            code, seconds, rss, stderr = run_case(argv)
            ok = passes(code, seconds, rss, stderr, allowed)
            failed += not ok
            message = (stderr.strip().splitlines() or [""])[-1][:110].replace("|", "/").replace(str(tmp), "T")
            print(f"| {label} | {code} | {seconds:.2f} | {rss:.0f} | {'yes' if ok else 'NO'} | {message} |", flush=True)
        old = (tmp / "out" / "validation.md").read_text()
        print(f"\nvalidate's old validation.md untouched: {old == 'old results' + chr(10)}; cases failing: {failed}")
        sys.exit(1 if failed or old != "old results\n" else 0)


if __name__ == "__main__":
    main()
