"""Part 4: the request path of request_path.py with OpenTelemetry spans.

Every stage gets a span; the spans of one request form one trace whose root
is the "request" span, even though prefill and decode run on another thread.
The tracer comes from the caller (the grader passes one whose spans land in
an in-memory exporter), so this module never sets a global tracer provider.
"""

from __future__ import annotations

from opentelemetry import context, trace



def handle_request_traced(request_id: str, prompt: str, max_new_tokens: int, engine, executor, tracer) -> str:
    """request_path.handle_request with spans (README.md, Part 4): returns the same text."""
    raise NotImplementedError("handle_request_traced: see README.md, section \"Part 4: OpenTelemetry spans\"")


