"""Requests to a running llama-server and what it reports of them: `/completion` and
`/v1/chat/completions` with the engine's own `timings` (predicted_n tokens decoded in
predicted_ms, prompt_n / prompt_ms for the prompt, draft_n / draft_n_accepted when anything
was drafted), and its Prometheus `/metrics` page. Standard library only (loopback HTTP).
"""
from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from specdec.errors import SpecdecError

REQUEST_S = 600.0  # one request's deadline: a few hundred tokens on a 2-core CPU take seconds


@dataclass(frozen=True)
class Completion:
    """One answered request: its text, the engine's timings and the client's wall time."""

    text: str
    timings: dict[str, Any]
    wall_s: float
    response: dict[str, Any] = field(repr=False)

    @property
    def tokens(self) -> int:
        """Tokens the engine decoded (timings.predicted_n)."""
        return int(self.timings.get("predicted_n", 0))

    @property
    def decode_ms(self) -> float:
        """The engine's decoding time, prompt excluded (timings.predicted_ms)."""
        return float(self.timings.get("predicted_ms", 0.0))

    @property
    def drafted(self) -> int:
        """Draft tokens proposed (0 when the engine drafted nothing: it then omits draft_n)."""
        return int(self.timings.get("draft_n", 0))

    @property
    def accepted(self) -> int:
        return int(self.timings.get("draft_n_accepted", 0))


class Client:
    """A llama-server at `base_url` (e.g. `LlamaServer.url`)."""

    def __init__(self, base_url: str, timeout_s: float = REQUEST_S) -> None:
        self.base_url, self.timeout_s = base_url.rstrip("/"), timeout_s

    def _call(self, path: str, body: dict | None = None) -> bytes:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data,
                                         headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", errors="replace")
            raise SpecdecError(f"llama-server {path}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise SpecdecError(f"llama-server {path}: {getattr(exc, 'reason', exc)} (did the server die?)") from None

    def _json(self, path: str, body: dict) -> tuple[dict, float]:
        start = time.perf_counter()
        raw = self._call(path, body)
        wall = time.perf_counter() - start
        try:
            return json.loads(raw), wall
        except ValueError:
            raise SpecdecError(f"llama-server {path} answered something that is not JSON: {raw[:120]!r}") from None

    def complete(self, prompt: str, n_predict: int, temperature: float = 0.0, seed: int = 0,
                 **options: Any) -> Completion:
        """POST /completion (raw text, no chat template); `options` go into the body as they are."""
        body = {"prompt": prompt, "n_predict": n_predict, "temperature": temperature, "seed": seed,
                "cache_prompt": False, **options}
        data, wall = self._json("/completion", body)
        return Completion(str(data.get("content", "")), dict(data.get("timings") or {}), wall, data)

    def chat(self, messages: list[dict[str, str]], max_tokens: int, temperature: float = 0.0, seed: int = 0,
             **options: Any) -> Completion:
        """POST /v1/chat/completions (the model's chat template)."""
        body = {"messages": messages, "max_tokens": max_tokens, "temperature": temperature, "seed": seed,
                "cache_prompt": False, **options}
        data, wall = self._json("/v1/chat/completions", body)
        choices = data.get("choices") or [{}]
        text = str((choices[0].get("message") or {}).get("content", ""))
        return Completion(text, dict(data.get("timings") or {}), wall, data)

    def tokenize(self, content: str, add_special: bool = False, parse_special: bool = False) -> list[int]:
        """POST /tokenize: the model's token ids for `content`."""
        body = {"content": content, "add_special": add_special, "parse_special": parse_special}
        return [int(t) for t in self._json("/tokenize", body)[0]["tokens"]]

    def chat_ids(self, text: str) -> list[int]:
        """The token ids a one-turn chat request of `text` decodes after (its template applied)."""
        templated = self._json("/apply-template", {"messages": [{"role": "user", "content": text}]})[0]["prompt"]
        return self.tokenize(templated, add_special=True, parse_special=True)

    def slot_action(self, slot: int, action: str, filename: str) -> dict:
        """POST /slots/SLOT?action=save|restore: a slot's KV cache and tokens to or from `filename`
        in the server's `--slot-save-path` (a restore takes no decode: the next request with that
        prompt and `cache_prompt` evaluates only its last token)."""
        return self._json(f"/slots/{slot}?action={action}", {"filename": filename})[0]

    def metrics(self) -> str:
        """The Prometheus page (the server runs with --metrics)."""
        return self._call("/metrics").decode("utf-8", errors="replace")

    def props(self) -> dict:
        """/props: the server's settings and build (what a result records)."""
        try:
            return json.loads(self._call("/props"))
        except ValueError:
            return {}
