"""A stand-in for an engine server in lifecycle tests: answers /health on --port and keeps a child
process in its process group, like vLLM's engine core. --exit-with-port-error exits as a server
whose port was taken; --ignore-term ignores SIGTERM (the kill must escalate to SIGKILL)."""
import argparse
import http.server
import signal
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--exit-with-port-error", action="store_true")
ap.add_argument("--ignore-term", action="store_true")
ap.add_argument("--delay", type=float, default=0.5)
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


class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


print("fake engine up", flush=True)
http.server.HTTPServer(("127.0.0.1", a.port), H).serve_forever()
