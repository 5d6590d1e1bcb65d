"""Batches with requests out of phase: B client streams against `llama-server -np B`, each sending
its requests back to back, as a server's users do — beside `batches.run_batches`, whose waves of
B requests start together and, on prompts of one kind, draft in phase.

The ragged batch model (`specdec.simulator.equal_split`, what `plan --from` prices) takes the
slots' (drafted, accepted) at a step as independent draws of one law. Slots that start together
on copy prompts draft in the same steps, fewer steps mix a drafting slot with a plain one, and the
model under-predicts them (benchmarks/RESULTS.md); this check measures the case the model is for:

- Stream i of a round runs the round's requests k = i, i + B, ... (request k the prompt
  (k + repeat) mod n, the waves' numbering: `batches.waves`, so the records pair with theirs).
- Stream i first decodes an untimed lead-in of round(i new_tokens / B) tokens, the streams a share
  i / B of a request apart, and then (at B > 1) `WARM_UP` whole untimed requests: its timed requests
  start when every other slot is somewhere inside a request, never at a round's start, where all
  slots begin their answers together (beginnings draft more often, below). The varying step counts
  of speculation scatter the streams more.
- No prompt is processed while another slot decodes (a 200-token prompt pass in the batch would
  slow every slot's steps): each prompt's KV cache is saved once per server
  (`/slots/0?action=save`, `--slot-save-path`) and restored into the stream's slot before each
  of its requests (`action=restore`: no decode), so a request evaluates its prompt's last token
  alone, as a wave's pre-cached request does (each record keeps the count, `prompt_evaluated`).
- A stream that has run its requests keeps its slot busy with untimed fillers (whole requests)
  until every stream has run its own. Half requests, as before 0ddd1ab, are beginnings, and on a
  copy prompt at T = 1 a slot drafts more often early in its answer (ngram-simple, f32: 20-25 % of
  its steps in the first 32 tokens, 13-18 % later): the timed requests' neighbours drafted more often
  than their law, and the B = 8 point of that row came out +15.4 % against the model, +9.0 % with
  whole fillers, the two run back to back (benchmarks/RESULTS.md, "The EPYC rows"). The lead-ins
  are beginnings too, hence the warm-up after them (a check records its `warm_up`: 0 before it).
- The warm-ups and fillers take their prompts from one queue over all prompts (`UNTIMED`), as a
  server's slots take the next user's request: a prompt then holds a slot for a share of the time
  that follows its length in steps, the B = 1 law's weighting. Each stream cycling its own prompts
  (to 165c405; at B = 8 one prompt each) gave every prompt the same time instead, and the copy
  prompts' drafting shares at T = 1 range from 0 to 76 % of their steps (ngram-simple g4, f32): the
  few-step, often-drafting ones held their slots longer than their law says, and the model read
  the B = 8 point +10.9 % high; with neighbours drawn per prompt equally it reads +1.2 %.

What remains: between two of its requests a slot idles while the client restores and posts (a
step or two), and the other slots decode those steps in a smaller batch. Speculation's requests
are fewer steps long, so its neighbours gain more from it than plain decoding's: each record keeps
the slot's idle time before it (`idle_ms`: from the previous answer's arrival to this request's
first step, the client's gap plus the request's wall time beyond the engine's prompt and decode)
and the report the idle share per configuration. (Posting the next request early, so that the
server defers it to the slot's release, and letting the engine's prompt cache (`--cache-ram`)
switch prompts removed the idling but not reproducibly: the same T = 0 requests drafted and
accepted other counts at B = 2 and 4 than alone — 0 to 74 tokens against 32 to 68 — 2026-11-27.)

Measured and predicted as the waves (`batches.points`): B sum(n - 1) / sum(decode_ms) against no
speculation on the same requests, predicted from the traced steps at B = 1 (the batch sizes must
start at 1: at B > 1 a stream's steps share the server's counters with its neighbours and fillers;
a record keeps its own timings' counts).
"""
from __future__ import annotations

import itertools
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from specdec.engines.llamacpp.batches import BatchRecord, request_record, request_seed, rotated, with_slots
from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.server import LlamaServer, ServerConfig
from specdec.engines.llamacpp.trace import traced_steps
from specdec.engines.llamacpp.validation import Config, Request, counter_deltas, counters, send
from specdec.errors import SpecdecError

FILLER_SHARE = 1.0  # a filler's length, a share of new_tokens (0.5 before 0ddd1ab; a check records its "filler_share")
WARM_UP = 1  # whole untimed requests after the lead-in at B > 1 (0 before 165c405; a check records its "warm_up")
UNTIMED = "shared"  # the warm-ups' and fillers' prompts: one queue over all prompts ("own": each stream's, to 165c405)


def design() -> dict:
    """What a streams check records of its round (the replay rebuilds the round from it)."""
    return {"filler_share": FILLER_SHARE, "warm_up": WARM_UP, "untimed": UNTIMED}


def untimed_prompts(untimed: str = UNTIMED) -> Callable[[list[int], int], int]:
    """The request number of a stream's f-th untimed request (warm-up or filler), given its own
    requests `mine`: the next of one queue shared by every stream (thread-safe), or ("own") the
    stream's own requests in turn."""
    queue, lock = itertools.count(), threading.Lock()

    def take(mine: list[int], f: int) -> int:
        if untimed == "own":
            return mine[f % len(mine)]
        with lock:
            return next(queue)
    return take


def stream_requests(n: int, B: int, stream: int) -> list[int]:
    """The request numbers k of stream `stream` in a round of n prompts (every prompt once, the
    last wave wrapped as `batches.waves` does): k = stream, stream + B, ..."""
    return list(range(stream, -(-n // B) * B, B))


def lead_in(B: int, stream: int, new_tokens: int) -> int:
    """The untimed tokens stream `stream` decodes first (0: none), its phase a share stream / B."""
    return round(stream * new_tokens / B)


def run_streams(binary, model, configs: Sequence[Config], requests: Sequence[Request], batch_sizes: Sequence[int],
                temperature: float, repeats: int, new_tokens: int, threads: int | None,
                log: Callable[[str], None] = lambda line: None, seed: int = 0) -> list[BatchRecord]:
    """Per B: every configuration's server (-np B, a slot-save directory each) alive at once, every
    prompt's KV cache saved; each repeat, in a rotating order, one round per configuration of B
    streams (module doc). Each request has its seed (`batches.request_seed`) at every B."""
    if not batch_sizes or batch_sizes[0] != 1:
        raise SpecdecError("streams are predicted from B = 1: the batch sizes must start at 1")
    records: list[BatchRecord] = []
    for B in batch_sizes:
        with ExitStack() as stack:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="specdec-slots-")))
            # started from this thread (PR_SET_PDEATHSIG): see run_batches
            servers = [stack.enter_context(LlamaServer(slots_server(c, model, threads, B, folder / str(i)), binary))
                       for i, c in enumerate(configs)]
            clients = [Client(s.url) for s in servers]
            for client in clients:
                client.complete("Hello", 4)  # warm-up, untimed
                save_prompts(client, requests, temperature)
            for r in range(repeats):
                for i in rotated(len(configs), r):
                    records += stream_round(clients[i], servers[i], configs[i], B, r, requests, temperature,
                                            new_tokens, seed)
                log(f"B={B} repeat {r + 1}/{repeats} done (streams)")
    return records


def slots_server(config: Config, model, threads: int | None, B: int, saves: Path) -> ServerConfig:
    """A configuration's server with B slots whose KV caches can be saved to and restored from
    `saves` (created here)."""
    saves.mkdir(parents=True, exist_ok=True)
    server = with_slots(config, model, threads, B)
    return replace(server, extra=server.extra + ("--slot-save-path", str(saves)))


def saved_name(prompt: int) -> str:
    """The file request prompt `prompt`'s KV cache is saved under (in the server's save path)."""
    return f"prompt{prompt}.bin"


def save_prompts(client: Client, requests: Sequence[Request], temperature: float) -> None:
    """Every request's prompt evaluated in slot 0 and its KV cache saved (`saved_name`)."""
    for j, request in enumerate(requests):
        send(client, request, 1, temperature, 0, id_slot=0, cache_prompt=True)
        client.slot_action(0, "save", saved_name(j))


def stream_round(client: Client, server: LlamaServer, config: Config, B: int, repeat: int,
                 requests: Sequence[Request], temperature: float, new_tokens: int, seed: int,
                 filler_share: float = FILLER_SHARE, warm_up: int = WARM_UP, untimed: str = UNTIMED
                 ) -> list[BatchRecord]:
    """One round of B streams on one configuration's server (module doc); the timed requests' records."""
    n = len(requests)
    running, lock, done, untimed_request = [B], threading.Lock(), threading.Event(), untimed_prompts(untimed)

    def decode(slot: int, k: int, tokens: int):
        j = (k + repeat) % n
        client.slot_action(slot, "restore", saved_name(j))
        return j, send(client, requests[j], tokens, temperature, request_seed(seed, repeat, j), id_slot=slot,
                       cache_prompt=True, ignore_eos=True)

    def stream(i: int) -> list[BatchRecord]:
        out, mine, alone, lead = [], stream_requests(n, B, i), B == 1, lead_in(B, i, new_tokens)
        try:
            if lead:
                decode(i, mine[0], lead)
            for w in range(0 if alone else warm_up):
                decode(i, untimed_request(mine, w), new_tokens)
            for k in mine:
                if done.is_set():  # another stream failed: its error is the one raised
                    return out
                before = counters(client) if alone else None
                logged = len(server.log_text()) if alone and config.traced else 0
                start = time.perf_counter()
                j, d = decode(i, k, new_tokens)
                engine_ms = float(d.timings.get("prompt_ms", 0.0)) + d.decode_ms
                rec = request_record(config.label, B, repeat, k % B, k // B, requests[j].name, d, own_counts=True,
                                     idle_ms=1000 * (time.perf_counter() - start) - engine_ms)
                if alone:  # the server's counters and trace are this request's
                    head, rec.per_pos = counter_deltas(before, counters(client))
                    rec.drafts, rec.draft_tokens, rec.accepted = head
                    if config.traced:
                        rec.steps = [[kk, a] for _, kk, a in traced_steps(server, logged, head[0])]
                else:  # the request's own timings (its drafts' count is the server's alone)
                    rec.draft_tokens, rec.accepted = d.drafted, d.accepted
                out.append(rec)
        except BaseException:
            done.set()  # the other streams stop filling
            raise
        with lock:
            running[0] -= 1
            if not running[0]:
                done.set()
        f = 0
        while not done.is_set():  # keep the batch at B until every stream has run its requests
            decode(i, untimed_request(mine, f), max(1, round(filler_share * new_tokens)))
            f += 1
        return out

    with ThreadPoolExecutor(B) as pool:
        return [rec for recs in pool.map(stream, range(B)) for rec in recs]
