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
    # BEGIN SOLUTION
    # context=Context(): the request span is the root of a new trace even when the caller has a span open.
    with tracer.start_as_current_span("request", context=context.Context(), kind=trace.SpanKind.SERVER,
                                      attributes={"request.id": request_id}) as root:
        with tracer.start_as_current_span("tokenize") as span:
            ids = engine.tokenize(prompt)
            span.set_attribute("tokens", len(ids))
        root.set_attribute("prompt.tokens", len(ids))

        # The worker thread has its own (empty) context: hand it ours explicitly.
        ctx = context.get_current()
        queue = tracer.start_span("queue")           # a child of "request": ctx is current here
        future = executor.submit(_generate_traced, engine, ids, max_new_tokens, tracer, ctx, queue)
        out = future.result()                        # a worker's exception is raised again here

        with tracer.start_as_current_span("detokenize") as span:
            span.set_attribute("tokens", len(out))
            text = engine.detokenize(out)
        root.set_attribute("output.tokens", len(out))
        return text
    # STARTER
    # raise NotImplementedError("handle_request_traced: see README.md, section \"Part 4: OpenTelemetry spans\"")
    # END SOLUTION


# BEGIN SOLUTION
def _generate_traced(engine, ids, max_new_tokens, tracer, ctx, queue):
    """request_path.generate on the worker thread, under the request's context."""
    queue.end()                                      # the job left the queue: a worker picked it up
    token = context.attach(ctx)                      # spans started here become children of "request"
    try:
        with tracer.start_as_current_span("prefill") as span:
            span.set_attribute("tokens", len(ids))
            state = engine.prefill(ids)
        with tracer.start_as_current_span("decode") as span:
            span.set_attribute("tokens", max_new_tokens)
            out = []
            for i in range(max_new_tokens):
                tok = engine.decode_step(state)
                out.append(tok)
                # one event per step, stamped when the step is done
                span.add_event("token", {"index": i, "token_id": tok})
        return out
    finally:
        context.detach(token)                        # leave the worker's context as we found it
# END SOLUTION
