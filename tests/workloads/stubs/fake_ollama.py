"""A fake Ollama server for the tests: /api/version, /api/show, /api/generate (streamed).

As a module: FakeOllama(port).start() serves in a thread.
As a program (`fake_ollama.py serve`, installed as `ollama` on PATH): serves on OLLAMA_HOST
and first writes the GPU-related environment it was started with to $FAKE_OLLAMA_ENV_OUT."""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODELS = ("tiny", "tiny:latest")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/api/version":
            return self._json(200, {"version": "0.0.0-fake"})
        self._json(404, {"error": "not found"})

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path == "/api/show":
            if req.get("model") in MODELS:
                return self._json(200, {"details": {"family": "llama"}})
            return self._json(404, {"error": f"model '{req.get('model')}' not found"})
        if self.path == "/api/generate":
            n = req.get("options", {}).get("num_predict", 4)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.end_headers()
            for i in range(n):
                time.sleep(0.002)
                line = {"model": req["model"], "response": f"t{i} ", "done": False}
                self.wfile.write((json.dumps(line) + "\n").encode())
                self.wfile.flush()
            self.wfile.write((json.dumps({"model": req["model"], "response": "", "done": True,
                                          "eval_count": n}) + "\n").encode())
            return
        self._json(404, {"error": "not found"})


class FakeOllama:
    def __init__(self, port=0):
        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]

    def start(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":
    if sys.argv[1:] != ["serve"]:
        sys.exit("usage: ollama serve")
    host = os.environ.get("OLLAMA_HOST", "127.0.0.1:11434").split("://")[-1]
    out = os.environ.get("FAKE_OLLAMA_ENV_OUT")
    if out:
        keys = ("OLLAMA_SCHED_SPREAD", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "OLLAMA_HOST")
        with open(out, "w") as f:
            json.dump({k: os.environ.get(k) for k in keys}, f)
    FakeOllama(int(host.rsplit(":", 1)[1])).server.serve_forever()
