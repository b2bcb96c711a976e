"""What the Python benchmarks share: a free loopback port, and ending a server.

The scripts in benchmarks/ import it as it is; those in its subfolders put
benchmarks/ on sys.path first (`sys.path.insert(0, <benchmarks/>)`).
"""

import signal
import socket
import subprocess


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on at this moment."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop(server, timeout, sig=signal.SIGINT):
    """Sends `sig` to `server` (a Popen), waits up to `timeout` seconds for it
    to exit, then kills it; returns once it is reaped."""
    server.send_signal(sig)
    try:
        server.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
