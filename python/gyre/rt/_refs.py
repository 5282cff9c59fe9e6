"""gyre.rt.ObjectRef: a value put into the object store, or the result of a task or method on its
way. Passed to a task it arrives as its value; pickled (inside a list, say) it stays a reference
that gyre.rt.get resolves wherever it lands."""
from . import _serialization, _state

_VALUE, _ANSWER = b"V", b"A"  # what an object holds: a packed value, or a call's answer
_TAG = 64  # the tag's bytes: the packed buffers after it stay on 64-byte boundaries

# While a call's arguments are pickled: the objects they refer to, which the runtime keeps alive
# until the call has answered (gyre.rt's calls set it; see referenced()).
_referenced = None


def referenced(pickle):
    """pickle() (a call's arguments), and the objects the ObjectRefs in them refer to."""
    global _referenced
    outer, _referenced = _referenced, []
    try:
        data = pickle()
        return data, _referenced
    finally:
        _referenced = outer


class ObjectRef:
    __slots__ = ("_future", "_object", "_id", "_owner", "_what", "_keep", "_shared", "__weakref__")

    def __init__(self, future=None, obj=None, id=None, owner=None, what=None, keep=None):
        self._future = future  # a call's answer on its way (this process's)
        self._what = what      # the call, for errors: "task f", "Counter.add"
        self._keep = keep      # what must live as long as this reference (the call's function)
        self._shared = None    # a result read from /dev/shm (its file is gone): kept for later gets
        self._object = obj     # an object this process put: keeps it alive
        self._id = obj.id if obj is not None else id
        self._owner = obj.owner if obj is not None else owner

    def ready(self):
        return self._future is None or self._future.ready()

    def _answer(self, timeout_ms=-1.0):
        from gyre import _C
        try:
            return self._future.get(timeout_ms)
        except _C.rt.GetTimeoutError as e:
            raise GetTimeoutError(f"gyre.rt.get: {self._what} gave no result within the time-out") from e
        except _C.rt.ActorDiedError:
            raise
        except _C.GyreError as e:  # a lost process, past its retries; a call's own time-out
            from ._executor import TaskError
            raise TaskError(f"{self._what} failed: {e}") from e

    def value(self, timeout=None):
        """The value (gyre.rt.get(ref)); raises the call's error."""
        from ._executor import decode
        timeout_ms = -1.0 if timeout is None else max(0.0, float(timeout) * 1000.0)
        if self._future is not None:
            if self._shared is not None:
                return self._shared[0]
            answer = self._answer(timeout_ms)
            value = decode(answer)
            if answer[:1] == b"\x02":  # mapped from a file now unlinked: the next get reuses it
                self._shared = (value,)
            return value
        view = memoryview(_state.get().get(self._id, self._owner))
        tag = bytes(view[:1])
        if tag == _ANSWER:
            return decode(bytes(view[_TAG:]))
        return _serialization.unpack(view[_TAG:])

    def hex(self):
        return f"{self._owner}:{self._id:x}" if self._id is not None else f"pending:{id(self):x}"

    def __repr__(self):
        return f"ObjectRef({self.hex()})"

    def __reduce__(self):
        if self._id is None:  # a call's answer: put here once it has come, so it can travel
            answer = self._answer()
            if answer[:1] == b"\x02":  # its file is this process's to read once: the value travels
                self._object = put(self.value())._object
            else:
                self._object = _state.get().put([_ANSWER + bytes(_TAG - 1), answer])
            self._id, self._owner = self._object.id, self._object.owner
        if _referenced is not None and self._object is not None:
            _referenced.append(self._object)
        return _remote, (self._id, self._owner)


class GetTimeoutError(TimeoutError):
    """gyre.rt.get(ref, timeout=...) found no result in time; the call goes on (Ray's GetTimeoutError)."""


def _remote(id, owner):
    return ObjectRef(id=id, owner=owner)


def put(value):
    """`value` into the object store (shared memory on this host): numpy arrays and CPU tensors in
    it travel as buffers that a get on this host maps read-only, without a copy."""
    parts = [_VALUE + bytes(_TAG - 1)] + _serialization.pack(value)
    return ObjectRef(obj=_state.get().put(parts))
