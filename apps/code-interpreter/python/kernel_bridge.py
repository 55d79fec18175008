"""One Python context of the code-interpreter server: starts an ipykernel through jupyter_client and relays it.

The server (apps/code-interpreter/src/kernels/python-kernel.ts) speaks JSON lines with this process:
  stdin   {"op": "execute", "id": n, "code": str, "env": {"global": {...}, "execution": {...}}}
          {"op": "chdir", "id": n, "cwd": str}   moves the kernel (a spare one) to a context's directory
          {"op": "interrupt"}        SIGINT to the kernel (the running cell raises KeyboardInterrupt)
          {"op": "shutdown"}         stop the kernel and exit (so does the end of stdin)
  stdout  {"ev": "ready", "kernel_pid": n} | {"ev": "fatal", "message": str}
          {"ev": "stream", "id": n, "name": "stdout"|"stderr", "text": str}
          {"ev": "result", "id": n, "data": {mime: value}, "main": bool}
          {"ev": "error", "id": n, "name": str, "value": str, "traceback": str}
          {"ev": "count", "id": n, "count": n}
          {"ev": "done", "id": n}            (after "chdir" too, with "problem": str when it failed)
          {"ev": "dead", "id": n|null, "message": str}   the kernel exited; this process exits after it
Nothing else is written to stdout: the protocol has its own descriptor and fd 1 is pointed at stderr.
"""
import json
import os
import queue
import sys
import threading

PROTOCOL = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

WRITE_LOCK = threading.Lock()


def send(message):
    line = json.dumps(message, ensure_ascii=False, default=str, allow_nan=False)
    with WRITE_LOCK:
        PROTOCOL.write(line + "\n")
        PROTOCOL.flush()


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


def main():
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    cwd = args.get("--cwd", os.path.expanduser("~"))
    setup_file = args.get("--setup")
    max_text = int(args.get("--max-text", "8388608"))
    from jupyter_client import KernelManager

    env = dict(os.environ)
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # ipykernel's debugger otherwise warns on every start
    km = KernelManager(kernel_name="python3")
    try:
        km.start_kernel(cwd=cwd, env=env)
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
    except Exception as error:  # noqa: BLE001 - anything here means no kernel
        send({"ev": "fatal", "message": "the Python kernel did not start: %s: %s" % (type(error).__name__, error)})
        try:
            km.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001
            pass
        return 1

    def kernel_dead():
        return not km.is_alive()

    def silent(code):
        """Runs setup code in the kernel without output or history; returns the error text, if any."""
        msg_id = kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        while True:
            try:
                reply = kc.get_shell_msg(timeout=0.5)
            except queue.Empty:
                if kernel_dead():
                    return "the kernel exited"
                continue
            if reply["parent_header"].get("msg_id") != msg_id:
                continue
            content = reply["content"]
            if content.get("status") != "ok":
                return "%s: %s" % (content.get("ename"), content.get("evalue"))
            return None

    if setup_file:
        with open(setup_file, encoding="utf-8") as handle:
            assets = os.path.dirname(os.path.abspath(setup_file))
            problem = silent("_TIDEPOOL_ASSETS = %r\n%s" % (assets, handle.read()))
        if problem:
            send({"ev": "fatal", "message": "the kernel setup failed: %s" % problem})
            km.shutdown_kernel(now=True)
            return 1

    kernel_pid = None
    provisioner = getattr(km, "provisioner", None)
    process = getattr(provisioner, "process", None)
    if process is not None:
        kernel_pid = process.pid
    send({"ev": "ready", "kernel_pid": kernel_pid})

    requests = queue.Queue()

    def read_commands():
        for line in sys.stdin:
            try:
                command = json.loads(line)
            except ValueError:
                continue
            if command.get("op") == "interrupt":
                try:
                    km.interrupt_kernel()
                except Exception as error:  # noqa: BLE001
                    sys.stderr.write("interrupt failed: %s\n" % error)
            else:
                requests.put(command)
        requests.put({"op": "shutdown"})

    threading.Thread(target=read_commands, daemon=True).start()

    def env_call(function, values):
        return "__import__('_tidepool_ci').%s(__import__('json').loads(%r))" % (function, json.dumps(values))

    def relay(rid, kind, content):
        """Sends one iopub message of the running cell on; True when the cell is over (kernel idle)."""
        if kind == "stream":
            text = content.get("text")
            if isinstance(text, str):
                name = "stderr" if content.get("name") == "stderr" else "stdout"
                send({"ev": "stream", "id": rid, "name": name, "text": clip(text, max_text)})
        elif kind in ("execute_result", "display_data"):
            data = content.get("data")
            if isinstance(data, dict):
                send({"ev": "result", "id": rid, "data": finite(data), "main": kind == "execute_result"})
        elif kind == "error":
            traceback = content.get("traceback")
            lines = [str(line) for line in traceback] if isinstance(traceback, list) else []
            send({"ev": "error", "id": rid, "name": str(content.get("ename", "Error")), "value": str(content.get("evalue", "")), "traceback": "\n".join(lines)})
        elif kind == "execute_input":
            count = content.get("execution_count")
            if isinstance(count, int):
                send({"ev": "count", "id": rid, "count": count})
        elif kind == "status" and content.get("execution_state") == "idle":
            return True
        return False

    def execute(request):
        rid = request["id"]
        env = request.get("env") or {}
        if env.get("global"):
            silent(env_call("env_set", env["global"]))
        pushed = bool(env.get("execution"))
        if pushed:
            silent(env_call("env_push", env["execution"]))
        msg_id = kc.execute(request["code"], silent=False, store_history=True, allow_stdin=False, stop_on_error=True)
        while True:
            try:
                message = kc.get_iopub_msg(timeout=0.25)
            except queue.Empty:
                if kernel_dead():
                    send({"ev": "dead", "id": rid, "message": kernel_exit_text()})
                    return False
                continue
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            try:
                if relay(rid, message["msg_type"], message["content"]):
                    break
            except Exception as error:  # noqa: BLE001 - a malformed (forged) message is skipped, not fatal
                sys.stderr.write("skipped a malformed kernel message: %s\n" % error)
        if pushed:
            silent("__import__('_tidepool_ci').env_pop()")
        send({"ev": "done", "id": rid})
        return True

    def kernel_exit_text():
        code = None
        try:
            code = km.provisioner.process.poll() if km.provisioner and km.provisioner.process else None
        except Exception:  # noqa: BLE001
            pass
        if code is None:
            return "the Python kernel exited"
        if code < 0:
            import signal

            try:
                return "the Python kernel was killed by %s" % signal.Signals(-code).name
            except ValueError:
                return "the Python kernel was killed by signal %d" % -code
        return "the Python kernel exited with status %d" % code

    while True:
        try:
            request = requests.get(timeout=1.0)
        except queue.Empty:
            if kernel_dead():
                send({"ev": "dead", "id": None, "message": kernel_exit_text()})
                return 1
            continue
        if request.get("op") == "shutdown":
            break
        if request.get("op") == "execute":
            if not execute(request):
                return 1
        elif request.get("op") == "chdir":
            problem = silent("__import__('os').chdir(%r)" % str(request.get("cwd")))
            send({"ev": "done", "id": request.get("id"), "problem": problem})
    try:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    except Exception:  # noqa: BLE001
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
