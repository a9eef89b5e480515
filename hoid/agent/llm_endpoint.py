"""One OpenAI-compatible endpoint, as the LLM proposers talk to it: the real `openai` client, bounded.

Every call has a deadline (the caller's: what is left of the conversation and of the run), retries rate
limits (429), server errors (5xx), dropped connections and timeouts with exponential backoff inside that
deadline, and turns every other failure (a 4xx, a body that is not JSON, an answer without choices) into
`CallFailed` with a reason in words. Nothing here raises anything else, and nothing sleeps past the
deadline: a stalled server costs at most the time the caller allowed.

Secrets: the key goes to the client and nowhere else. Every text that comes back from the server (which
could echo the Authorization header it received) and every reason written from an error passes through
`Redactor`, so neither the key nor an authorization header reaches the journal, the report or a log.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass

_HEADER = re.compile(r"(?i)\b(authorization|proxy-authorization|api[-_]?key|x-api-key)\b(\s*[\"']?\s*[:=]\s*[\"']?)"
                     r"[^\s\"',}]+(\s+[^\s\"',}]+)?")
_BEARER = re.compile(r"(?i)\bbearer\s+[^\s\"',}]+")
_KEYLIKE = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")


class Redactor:
    """Replaces the key, authorization headers, bearer tokens and sk-... keys in text with [redacted]."""

    def __init__(self, key: str | None):
        self.key = key or None

    def __call__(self, text) -> str:
        text = "" if text is None else str(text)
        if self.key and len(self.key) >= 4:
            text = text.replace(self.key, "[redacted]")
        text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}[redacted]", text)
        text = _BEARER.sub("Bearer [redacted]", text)
        return _KEYLIKE.sub("[redacted]", text)


class CallFailed(Exception):
    """A call that produced no usable answer: `reason` (redacted words), `transient` (worth retrying)."""

    def __init__(self, reason: str, *, transient: bool = False, retry_after: float | None = None):
        super().__init__(reason)
        self.reason, self.transient, self.retry_after = reason, transient, retry_after


@dataclass
class Answer:
    """One chat completion, read defensively: `message` (the first choice's, or None), `finish` (its
    finish_reason), `tokens` (usage's total, else an estimate from the text's length), `retries` (failed
    calls before this one, each with its reason)."""

    message: object
    finish: str | None
    tokens: int
    retries: list[str]


class Endpoint:
    """base_url, api_key: arguments, else `OPENAI_BASE_URL`, `OPENAI_API_KEY` (a local server such as vLLM
    or llama.cpp needs none: a placeholder is sent). timeout: seconds per request at most; retries: extra
    attempts per call on transient failures; backoff: the first wait (doubled each time, capped by the
    deadline and by `max_wait`)."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0, retries: int = 3, backoff: float = 1.0, max_wait: float = 20.0):
        if not model:
            raise ValueError("an OpenAI-compatible agent needs a model: agent='openai:<model>', e.g. openai:gpt-4.1")
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY") or None
        self._key = key
        self.redact = Redactor(key)
        self.timeout, self.retries, self.backoff, self.max_wait = timeout, retries, backoff, max_wait
        self._client = None

    def __repr__(self) -> str:  # never the key
        return f"Endpoint(model={self.model!r}, base_url={self.base_url!r})"

    def client(self):
        if self._client is None:
            if self._key is None and self.base_url is None:
                raise CallFailed("no endpoint: set OPENAI_API_KEY (for api.openai.com) or OPENAI_BASE_URL (for "
                                 "any OpenAI-compatible server), or pass api_key= / base_url=")
            import openai

            # our own retries (bounded by the caller's deadline), not the client's
            self._client = openai.OpenAI(api_key=self._key or "not-needed", base_url=self.base_url,
                                         timeout=self.timeout, max_retries=0)
        return self._client

    def chat(self, messages: list, *, tools: list | None, deadline: float, max_tokens: int | None = None) -> Answer:
        """One completion before `deadline` (a `time.monotonic()` reading), with retries; raises CallFailed."""
        retries: list[str] = []
        wait = self.backoff
        for attempt in range(self.retries + 1):
            left = deadline - time.monotonic()
            if left < 0.2:
                raise CallFailed("no time left for a request" + (f" (after {'; '.join(retries)})" if retries else ""))
            try:
                return self._once(messages, tools, min(self.timeout, left), max_tokens, retries)
            except CallFailed as e:
                if not e.transient or attempt == self.retries:
                    if retries:
                        e.reason = f"{e.reason} (after {len(retries)} retries: {'; '.join(retries)})"
                    raise
                retries.append(e.reason)
                pause = min(e.retry_after if e.retry_after is not None else wait, self.max_wait,
                            max(0.0, deadline - time.monotonic() - 0.2))
                time.sleep(pause)
                wait *= 2
        raise AssertionError("unreachable")

    def _once(self, messages, tools, timeout: float, max_tokens, retries) -> Answer:
        import openai

        kwargs = {"model": self.model, "messages": messages, "timeout": timeout}
        if tools:
            kwargs.update(tools=tools, tool_choice="auto")
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        try:
            response = self.client().chat.completions.create(**kwargs)
        except openai.APITimeoutError:
            raise CallFailed(f"timed out after {timeout:.1f} s", transient=True) from None
        except openai.APIConnectionError as e:
            raise CallFailed(f"connection failed: {self.redact(e)}", transient=True) from None
        except openai.APIStatusError as e:
            code = e.status_code
            body = self.redact(getattr(e.response, "text", "") or e.message)[:300]
            after = _retry_after(e.response)
            if code == 429:
                raise CallFailed(f"HTTP 429 (rate limited): {body}", transient=True, retry_after=after) from None
            if code >= 500:
                raise CallFailed(f"HTTP {code} (server error): {body}", transient=True, retry_after=after) from None
            raise CallFailed(f"HTTP {code}: {body}") from None
        except openai.APIResponseValidationError as e:
            raise CallFailed(f"the body is not a chat completion: {self.redact(e)[:300]}") from None
        except (ValueError, TypeError, KeyError, AttributeError) as e:  # a JSON decode error is a ValueError
            raise CallFailed(f"the body is not JSON: {type(e).__name__}: {self.redact(e)[:200]}") from None
        if isinstance(response, (str, bytes)):  # the client hands back a body that is not JSON as text
            raise CallFailed(f"the body is not JSON: {self.redact(response[:200])!r}")
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise CallFailed(f"the answer has no choices: {self.redact(repr(response))[:200]}")
        choice = choices[0]
        message = getattr(choice, "message", None)
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "total_tokens", None)
        if not isinstance(tokens, int) or tokens < 0:  # a server without usage: about 4 characters a token
            tokens = (sum(len(str(m.get("content") or "")) for m in messages if isinstance(m, dict))
                      + len(str(getattr(message, "content", "") or ""))) // 4
        return Answer(message, getattr(choice, "finish_reason", None), tokens, list(retries))


def _retry_after(response) -> float | None:
    try:
        value = float(response.headers.get("retry-after"))
    except (AttributeError, TypeError, ValueError):
        return None
    return value if value >= 0 else None
