"""A stand-in for an engine server in lifecycle tests: answers /health on --port and keeps a child
process in its process group, like vLLM's engine core. --exit-with-port-error exits as a server
whose port was taken; --ignore-term ignores SIGTERM (the kill must escalate to SIGKILL).

It also serves as a fake *engine* (tests/engines/test_fake_engine.py registers it as one registry
entry): /v1/models, /v1/completions with token-id prompts (each prompt gets `max_tokens` zeros),
Prometheus counters under `fake:spec_decode_` (a chain of depth --depth: per prompt, 2 verify
steps accepting 2 and 1 drafts), and one log line per prompt, "FAKE spec: accepted 3 of 8
drafted, tau 2.50, per-pos 1.00,0.50,0.00,0.00"."""
import argparse
import http.server
import json
import signal
import subprocess
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--exit-with-port-error", action="store_true")
ap.add_argument("--ignore-term", action="store_true")
ap.add_argument("--delay", type=float, default=0.5)
ap.add_argument("--depth", type=int, default=4)
a = ap.parse_args()
if a.exit_with_port_error:
    print(f"ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', {a.port}): "
          "address already in use", flush=True)
    sys.exit(1)
if a.ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                          + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if a.ignore_term else "")
                          + "time.sleep(600)"])
if not a.ignore_term:        # like vLLM: on SIGTERM, shut the children down, then exit
    signal.signal(signal.SIGTERM, lambda *_: (child.terminate(), sys.exit(0)))
time.sleep(a.delay)

COUNTS = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "generated": 0, "per_pos": [0] * a.depth}
LOCK = threading.Lock()
PER_PROMPT = [2, 1] + [0] * (a.depth - 2)          # 2 steps: position 0 accepted twice, 1 once


def metrics() -> str:
    c = COUNTS
    lines = [f"fake:spec_decode_num_drafts_total {c['drafts']}",
             f"fake:spec_decode_num_draft_tokens_total {c['draft_tokens']}",
             f"fake:spec_decode_num_accepted_tokens_total {c['accepted']}",
             f"fake:generation_tokens_total {c['generated']}"]
    lines += [f'fake:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}'
              for i, v in enumerate(c["per_pos"])]
    return "\n".join(lines) + "\n"


class H(http.server.BaseHTTPRequestHandler):
    def _send(self, code: int, body: str = "", kind: str = "application/json"):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self._send(200)
        elif self.path == "/metrics":
            with LOCK:
                self._send(200, metrics(), "text/plain")
        elif self.path == "/v1/models":
            self._send(200, json.dumps({"data": [{"id": "fake"}]}))
        else:
            self._send(404)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompts, n = body["prompt"], int(body["max_tokens"])
        with LOCK:
            for _ in prompts:
                COUNTS["drafts"] += 2
                COUNTS["draft_tokens"] += 2 * a.depth
                COUNTS["accepted"] += sum(PER_PROMPT)
                COUNTS["generated"] += n
                COUNTS["per_pos"] = [x + y for x, y in zip(COUNTS["per_pos"], PER_PROMPT)]
                per = ",".join(f"{x / 2:.2f}" for x in PER_PROMPT)
                print(f"FAKE spec: accepted {sum(PER_PROMPT)} of {2 * a.depth} drafted, tau "
                      f"{1 + sum(PER_PROMPT) / 2:.2f}, per-pos {per}", flush=True)
        self._send(200, json.dumps({"choices": [{"index": i, "token_ids": [0] * n}
                                                for i in range(len(prompts))]}))

    def log_message(self, *args):
        pass


print("fake engine up", flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", a.port), H).serve_forever()
