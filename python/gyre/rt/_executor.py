"""What runs a gyre.rt task or actor method, in whichever process the runtime places it (the C++
pythonTask and PythonActor call these under the GIL). A call's answer is one status byte and a
pickle: 0 and the value, or 1 and the error (its type, message and traceback, and the exception
itself when it pickles), which get() raises again in the caller."""
import traceback

from . import _serialization
from ._refs import ObjectRef

OK, FAILED, SHARED = b"\x00", b"\x01", b"\x02"


def _answer(value, caller):
    """OK and the value's pickle; or, for a large one and a caller on this host, SHARED and where
    in /dev/shm its buffers are (caller: the caller's host name and pid, from the call)."""
    data = _serialization.dumps_call(value)
    if len(data) < _serialization.SHARED_BYTES or caller is None or caller[0] != _serialization.HOST:
        return OK + data
    return SHARED + _serialization.dumps_call(_serialization.pack_shared(value, caller[1]))


def _resolved(args, kwargs):
    # As Ray: ObjectRefs passed as arguments arrive as their values (nested ones stay references).
    args = [a.value() if isinstance(a, ObjectRef) else a for a in args]
    kwargs = {k: v.value() if isinstance(v, ObjectRef) else v for k, v in kwargs.items()}
    return args, kwargs


def _failure(what, error):
    record = {"what": what, "type": type(error).__name__, "module": type(error).__module__,
              "message": str(error), "traceback": "".join(traceback.format_exception(error))}
    try:
        record["exception"] = _serialization.dumps(error)
    except Exception:  # an exception that does not pickle travels as its text
        pass
    return FAILED + _serialization.dumps(record)


def _name(obj):
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__


def run_task(payload):
    what = "a task"
    try:
        fn, args, kwargs, caller = _serialization.loads(payload)
        what = f"task {_name(fn)}"
        args, kwargs = _resolved(args, kwargs)
        return _answer(fn(*args, **kwargs), caller)
    except BaseException as e:  # noqa: B902 - every failure goes back to the caller
        return _failure(what, e)


def make_actor(payload):
    """(True, the instance) or (False, the error with its traceback)."""
    what = "an actor"
    try:
        cls, args, kwargs, _ = _serialization.loads(payload)
        what = f"actor {_name(cls)}"
        args, kwargs = _resolved(args, kwargs)
        return True, cls(*args, **kwargs)
    except BaseException as e:  # noqa: B902
        return False, f"the constructor of {what} raised {type(e).__name__}: {e}\n" + "".join(
            traceback.format_exception(e))


def call_method(instance, payload):
    what = f"a method of {type(instance).__name__}"
    try:
        name, args, kwargs, caller = _serialization.loads(payload)
        what = f"{type(instance).__name__}.{name}"
        args, kwargs = _resolved(args, kwargs)
        return _answer(getattr(instance, name)(*args, **kwargs), caller)
    except BaseException as e:  # noqa: B902
        return _failure(what, e)


def decode(answer):
    """The value an answer carries; raises the remote error (TaskError, also an instance of the
    error's own type when that can be made)."""
    if answer[:1] == OK:
        return _serialization.loads(answer[1:])
    if answer[:1] == SHARED:
        return _serialization.unpack_shared(*_serialization.loads(answer[1:]))
    record = _serialization.loads(answer[1:])
    raise _task_error(record)


class TaskError(RuntimeError):
    """A gyre.rt task or method raised (Ray's RayTaskError): the message names the call and holds
    the remote traceback; `cause` is the remote exception when it could travel."""

    def __init__(self, message, cause=None, remote_traceback=""):
        super().__init__(message)
        self.cause = cause
        self.remote_traceback = remote_traceback


def _task_error(record):
    message = f"{record['what']} raised {record['type']}: {record['message']}\n\nRemote traceback:\n" \
              f"{record['traceback']}"
    cause = None
    if "exception" in record:
        try:
            cause = _serialization.loads(record["exception"])
        except Exception:
            cause = None
    if cause is not None and isinstance(cause, Exception) and not isinstance(cause, TaskError):
        # As Ray's as_instanceof_cause: `except ValueError` catches a remote ValueError.
        try:
            both = type(f"TaskError({type(cause).__name__})", (TaskError, type(cause)), {})
            error = both.__new__(both)
            TaskError.__init__(error, message, cause, record["traceback"])
            error.args = (message,)
            return error
        except TypeError:  # a type that cannot be combined (a layout conflict)
            pass
    return TaskError(message, cause, record["traceback"])
