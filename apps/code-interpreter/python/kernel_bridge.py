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
fd 0 is /dev/null. fd 1 and 2 are pipes to the server (it logs them) until the kernel starts; then they lead into
the cell's stdout and stderr, so processes the code starts write into the cell.

Nothing waits on another thread while a cell runs: the kernel's messages are relayed by the thread that publishes
them (ipykernel's IOPub thread is stopped; with it stopped ipykernel sends in the calling thread), and print() goes
to CellOutput below, sent at once when the kernel flushes (before every result and as a cell ends) and otherwise
within FLUSH_SECONDS by a thread of its own.
"""
import codecs
import io
import json
import os
import select
import signal
import socket
import sys
import threading
import time

# What a running cell produced reaches the server within this long at the latest (ipykernel's streams wait 0.2 s).
FLUSH_SECONDS = 0.05
# Output buffered beyond this is sent by the writer itself (bounded memory; the writer then waits for the server).
FLUSH_BYTES = 65536


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
    """The JSON-lines socket to the server. Lines are queued and written together by flush(): a cell's events leave
    in one write as it ends (one wake-up of the server instead of one per event), or within FLUSH_SECONDS while it
    runs (Flusher). Lines are written whole and in order, and an interrupt that comes while the main thread writes
    is handled once the write is done, never in the middle of a line (Python runs signal handlers between the parts
    of a long write)."""

    def __init__(self, fd):
        self.socket = socket.socket(fileno=fd)
        self.socket.set_inheritable(False)  # processes the code starts must not hold the server's channel
        self.lines = self.socket.makefile("rb")
        self.queued = []
        self.queued_bytes = 0
        self.lock = threading.Lock()  # the queue
        self.writing = threading.Lock()  # held from taking the queue until it is written: writes do not overtake
        self.forked = False
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self):
        """A process forked by the code shares the socket: it never writes to it (its prints go through fd 1/2)."""
        self.forked = True
        self.queued, self.queued_bytes = [], 0

    def send(self, message):
        """Queues a line (written at once when the queue is full)."""
        if self.forked:
            return
        line = (json.dumps(message, ensure_ascii=False, default=str, allow_nan=False) + "\n").encode("utf-8", "surrogatepass")
        with self.lock:
            self.queued.append(line)
            self.queued_bytes += len(line)
            full = self.queued_bytes >= FLUSH_BYTES
        if full:
            self.flush()

    def send_now(self, message):
        self.send(message)
        self.flush()

    def flush(self):
        with self.writing:
            with self.lock:
                if not self.queued:
                    return
                data = b"".join(self.queued)
                self.queued, self.queued_bytes = [], 0
            if threading.current_thread() is not threading.main_thread():
                self.socket.sendall(data)
                return
            deferred = []
            handler = signal.signal(signal.SIGINT, lambda signum, frame: deferred.append(frame))
            try:
                self.socket.sendall(data)
            finally:
                signal.signal(signal.SIGINT, signal.SIG_DFL if handler is None else handler)
            if deferred and callable(handler):
                handler(signal.SIGINT, deferred[0])

    def next_request(self):
        """The next request (malformed lines are skipped); None at the end of input."""
        while True:
            line = self.lines.readline()
            if not line:
                return None
            try:
                request = json.loads(line)
            except ValueError:
                continue
            if isinstance(request, dict):
                return request


class CellOutput:
    """stdout and stderr of the running cell, in the order they were written, whoever wrote them: print(),
    threads, and (through the pipes on fd 1 and 2) processes the code starts. Text written while no cell runs is
    dropped. In a process forked by the code, writes go to fd 1/2, back through the pipe."""

    def __init__(self, channel, max_text):
        self.channel = channel
        self.max_text = max_text
        self.rid = None
        self.pipes = []
        self._reset()
        os.register_at_fork(after_in_child=self._forked)

    def _reset(self):
        self.pending = []  # [name, text], consecutive writes to one stream merged
        self.size = 0
        self.lock = threading.Lock()
        self.sending = threading.Lock()  # held from taking the buffer until it is queued: flushes do not overtake
        self.forked = False

    def _forked(self):
        self._reset()
        self.forked = True

    def write(self, name, text):
        if self.forked:
            os.write(1 if name == "stdout" else 2, text.encode("utf-8", "replace"))
            return
        with self.lock:
            if self.rid is None:
                return
            if self.pending and self.pending[-1][0] == name:
                self.pending[-1][1] += text
            else:
                self.pending.append([name, text])
            self.size += len(text)
            full = self.size >= FLUSH_BYTES
        if full:
            self._queue()

    def flush(self):
        """Queues what was written so far on the channel, taking in what the pipes hold first; True if there was
        anything."""
        if self.forked:
            return False
        for pipe in self.pipes:
            pipe.drain()
        return self._queue()

    def _queue(self):
        with self.sending:
            with self.lock:
                pending, self.pending, self.size = self.pending, [], 0
                rid = self.rid
            if rid is None:
                return False
            for name, text in pending:
                self.channel.send({"ev": "stream", "id": rid, "name": name, "text": clip(text, self.max_text)})
            return bool(pending)


class Flusher:
    """While a cell runs, sends what it produced every FLUSH_SECONDS. Woken once per cell, as it starts (not per
    output): a short cell ends before its first round, and its output leaves with its end."""

    def __init__(self, channel, output):
        self.channel = channel
        self.output = output
        self.running = False
        self.wake = threading.Condition()
        threading.Thread(target=self._run, name="tidepool-flush", daemon=True).start()

    def cell_started(self):
        with self.wake:
            self.running = True
            self.wake.notify()

    def cell_ended(self):
        self.running = False

    def _run(self):
        while True:
            with self.wake:
                while not self.running:
                    self.wake.wait()
            time.sleep(FLUSH_SECONDS)
            try:
                self.output.flush()
                self.channel.flush()
            except Exception:  # noqa: BLE001 - a broken channel ends the process through the main thread
                return


class TextStream(io.TextIOBase):
    """sys.stdout or sys.stderr: a text stream writing into CellOutput."""

    def __init__(self, output, name, fd):
        super().__init__()
        self.output = output
        self.name = name
        self.fd = fd

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        if text:
            self.output.write(self.name, text)
        return len(text)

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "replace"

    def flush(self):
        # ipykernel flushes before every result and as a cell ends: only text makes that a write to the server.
        if self.output.flush():
            self.output.channel.flush()

    def fileno(self):
        return self.fd

    def isatty(self):
        return False

    def readable(self):
        return False

    def writable(self):
        return True

    def seekable(self):
        return False

    def close(self):
        """Kept open: the cell's output has nowhere else to go (as in ipykernel)."""


class FdPipe:
    """fd 1 or 2 of this process as a pipe read into CellOutput: what processes started by the code write there
    joins the cell. Bytes that are not UTF-8 are replaced (a character split between reads kept whole)."""

    def __init__(self, output, name, fd):
        self.output = output
        self.name = name
        self.lock = threading.Lock()
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.read_fd, write_fd = os.pipe()
        os.dup2(write_fd, fd)
        os.close(write_fd)
        os.set_inheritable(self.read_fd, False)
        os.set_blocking(self.read_fd, False)
        threading.Thread(target=self._watch, name="tidepool-" + name, daemon=True).start()

    def drain(self):
        """Moves what the pipe holds into the cell's output; False once every writer has closed it."""
        with self.lock:
            while True:
                try:
                    data = os.read(self.read_fd, 65536)
                except BlockingIOError:
                    return True
                if not data:
                    return False
                text = self.decoder.decode(data)
                if text:
                    self.output.write(self.name, text)

    def _watch(self):
        while True:
            select.select([self.read_fd], [], [])
            if not self.drain():
                return


class IOPubRelay:
    """Where ipykernel's IOPub thread sends the kernel's messages: with that thread stopped, ipykernel hands each
    message here in the thread that publishes it, as the frames of the Jupyter wire format (identities, the
    delimiter, the signature, header, parent header, metadata, content, buffers). They are read as plain JSON: the
    in-process client would turn them back into messages through traitlets events and jupyter_client's
    deserializer, which parses both dates of every message with dateutil, most of a `1+1` cell's time."""

    DELIMITER = b"<IDS|MSG>"

    def __init__(self, relay):
        self.relay = relay
        self.received = 0

    def send_multipart(self, frames, *args, **kwargs):
        self.received += 1
        frames = [bytes(frame) for frame in frames]
        start = frames.index(self.DELIMITER) + 2
        header, parent, _metadata, content = (json.loads(frame) for frame in frames[start:start + 4])
        self.relay({"msg_type": header.get("msg_type"), "parent_header": parent, "content": content})

    def close(self):
        pass


class Cell:
    """The execution running now: its id, and the msg_id of its Jupyter request once the kernel announced it."""

    def __init__(self):
        self.rid = None
        self.msg_id = None


def ignore_interrupt(signum, frame):
    """SIGINT between cells. Not SIG_IGN: processes the code starts would inherit that."""


def main():
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    cwd = args.get("--cwd", os.path.expanduser("~"))
    setup_file = args.get("--setup")
    max_text = int(args.get("--max-text", "8388608"))
    channel = Channel(3)
    cell = Cell()

    # Between requests an interrupt is dropped; ipykernel puts Python's default handler (KeyboardInterrupt) in place
    # while it handles one.
    signal.signal(signal.SIGINT, ignore_interrupt)
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # ipykernel's debugger otherwise warns on every start
    try:
        os.chdir(cwd)
        from ipykernel.inprocess.manager import InProcessKernelManager
        from traitlets.config import Config

        config = Config(
            {
                # No history database: a context lives as long as its sandbox, and In/Out/%history work from memory.
                # Its writer thread woke after every cell, and a `1+1` cell took 11 ms instead of 0.5 with it.
                "HistoryManager": {"enabled": False},
                # ipykernel sleeps this long before each reply to let its stream threads catch up; the streams here
                # are flushed before the reply, in this thread.
                "Kernel": {"_execute_sleep": 0.0},
            }
        )
        manager = InProcessKernelManager(config=config)
        manager.start_kernel()
        kernel = manager.kernel
        # Messages are relayed by the thread that publishes them: with its IOPub thread stopped, ipykernel sends in
        # the calling thread (as in a forked process), so no cell waits for a thread switch.
        kernel.iopub_thread.stop()
        output = CellOutput(channel, max_text)
        output.pipes = [FdPipe(output, "stdout", 1), FdPipe(output, "stderr", 2)]
        kernel.stdout = TextStream(output, "stdout", 1)
        kernel.stderr = TextStream(output, "stderr", 2)
        sys.stdout, sys.stderr = kernel.stdout, kernel.stderr
        client = manager.client()
        client.start_channels()
        if setup_file:
            with open(setup_file, encoding="utf-8") as handle:
                code = compile(handle.read(), setup_file, "exec")
            exec(code, {"__name__": "_tidepool_setup", "_TIDEPOOL_ASSETS": os.path.dirname(os.path.abspath(setup_file))})
    except Exception as error:  # noqa: BLE001 - anything here means no kernel
        channel.send_now({"ev": "fatal", "message": "the Python kernel did not start: %s: %s" % (type(error).__name__, error)})
        return 1
    # Imports resolve against the working directory, as in a kernel of its own, not against this file's directory.
    sys.path[0] = ""

    def relay(message):
        """Sends one IOPub message of the running cell on (in the thread that published it)."""
        try:
            parent = message["parent_header"]
            kind = message["msg_type"]
            content = message["content"]
            if cell.msg_id is None:
                # The kernel announces a request with "busy" before anything else of it; only the kernel sends
                # status messages, so a thread of an earlier cell that publishes now is not taken for this one.
                if cell.rid is not None and kind == "status" and content.get("execution_state") == "busy" and parent.get("msg_type") == "execute_request":
                    cell.msg_id = parent.get("msg_id")
                return
            if parent.get("msg_id") != cell.msg_id:
                return
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
        except Exception:  # noqa: BLE001 - a malformed (forged) message is skipped, not fatal
            pass

    iopub = kernel.iopub_thread.socket = IOPubRelay(relay)
    flusher = Flusher(channel, output)
    client.iopub_channel.call_handlers = relay
    # The replies are not needed (the iopub messages say it all); the blocking client would queue them forever.
    client.shell_channel.call_handlers = lambda message: None
    # A first cell costs more than the next ones (imports on first use in ipykernel and IPython, cold formatters):
    # paid here, before "ready", where a pooled sandbox waits anyway. No output, no history, no execution count.
    try:
        client.execute("None", silent=True, store_history=False, user_expressions={}, allow_stdin=False)
        kernel.shell.display_formatter.format(0)
    except Exception as error:  # noqa: BLE001 - the kernel cannot run code
        channel.send_now({"ev": "fatal", "message": "the Python kernel cannot run code: %s: %s" % (type(error).__name__, error)})
        return 1
    # The relay depends on how ipykernel (6.x, Debian bookworm's in the template) sends with its IOPub thread
    # stopped: a kernel that sends its messages some other way would run cells whose output never arrives.
    if iopub.received == 0:
        channel.send_now({"ev": "fatal", "message": "this ipykernel did not hand its messages to the relay (kernel_bridge.py supports ipykernel 6)"})
        return 1
    saved_env = {}

    def execute(request):
        env = request.get("env") or {}
        values = env.get("execution") or {}
        saved_env.clear()
        saved_env.update({key: os.environ.get(key) for key in values})
        os.environ.update({str(k): str(v) for k, v in (env.get("global") or {}).items()})
        os.environ.update({str(k): str(v) for k, v in values.items()})
        cell.rid = output.rid = request.get("id")
        cell.msg_id = None
        flusher.cell_started()
        try:
            # Runs the cell to its end in this thread; its messages have been relayed when it returns.
            client.execute(str(request.get("code", "")), silent=False, store_history=True, user_expressions={}, allow_stdin=False)
        except KeyboardInterrupt:
            pass  # an interrupt that came as the cell ended, after its code: nothing of the cell is lost
        finally:
            signal.signal(signal.SIGINT, ignore_interrupt)
        finish()

    def finish():
        flusher.cell_ended()
        output.flush()
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        rid = cell.rid
        output.rid = cell.rid = cell.msg_id = None
        channel.send_now({"ev": "done", "id": rid})

    def chdir(request):
        try:
            os.chdir(str(request.get("cwd")))
            problem = None
        except OSError as error:
            problem = "%s: %s" % (type(error).__name__, error)
        channel.send_now({"ev": "done", "id": request.get("id"), "problem": problem})

    channel.send_now({"ev": "ready"})
    while True:
        try:
            request = channel.next_request()
            if request is None:
                break
            if request.get("op") == "execute":
                execute(request)
            elif request.get("op") == "chdir":
                chdir(request)
        except KeyboardInterrupt:
            # A second interrupt in the moment between an interrupted cell and the handler back in place.
            signal.signal(signal.SIGINT, ignore_interrupt)
            if cell.rid is not None:
                finish()
    manager.shutdown_kernel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
