"""A local stand-in for arXiv's export API, Crossref and DataCite, serving the recorded-format responses of
tests/fixtures_papers (tests/test_research_fetch.py, tests/test_readme_runs.py)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

FIXTURES = Path(__file__).parent / "fixtures_papers"


class Registry:
    """What the fake registries answer: `routes[key]` is a list of replies,
    used in turn (the last one repeats). Keys: "arxiv:<id_list>",
    "crossref:<doi>", "datacite:<doi>". A reply is (status, headers, body) or
    a callable taking the handler (for slow or dripping answers)."""

    def __init__(self) -> None:
        self.routes: dict[str, list] = {}
        self.requests: list[tuple[str, dict]] = []

    def serve(self, key: str, *replies) -> None:
        self.routes[key] = list(replies)

    def count(self, prefix: str = "") -> int:
        return sum(1 for key, _ in self.requests if key.startswith(prefix))

    def reply_for(self, key: str):
        replies = self.routes.get(key)
        if not replies:
            return 404, {"Content-Type": "application/json"}, b'{"status":"error","message":"not found"}'
        return replies.pop(0) if len(replies) > 1 else replies[0]


def fixture(name: str, status: int = 200, content_type: str = "application/atom+xml; charset=utf-8"):
    return status, {"Content-Type": content_type}, (FIXTURES / name).read_bytes()


def serve_registry(monkeypatch):
    """Start the server, point ROADMAP_*_API at it; (registry, stop)."""
    reg = Registry()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep pytest's output clean
            pass

        def do_GET(self):
            parts = urlsplit(self.path)
            if parts.path == "/arxiv/api/query":
                key = "arxiv:" + parse_qs(parts.query).get("id_list", [""])[0]
            elif parts.path.startswith("/crossref/works/"):
                key = "crossref:" + unquote(parts.path[len("/crossref/works/") :])
            elif parts.path.startswith("/datacite/dois/"):
                key = "datacite:" + unquote(parts.path[len("/datacite/dois/") :])
            else:
                key = "other:" + parts.path
            reg.requests.append((key, dict(self.headers)))
            reply = reg.reply_for(key)
            if callable(reply):
                reply(self)
                return
            status, headers, body = reply
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("ROADMAP_ARXIV_API", f"{base}/arxiv/api/query")
    monkeypatch.setenv("ROADMAP_CROSSREF_API", f"{base}/crossref")
    monkeypatch.setenv("ROADMAP_DATACITE_API", f"{base}/datacite")

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return reg, stop


def serve_docs_papers(monkeypatch):
    """The papers the guides log by id, answered from the fixtures."""
    reg, stop = serve_registry(monkeypatch)
    reg.serve("arxiv:2307.08691", fixture("arxiv-2307.08691.xml"))
    reg.serve("arxiv:2307.08691v2", fixture("arxiv-2307.08691.xml"))
    reg.serve("arxiv:hep-th/9711200", fixture("arxiv-hep-th-9711200.xml"))
    reg.serve("arxiv:hep-th/9711200v3", fixture("arxiv-hep-th-9711200.xml"))
    reg.serve(
        "crossref:10.1145/3600006.3613165",
        fixture("crossref-10.1145-3600006.3613165.json", content_type="application/json"),
    )
    return reg, stop
