"""One Python context of the code-interpreter server: an ipykernel running inside this very process.

The kernel is ipykernel's in-process kernel: the same IPython shell, display hooks and Jupyter messages as a kernel
of its own, without the ZeroMQ sockets and the second process between it and the server. The server
(apps/code-interpreter/src/kernels/python-kernel.ts) speaks JSON lines with this process over fd 3, a socket it made:
  in   {"op": "execute", "id": n, "code": str, "env": {"global": {...}, "execution": {...}}}
       {"op": "chdir", "id": n, "cwd": str}   moves the kernel (a spare one) to a context's directory
       the end of input: shut down
  out  {"ev": "ready"} | {"ev": "fatal", "message": str}
       {"ev": "stream", "id": n, "name": "stdout"|"stderr", "text": str}
       {"ev": "result", "id": n, "data": {mime: value}, "main": bool}
       {"ev": "error", "id": n, "name": str, "value": str, "traceback": str}
       {"ev": "count", "id": n, "count": n}
       {"ev": "done", "id": n}            (after "chdir" too, with "problem": str when it failed)
An interrupt is SIGINT to this process: the running cell raises KeyboardInterrupt; between cells it is ignored.
fd 0 is /dev/null. fd 1 and 2 are pipes to the server (it logs them) until the kernel starts; then, as in a kernel
of its own, they lead into the kernel's stdout and stderr streams, so processes the code starts write into the cell.
"""
import codecs
import json
import os
import select
import signal
import socket
import sys
import threading


def clip(text, limit):
    if len(text) <= limit:
        return text
    return text[:limit] + "\n[code-interpreter] %d more characters of this output were dropped\n" % (len(text) - limit)


def finite(value):
    """JSON has no NaN or infinity: they become null (tables from pandas often hold NaN)."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


class Channel:
    """The JSON-lines socket to the server. Writes come from the main thread and from ipykernel's IOPub thread."""

    def __init__(self, fd):
        self.socket = socket.socket(fileno=fd)
        self.socket.set_inheritable(False)  # processes the code starts must not hold the server's channel
        self.lines = self.socket.makefile("rb")
        self.lock = threading.Lock()

    def send(self, message):
        line = (json.dumps(message, ensure_ascii=False, default=str, allow_nan=False) + "\n").encode("utf-8", "surrogatepass")
        with self.lock:
            self.socket.sendall(line)

    def requests(self):
        for line in self.lines:
            try:
                request = json.loads(line)
            except ValueError:
                continue
            if isinstance(request, dict):
                yield request


def fd_stream_class():
    from ipykernel.iostream import OutStream

    class FdStream(OutStream):
        """ipykernel's stream with watchfd, made sturdier and cheaper. What processes started by the code write to
        fd 1/2 goes through a pipe into the stream; ipykernel's watcher stops for good at the first bytes that are
        not UTF-8, and output still in the pipe when a cell ends reaches no cell. Here bytes are decoded with
        replacement (a character split between reads kept whole), every flush (the kernel flushes as a cell ends)
        first takes in what the pipe holds, and a flush with nothing buffered costs nothing."""

        def _setup_stream_redirects(self, name):
            self._drain_lock = threading.Lock()
            self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
            super()._setup_stream_redirects(name)
            os.set_blocking(self._fid, False)

        def _drain(self):
            """Moves what the pipe holds into the stream; False once every writer has closed it."""
            with self._drain_lock:
                while True:
                    try:
                        data = os.read(self._fid, 65536)
                    except BlockingIOError:
                        return True
                    if not data:
                        return False
                    self.write(self._decoder.decode(data))

        def _watch_pipe_fd(self):
            try:
                while self._should_watch:
                    select.select([self._fid], [], [])
                    if not self._drain():
                        break
            except Exception:  # noqa: BLE001 - kept for OutStream.close(), as ipykernel does
                self._exc = sys.exc_info()

        def flush(self):
            if getattr(self, "_fid", None) is not None and self._is_master_process():
                self._drain()
            # ipykernel flushes both streams three times per cell (before a result, as the request ends, before
            # "idle"), each a round trip to the IOPub thread: a third of a cell's time for `1+1`. With nothing
            # buffered there is nothing to wait for: text the IOPub thread already took is sent ahead of anything
            # published after this (it sends in order).
            with self._buffer_lock:
                empty = self._buffer.tell() == 0
            if not empty:
                super().flush()

    return FdStream


class Cell:
    """The execution running now: its id, the Jupyter request it is, and when the kernel went idle after it."""

    def __init__(self):
        self.rid = None
        self.msg_id = None
        self.idle = threading.Event()


def main():
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    cwd = args.get("--cwd", os.path.expanduser("~"))
    setup_file = args.get("--setup")
    max_text = int(args.get("--max-text", "8388608"))
    channel = Channel(3)
    cell = Cell()

    # Between requests an interrupt is dropped; ipykernel puts Python's default handler (KeyboardInterrupt) in place
    # while it handles one. Not SIG_IGN: processes the code starts would inherit that.
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # ipykernel's debugger otherwise warns on every start
    try:
        os.chdir(cwd)
        from ipykernel.inprocess.manager import InProcessKernelManager

        manager = InProcessKernelManager()
        manager.start_kernel()
        kernel = manager.kernel
        # As in a kernel of its own: print() is a stream message of the request running, and whatever processes
        # the code starts write to fd 1 and 2 joins it (watchfd); the streams stay in place between requests, so
        # the kernel's set_parent reaches them (the in-process kernel swaps in streams that never learn the request).
        stream = fd_stream_class()
        kernel.stdout = stream(kernel.session, kernel.iopub_thread, "stdout", watchfd=True)
        kernel.stderr = stream(kernel.session, kernel.iopub_thread, "stderr", watchfd=True)
        sys.stdout, sys.stderr = kernel.stdout, kernel.stderr
        client = manager.client()
        client.start_channels()
        if setup_file:
            with open(setup_file, encoding="utf-8") as handle:
                code = compile(handle.read(), setup_file, "exec")
            exec(code, {"__name__": "_tidepool_setup", "_TIDEPOOL_ASSETS": os.path.dirname(os.path.abspath(setup_file))})
    except Exception as error:  # noqa: BLE001 - anything here means no kernel
        channel.send({"ev": "fatal", "message": "the Python kernel did not start: %s: %s" % (type(error).__name__, error)})
        return 1
    # Imports resolve against the working directory, as in a kernel of its own, not against this file's directory.
    sys.path[0] = ""

    def relay(message):
        """Sends one IOPub message of the running cell on (ipykernel's IOPub thread calls it, in order)."""
        try:
            if message["parent_header"].get("msg_id") != cell.msg_id:
                return
            kind = message["msg_type"]
            content = message["content"]
            rid = cell.rid
            if kind == "stream":
                text = content.get("text")
                if isinstance(text, str):
                    name = "stderr" if content.get("name") == "stderr" else "stdout"
                    channel.send({"ev": "stream", "id": rid, "name": name, "text": clip(text, max_text)})
            elif kind in ("execute_result", "display_data"):
                data = content.get("data")
                if isinstance(data, dict):
                    channel.send({"ev": "result", "id": rid, "data": finite(data), "main": kind == "execute_result"})
            elif kind == "error":
                traceback = content.get("traceback")
                lines = [str(line) for line in traceback] if isinstance(traceback, list) else []
                channel.send({"ev": "error", "id": rid, "name": str(content.get("ename", "Error")), "value": str(content.get("evalue", "")), "traceback": "\n".join(lines)})
            elif kind == "execute_input":
                count = content.get("execution_count")
                if isinstance(count, int):
                    channel.send({"ev": "count", "id": rid, "count": count})
            elif kind == "status" and content.get("execution_state") == "idle":
                cell.idle.set()
        except Exception:  # noqa: BLE001 - a malformed (forged) message is skipped, not fatal
            pass

    client.iopub_channel.call_handlers = relay
    saved_env = {}

    def execute(request):
        env = request.get("env") or {}
        values = env.get("execution") or {}
        saved_env.clear()
        saved_env.update({key: os.environ.get(key) for key in values})
        os.environ.update({str(k): str(v) for k, v in (env.get("global") or {}).items()})
        os.environ.update({str(k): str(v) for k, v in values.items()})
        content = {"code": str(request.get("code", "")), "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}
        message = client.session.msg("execute_request", content)
        cell.rid = request.get("id")
        cell.msg_id = message["header"]["msg_id"]
        cell.idle.clear()
        # What client.execute() does, with the request made here so that its id is known before its messages come.
        client._dispatch_to_kernel(message)
        # The IOPub thread delivers the request's messages after it returns; "idle" is the last of them.
        while not cell.idle.wait(1.0):
            if not kernel.iopub_thread.thread.is_alive():
                break
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        channel.send({"ev": "done", "id": cell.rid})
        cell.msg_id = None

    def chdir(request):
        try:
            os.chdir(str(request.get("cwd")))
            problem = None
        except OSError as error:
            problem = "%s: %s" % (type(error).__name__, error)
        channel.send({"ev": "done", "id": request.get("id"), "problem": problem})

    channel.send({"ev": "ready"})
    for request in channel.requests():
        if request.get("op") == "execute":
            execute(request)
        elif request.get("op") == "chdir":
            chdir(request)
    manager.shutdown_kernel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
