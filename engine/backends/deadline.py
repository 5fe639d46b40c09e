"""A deadline for each online attempt of an API request, whole: the HTTP library's timeout bounds
each wait (to connect, for the next bytes), so a server trickling its reply a byte a second held a
run for as long as it liked (15 bytes took 15 s under `timeout_s = 2`, with no retry).

The deadline travels with the request it bounds: `attempt_headers` marks a request as sent (a
header the request hook takes off before anything is sent, into the request's extensions), and
the response hook ends the reply's reading at the deadline with the library's own ReadTimeout, which
the SDK raises as its timeout error (retried, as a timeout is). Requests without the mark (a
provider batch's uploads and downloads, which may be long) have no deadline."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

MARK = "x-litjudge-attempt-deadline"     # never sent: the request hook removes it
DEADLINE = "litjudge_deadline"


def attempt_headers(seconds: float) -> dict[str, str]:
    """The mark of one attempt that must end within `seconds` from now (an SDK call's extra_headers)."""
    return {MARK: repr(time.monotonic() + seconds)}


def hooks(library: Any) -> dict[str, list[Callable[[Any], None]]]:
    """The HTTP client's event hooks (`library`: httpx or its successor) that keep the deadlines."""

    def marked(request: Any) -> None:
        mark = request.headers.pop(MARK, None)
        if mark is not None:
            request.extensions[DEADLINE] = float(mark)

    def bounded(response: Any) -> None:
        deadline = response.request.extensions.get(DEADLINE)
        if deadline is not None:
            response.stream = _bounded_stream(library, response.stream, deadline, response.request)

    return {"request": [marked], "response": [bounded]}


def _bounded_stream(library: Any, stream: Any, deadline: float, request: Any) -> Any:
    class Bounded(library.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            for chunk in stream:
                if time.monotonic() > deadline:
                    raise library.ReadTimeout("the reply was not whole within timeout_s", request=request)
                yield chunk

        def close(self) -> None:
            stream.close()

    return Bounded()
