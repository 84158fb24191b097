"""The untrusted end of the sandbox: imports the student's modules and answers requests about them.

The trusted side copies this package (`worker/`, with its bytecode) into one private folder and
starts `python -I -S -B -c "...import worker.main...; worker.main.main()" REQ_FD RESP_FD`, that
folder on sys.path for the import only (see `process.launch`), with fd 0 on /dev/null and fds 1
and 2 on a pipe the trusted side drains, so nothing a student prints can reach the two protocol
pipes. The first message on REQ_FD (the init message) says where the student's files are, which
resource limits to take and the course's part of the configuration (`config.SandboxConfig`: the
wire types, the column codecs, the remote functions, as names). Only after applying the limits
does the worker import numpy, and student code runs only inside later requests.

Callbacks: the course-library functions the init message lists as "remote" are replaced, before
any student code runs, by stand-ins that send a `messages.Callback` (seq: the request being
answered) on RESP_FD instead of a reply; the trusted side runs its own copy of the function,
sending requests about the arguments passed by reference meanwhile (answered as usual), then a
`messages.Return`: its value, or the builtin exception it raised. A request that carries "local":
true runs with the stand-ins calling this process's own copies instead (see `Sandbox.library_local`).

Everything here is untrusted once student code has run: the trusted side validates every byte this
process sends, and never imports this module. The wire format is described in `protocol.py`, its
tags and messages named in `messages.py`.

Over 400 lines on purpose: this package runs alone, from a private folder, with only `protocol.py`,
`messages.py`, `landlock.py` and `seccomp.py` beside this file and nothing of the grader's around it, so the worker's whole
side (limits, object table, callbacks, encoding, exception reports) lives here.
"""
from __future__ import annotations

import builtins
import dataclasses
import importlib
import itertools
import operator
import os
import shutil
import sys
import traceback
import types
from typing import Any

from . import landlock, seccomp
from .messages import (
    DTYPE_OBJECT,
    DTYPE_TYPE,
    NEXT,
    RESET,
    RETURN,
    Callback,
    ExceptionReport,
    Failure,
    Init,
    Reply,
    Request,
    Return,
    Started,
    Tag,
    header,
    read,
)
from .protocol import (
    ECHO_KEPT_BYTES,
    MAX_CALLBACK_DEPTH,
    MAX_DEPTH,
    MAX_INT_BITS,
    MAX_JSON_BYTES,
    MAX_MESSAGE_BYTES,
    NUMERIC_KINDS,
    TEXT_LIMIT,
    array_form,
    int_column,
    load_array,
    numeric_dtypes,
    receive,
    send,
)


# The plain scalars' tags, by their exact type.
_SCALAR_TAGS = {bool: Tag.BOOL, int: Tag.INT, float: Tag.FLOAT, str: Tag.STR}
_SCALARS = frozenset(_SCALAR_TAGS.values())


class UnsupportedValue(TypeError):
    """A result that cannot cross by value and must not cross by reference (an object array)."""


# Reported under this module name so students see "sandbox.UnsupportedValue", not a worker path.
UnsupportedValue.__module__ = "sandbox"


def apply_limits(limits: dict[str, int]) -> None:
    """Take the resource limits before any student code runs (never raising a hard limit we lack)."""
    import resource

    # The hard CPU limit sits one second above the soft one: SIGXCPU first, SIGKILL if it is ignored.
    wanted = {
        "RLIMIT_CPU": (limits["cpu_seconds"], limits["cpu_seconds"] + 1),
        "RLIMIT_AS": (limits["memory_bytes"], limits["memory_bytes"]),
        "RLIMIT_NPROC": (limits["max_processes"], limits["max_processes"]),
        "RLIMIT_FSIZE": (limits["file_bytes"], limits["file_bytes"]),
        "RLIMIT_CORE": (0, 0),
    }
    for name, (soft, hard) in wanted.items():
        which = getattr(resource, name)
        _, current_hard = resource.getrlimit(which)
        if current_hard != resource.RLIM_INFINITY:
            hard = min(hard, current_hard)
        resource.setrlimit(which, (min(soft, hard), hard))


def volunteer_for_oom() -> None:
    """oom_score_adj 1000: when memory runs out (Gradescope's 768 MB container, a memory cgroup), the
    kernel's OOM killer takes this process first, not the grader (which then reports it as died)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


def forbid_new_privileges() -> None:
    """PR_SET_NO_NEW_PRIVS: a setuid program exec'd by student code gains nothing (bwrap sets it too)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)


def safe_str(value: object) -> str:
    """str(value), or a placeholder when the student's __str__ fails."""
    try:
        return str(value)[:TEXT_LIMIT]
    except BaseException:
        return f"<str() of a {type(value).__name__} failed>"


class Worker:
    """The object table and the request loop."""

    def __init__(self, req_fd: int, resp_fd: int, init: Init) -> None:
        import numpy

        self.np = numpy
        self.scalar_types = set(numpy.sctypeDict.values())
        self.req_fd, self.resp_fd = req_fd, resp_fd
        self.home = init.home
        # Frames in these folders are the student's or the course library's; all others are ours.
        self.shown_roots = tuple(os.path.join(p, "") for p in (init.home, *init.lib_dirs))
        self.table: dict[int, Any] = {}
        self.numbers: dict[int, int] = {}  # id(object) -> its number, so one object has one number
        # What the trusted side sent with a number, until the next reset: id(object) -> (the object,
        # kept alive, what it held as it arrived, its number): for an array a copy of it, for a dict
        # its items, for a wire-type value its fields' values. Sent back unchanged, they cross as
        # the number.
        self.echoes: dict[int, tuple[Any, Any, int]] = {}
        self.echo_bytes = 0
        self.next_number = 1
        self.current_seq = init.seq  # the request being answered (the innermost one)
        self.callback_depth = 0
        self.local_depth = 0  # requests being answered that asked for the library run here
        self.wire_types = frozenset(init.wire_types)
        self.codecs = {codec["type"]: codec for codec in init.codecs}
        self.ops = {
            "getattr": getattr,
            "setattr": setattr,
            "call": lambda function, *args, **kwargs: function(*args, **kwargs),
            # obj.name(...) in one round trip: the attribute is looked up now, at the call.
            "callmethod": lambda obj, name, *args, **kwargs: getattr(obj, name)(*args, **kwargs),
            "len": len,
            "contains": lambda container, item: item in container,
            "getitem": operator.getitem,
            "setitem": operator.setitem,
            # An item of an attribute, written in place (a pool's K array): see Proxy.__assign_into__.
            "assign_into": lambda obj, attribute, index, values: operator.setitem(
                getattr(obj, attribute), index, values),
            "iter": iter,
            # str.__str__ turns a str subclass from a student __repr__ into a plain str (by value).
            "repr": lambda obj: str.__str__(repr(obj)),
            "str": lambda obj: str.__str__(str(obj)),
            "bool": bool,
            # numpy's conversion of a student object, done here (within the call's time limit): the
            # trusted side would otherwise walk it item by item, one round trip each.
            "array": numpy.asarray,
        }

    def serve(self) -> None:
        """Answer requests until the trusted side closes the request pipe."""
        while True:
            message = receive(self.req_fd)
            if message is None:
                return
            self.serve_one(*message)

    def serve_one(self, received: dict[str, Any], blobs: list[memoryview]) -> None:
        """Answer one request and send the reply."""
        request = read(Request, received)
        outer = self.current_seq
        self.current_seq = request.seq
        local = request.local is True
        self.local_depth += local
        try:
            reply, out = self.answer(request, blobs)
        finally:
            self.current_seq = outer
            self.local_depth -= local
        self.flush_output()
        send(self.resp_fd, header(reply), out)

    @staticmethod
    def flush_output() -> None:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:  # student output must reach the pipe before the next message does
                stream.flush()
            except BaseException:
                pass

    def install_remote(self, names: list[str], lib_dirs: list[str]) -> None:
        """Replace each course-library function "module:name" by a stand-in that runs it in the
        trusted process: in its module, and in every loaded module of the course library that
        imported it by name. Done before any student code runs.

        What the trusted process computes (and counts) cannot be changed by student
        code, whatever it does to this process's copy of the library.
        """
        roots = tuple(os.path.join(p, "") for p in lib_dirs)
        for qualname in names:
            module_name, name = qualname.split(":")
            original = getattr(importlib.import_module(module_name), name)
            stand_in = self.remote_function(qualname, original)
            for module in list(sys.modules.values()):
                if not str(getattr(module, "__file__", None) or "").startswith(roots):
                    continue
                for key, value in list(vars(module).items()):
                    if value is original:
                        setattr(module, key, stand_in)

    def remote_function(self, qualname: str, original: Any) -> Any:
        def stand_in(*args: Any, **kwargs: Any) -> Any:
            if self.local_depth:
                return original(*args, **kwargs)
            return self.callback(qualname, args, kwargs)

        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(stand_in, attribute, getattr(original, attribute, None))
        return stand_in

    def callback(self, qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Ask the trusted process to run `qualname`; serve its requests (about the objects passed
        by reference) until it sends the result back."""
        if self.callback_depth >= MAX_CALLBACK_DEPTH:
            raise RecursionError(f"{qualname} called from inside itself more than {MAX_CALLBACK_DEPTH} deep")
        out: list[Any] = []
        message = Callback(
            seq=self.current_seq, callback=qualname,
            args=[self.encode(arg, out, 0) for arg in args],
            kwargs=[[str(key), self.encode(value, out, 0)] for key, value in kwargs.items()],
        )
        if sum(map(len, out)) > MAX_MESSAGE_BYTES - MAX_JSON_BYTES:
            raise UnsupportedValue(f"the arguments of {qualname} are larger than {MAX_MESSAGE_BYTES >> 20} MB")
        self.flush_output()
        send(self.resp_fd, header(message), out)
        self.callback_depth += 1
        try:
            while True:
                received = receive(self.req_fd)
                if received is None:  # the trusted side is gone
                    os._exit(0)
                message_in, blobs = received
                if message_in.get("op") != RETURN:
                    self.serve_one(message_in, blobs)  # a request about an object passed by reference
                    continue
                returned = read(Return, message_in)
                if returned.ok:
                    return self.decode(returned.value, blobs)
                error = read(Failure, returned.error)
                cls = getattr(builtins, str(error.type), None)
                if not (isinstance(cls, type) and issubclass(cls, Exception)):
                    cls = RuntimeError
                try:
                    exc = cls(str(error.message))
                except Exception:
                    exc = RuntimeError(str(error.message))
                raise exc
        finally:
            self.callback_depth -= 1

    def answer(self, request: Request, blobs: list[memoryview]) -> tuple[Reply, list[Any]]:
        """Run one request; student exceptions of any kind become an error reply."""
        reply = Reply(seq=request.seq, ok=True)
        out: list[Any] = []
        try:
            op = request.op
            if op == RESET:
                self.table.clear()
                self.numbers.clear()
                self.echoes.clear()
                self.echo_bytes = 0
                return reply, out
            target = self.decode(request.target, blobs)
            args = [self.decode(arg, blobs) for arg in request.args]
            kwargs = {key: self.decode(value, blobs) for key, value in request.kwargs}
            blobs.clear()  # the request's buffer is freed before the student's code runs
            if op == NEXT:
                try:
                    result = next(target)
                except StopIteration:
                    return reply._replace(stop=True), out
            else:
                result = self.ops[op](target, *args, **kwargs)
            if op == "getattr" and self.is_class_method(target, args[0], result):
                reply = reply._replace(method=True)
            elif op == "getattr" and type(target) is types.ModuleType \
                    and isinstance(result, (types.FunctionType, type)):
                reply = reply._replace(named=True)
            reply = reply._replace(value=self.encode(result, out, 0))
            if sum(map(len, out)) > MAX_MESSAGE_BYTES - MAX_JSON_BYTES:
                raise UnsupportedValue(f"the result is larger than {MAX_MESSAGE_BYTES >> 20} MB")
            return reply, out
        except BaseException as exc:
            try:
                return Reply(seq=request.seq, ok=False, error=header(self.describe(exc))), []
            except BaseException:  # e.g. a student exception class with a broken __module__
                return Reply(seq=request.seq, ok=False, internal="could not describe an exception"), []

    @staticmethod
    def is_class_method(obj: Any, name: str, value: Any) -> bool:
        """Whether obj.name gave a method of obj's class, bound to obj, that no attribute of obj's
        own shadows: the trusted side may then call obj.name(...) in one round trip next time (see
        Sandbox._request). Only an optimisation: a wrong answer costs the student's test, not more."""
        if type(value) is not types.MethodType or value.__self__ is not obj:
            return False
        try:
            own = object.__getattribute__(obj, "__dict__")
        except AttributeError:
            own = {}
        return type(own) is dict and name not in own

    def decode(self, tree: list[Any], blobs: list[memoryview]) -> Any:
        """A value from the trusted side."""
        tag = tree[0]
        if tag == Tag.NONE:
            return None
        if tag in _SCALARS:
            return tree[1]
        if tag == Tag.BYTES:
            return bytes(blobs[tree[1]])
        if tag == Tag.LIST or tag == Tag.TUPLE:
            items = [self.decode(item, blobs) for item in tree[1]]
            return items if tag == Tag.LIST else tuple(items)
        if tag == Tag.DICT:
            items = {key: self.decode(value, blobs) for key, value in tree[1]}
            if len(tree) == 3:
                self.echoes[id(items)] = (items, tuple(items.items()), tree[2])
            return items
        if tag == Tag.DTYPE:
            dtype = self.np.dtype(tree[1])
            return dtype if tree[2] == DTYPE_OBJECT else dtype.type
        if tag == Tag.ARRAY or tag == Tag.SCALAR:
            array = load_array(self.np, blobs[tree[1]], tree[2:5])
            if len(tree) == 6 and self.echo_bytes + array.nbytes <= ECHO_KEPT_BYTES:
                self.echoes[id(array)] = (array, array.copy(), tree[5])
                self.echo_bytes += array.nbytes
            return array if tag == Tag.ARRAY else array[()]
        if tag == Tag.WIRE_TYPE:
            value = self.wire_type(tree[1])(**{field: self.decode(item, blobs) for field, item in tree[2]})
            if len(tree) == 4:
                self.echoes[id(value)] = (value, self.fields(value), tree[3])
            return value
        if tag == Tag.INT_LIST:
            return load_array(self.np, blobs[tree[1]], tree[2:5]).tolist()
        if tag == Tag.COLUMNS:
            items = self.columns(tree[1], [load_array(self.np, blobs[column[0]], column[1:]) for column in tree[3:]])
            return items if tree[2] == Tag.LIST else tuple(items)
        if tag == Tag.REFERENCE:
            return self.table[tree[1]]
        if tag == Tag.MODULE:
            return importlib.import_module(tree[1])
        if tag == Tag.NAMED:
            module, path = tree[1].split(":")
            obj = importlib.import_module(module)
            for name in path.split("."):
                obj = getattr(obj, name)
            return obj
        raise ValueError(f"unknown tag {tag!r}")

    def wire_type(self, name: str) -> type:
        """The class of the configured wire type "module:Class", imported here on first use."""
        if name not in self.wire_types:
            raise ValueError(f"{name} is not a wire type")
        module, cls_name = name.split(":")
        return getattr(importlib.import_module(module), cls_name)

    def columns(self, name: str, arrays: list[Any]) -> list[Any]:
        """The items a column codec sent: scalar columns one array each, ragged ones two (lengths,
        then all values), in the order of the codec's `scalars` then `ragged`."""
        codec = self.codecs[name]
        fields: dict[str, list[Any]] = {}
        position = 0
        for field, _ in codec["scalars"]:
            fields[field] = arrays[position].tolist()
            position += 1
        for field, _ in codec["ragged"]:
            lengths, values = arrays[position].tolist(), arrays[position + 1].tolist()
            position += 2
            ends = list(itertools.accumulate(lengths))
            fields[field] = [tuple(values[end - n:end]) for n, end in zip(lengths, ends)]
        cls = self.wire_type(name)
        names = list(fields)
        return [cls(**dict(zip(names, values))) for values in zip(*fields.values())]

    def encode(self, value: Any, blobs: list[Any], depth: int) -> list[Any]:
        """A value for the trusted side: plain data by value, everything else by reference."""
        np = self.np
        kind = type(value)
        if value is None:
            return [Tag.NONE]
        # Exact types only: a subclass (an IntEnum, a str with a custom __eq__) keeps its behaviour
        # by staying in the worker as a reference.
        if kind is int and value.bit_length() > MAX_INT_BITS:
            raise UnsupportedValue(f"cannot return an int of more than {MAX_INT_BITS} bits")
        if kind in (bool, int, float, str):
            return [_SCALAR_TAGS[kind], value]
        if kind is bytes:
            blobs.append(value)
            return [Tag.BYTES, len(blobs) - 1]
        if isinstance(value, (np.ndarray, np.generic)):
            echo = self.echoes.get(id(value))
            if echo is not None and echo[0] is value and self.unchanged(value, echo[1]):
                return [Tag.ECHO, echo[2]]
            array = np.asarray(value)  # an ndarray subclass crosses as a plain ndarray
            if array.dtype.str not in numeric_dtypes(np):  # a structured or object dtype has a "|V"/"|O" name
                raise UnsupportedValue(
                    f"cannot return a numpy {'array' if isinstance(value, np.ndarray) else 'scalar'} "
                    f"of dtype {array.dtype}: only numeric and bool arrays cross the sandbox"
                )
            form, blob = array_form(np, array)
            blobs.append(blob)
            return [Tag.ARRAY if isinstance(value, np.ndarray) else Tag.SCALAR, len(blobs) - 1, *form]
        dtype = self.numeric_dtype(value)
        if dtype is not None:
            return [Tag.DTYPE, dtype.str, DTYPE_OBJECT if isinstance(value, np.dtype) else DTYPE_TYPE]
        if depth < MAX_DEPTH:
            echo = self.echoes.get(id(value))
            if echo is not None and echo[0] is value and self.still_holds(value, echo[1]):
                return [Tag.ECHO, echo[2]]
            column = int_column(np, value)
            if column is not None:
                form, blob = array_form(np, column)
                blobs.append(blob)
                return [Tag.INT_LIST, len(blobs) - 1, *form]
            if kind in (list, tuple):
                return [Tag.LIST if kind is list else Tag.TUPLE, [self.encode(item, blobs, depth + 1) for item in value]]
            if kind is dict and all(type(key) is str for key in value):
                return [Tag.DICT, [[key, self.encode(item, blobs, depth + 1)] for key, item in value.items()]]
            for name in self.wire_types:
                module, cls_name = name.split(":")
                if kind is getattr(sys.modules.get(module), cls_name, None):
                    fields = [f.name for f in dataclasses.fields(value) if f.init]
                    pairs = [[f, self.encode(getattr(value, f), blobs, depth + 1)] for f in fields]
                    return [Tag.WIRE_TYPE, name, pairs]
        if isinstance(value, type) and issubclass(value, BaseException):
            return [Tag.EXCEPTION_CLASS, str(value.__module__), str(value.__qualname__), self.lineage(value)]
        return [Tag.REFERENCE, self.number(value), f"{safe_str(kind.__module__)}.{safe_str(kind.__qualname__)}"[:200]]

    def still_holds(self, value: Any, arrived: tuple[Any, ...]) -> bool:
        """Whether a numbered dict (or wire-type value) holds what it held as it arrived: the same
        keys in the same order (the same fields), the very same objects, and its arrays unchanged."""
        now = tuple(value.items()) if type(value) is dict else self.fields(value)
        if len(now) != len(arrived) or not all(a[0] is b[0] and a[1] is b[1] for a, b in zip(now, arrived)):
            return False
        for item in (value.values() if type(value) is dict else ()):
            echo = self.echoes.get(id(item))
            if echo is None or echo[0] is not item or not self.unchanged(item, echo[1]):
                return False
        return True

    @staticmethod
    def fields(value: Any) -> tuple[tuple[str, Any], ...]:
        """A wire-type value's init fields, (name, object) in order."""
        return tuple((f.name, getattr(value, f.name)) for f in dataclasses.fields(value) if f.init)

    def unchanged(self, array: Any, arrived: Any) -> bool:
        """Whether `array` still holds, byte for byte, in the same layout, what arrived."""
        if (array.dtype != arrived.dtype or array.shape != arrived.shape or array.strides != arrived.strides
                or not array.flags.c_contiguous):
            return False
        bytes_of = self.np.uint8
        return bool(self.np.array_equal(array.reshape(-1).view(bytes_of), arrived.reshape(-1).view(bytes_of)))

    def numeric_dtype(self, value: Any) -> Any:
        """The dtype of a numeric np.dtype or concrete numpy scalar type (np.float32), else None."""
        np = self.np
        if isinstance(value, np.dtype):
            dtype = value
        elif isinstance(value, type) and value in self.scalar_types:  # not abstract ones (np.floating)
            dtype = np.dtype(value)
        else:
            return None
        return dtype if dtype.kind in NUMERIC_KINDS and dtype.fields is None else None

    def number(self, obj: Any) -> int:
        """obj's number in the object table (kept alive there until the next reset)."""
        number = self.numbers.get(id(obj))
        if number is None:
            number = self.next_number
            self.next_number += 1
            self.numbers[id(obj)] = number
            self.table[number] = obj
        return number

    @staticmethod
    def lineage(cls: type) -> list[list[str]]:
        """The MRO as [module, qualname] pairs."""
        return [[str(c.__module__), str(c.__qualname__)] for c in cls.__mro__]

    def describe(self, exc: BaseException) -> ExceptionReport:
        """Type, MRO, message and traceback text (student and course-library frames only)."""
        cls = type(exc)
        report = traceback.TracebackException(cls, exc, exc.__traceback__, compact=True)
        self.keep_shown_frames(report, set())
        text = self.relative("".join(report.format()))
        if report.stack:
            frame = report.stack[-1]
            where = f"{frame.filename}, line {frame.lineno}, in {frame.name}"
        elif isinstance(exc, SyntaxError):
            where = f"{exc.filename}, line {exc.lineno}"
        else:
            where = ""
        return ExceptionReport(
            module=str(cls.__module__),
            qualname=str(cls.__qualname__),
            mro=self.lineage(cls),
            message=safe_str(exc),
            traceback=text[-TEXT_LIMIT:],
            where=self.relative(where),
        )

    def relative(self, text: str) -> str:
        """`text` with the shown folders' paths cut (`prefix_cache.py`, `kvlab/model.py`): the
        sandbox's folders have names of their own at each grading, which a message must not carry."""
        for root in self.shown_roots:
            text = text.replace(root, "")
        return text

    def keep_shown_frames(self, report: traceback.TracebackException | None, seen: set[int]) -> None:
        """Drop the worker's and the standard library's frames from report and its chained causes."""
        if report is None or id(report) in seen:
            return
        seen.add(id(report))
        shown = [frame for frame in report.stack if frame.filename.startswith(self.shown_roots)]
        report.stack = traceback.StackSummary.from_list(shown)
        self.keep_shown_frames(report.__cause__, seen)
        self.keep_shown_frames(report.__context__, seen)


def seed_home(seed: str, home: str) -> None:
    """Copy the student's files from the grader's read-only copy into this worker's own empty home
    (contents only: home itself may belong to another user, as bubblewrap's tmpfs does)."""
    for folder, dirs, files in os.walk(seed):
        target = os.path.join(home, os.path.relpath(folder, seed))
        for name in dirs:
            os.mkdir(os.path.join(target, name))
        for name in files:
            shutil.copyfile(os.path.join(folder, name), os.path.join(target, name))


def main() -> None:
    """Take the init message, lock the process down, then serve."""
    req_fd, resp_fd = int(sys.argv[1]), int(sys.argv[2])
    message = receive(req_fd)
    if message is None:
        return
    init = read(Init, message[0])
    apply_limits(init.limits)
    volunteer_for_oom()
    forbid_new_privileges()
    unfiltered = seccomp.install()
    # The sandbox's folder, which holds this package.
    placed = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    confined = landlock.restrict(
        [init.seed, *init.lib_dirs, *init.site_packages, placed,
         sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable)), *sys.path],
        [init.home]) if init.landlock else "turned off by the grader"
    if not isinstance(confined, str):
        os.environ["TMPDIR"] = init.home  # tempfile's /tmp is out of reach: its own folder instead
    seed_home(init.seed, init.home)
    # sys.path: the student's folder, the course library, this interpreter's standard library (all
    # that -I -S leaves) and the grader's site-packages (for numpy), whose .pth files are not run.
    sys.path[:] = [init.home, *init.lib_dirs, *sys.path, *init.site_packages]
    worker = Worker(req_fd, resp_fd, init)
    worker.install_remote(init.remote, init.lib_dirs)
    send(resp_fd, header(Started(seq=init.seq, ok=True, pid=os.getpid(), numpy=worker.np.__version__,
                                 unfiltered=unfiltered, landlock=confined)), [])
    worker.serve()
