"""How gyre.rt moves Python values: functions and classes by cloudpickle when Debian's
python3-cloudpickle is installed (by value, so a function defined in the driver's script reaches
worker processes that never ran it), by pickle otherwise (only what the workers can import).
Values use pickle protocol 5: numpy arrays and CPU tensors travel as out-of-band buffers, which
put() lays into shared memory and a get() on the same host maps read-only, without a copy."""
import io
import mmap
import os
import pickle
import socket
import struct

try:
    import cloudpickle as _pickling
    SERIALIZER = "cloudpickle"
except ImportError:  # pragma: no cover - the project installs python3-cloudpickle
    _pickling = pickle
    SERIALIZER = "pickle"

import torch

_ALIGN = 64  # each buffer starts on a cache line (and so is aligned for any dtype)


def _tensor_from_numpy(array, requires_grad):
    t = torch.from_numpy(array) if array.flags.writeable else _read_only_tensor(array)
    return t.requires_grad_(requires_grad) if requires_grad else t


def _read_only_tensor(array):
    import warnings
    with warnings.catch_warnings():  # torch warns that the array is not writable: it is shared
        warnings.simplefilter("ignore")
        return torch.from_numpy(array)


class _Pickler(_pickling.Pickler):
    def reducer_override(self, obj):
        if type(obj) is torch.Tensor and obj.device.type == "cpu" and obj.layout == torch.strided and \
                not obj.is_quantized and obj.dtype not in (torch.bfloat16, torch.complex32):
            return _tensor_from_numpy, (obj.detach().contiguous().numpy(), obj.requires_grad)
        parent = getattr(super(), "reducer_override", None)
        return parent(obj) if parent is not None else NotImplemented


def dumps(obj, buffer_callback=None):
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffer_callback).dump(obj)
    return out.getvalue()


def dumps_call(obj):
    """A call's bytes: by the C pickler when it can (most arguments: numbers, strings, arrays, gyre's
    own references), else as dumps() does (a lambda among them, a class defined in __main__)."""
    try:
        data = pickle.dumps(obj, protocol=5)
    except Exception:
        return dumps(obj)
    # A class or function of the driver's script pickles by reference to __main__, which is
    # another program in a worker: those go by value.
    return dumps(obj) if b"__main__" in data else data


def loads(data, buffers=()):
    return pickle.loads(data, buffers=buffers)


def pack(obj):
    """`obj` as the parts of one object: a header (the pickle's size, the buffers' count, each
    buffer's offset and size), the pickle, then each out-of-band buffer on a 64-byte boundary. The
    parts are written one after the other (Runtime.put), never joined here."""
    buffers = []
    data = dumps(obj, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    offset = 16 + 16 * len(raws) + len(data)
    parts, places = [None, data], []
    for raw in raws:
        pad = -offset % _ALIGN
        if pad:
            parts.append(bytes(pad))
            offset += pad
        places += [offset, raw.nbytes]
        parts.append(raw)
        offset += raw.nbytes
    parts[0] = struct.pack(f"<QQ{len(places)}Q", len(data), len(raws), *places)
    return parts


def unpack(view):
    """The value of an object packed by pack(), its buffers views of `view` (no copy)."""
    view = memoryview(view).cast("B")
    size, count = struct.unpack_from("<QQ", view, 0)
    places = struct.unpack_from(f"<{2 * count}Q", view, 16)
    start = 16 + 16 * count
    buffers = [view[places[2 * k]:places[2 * k] + places[2 * k + 1]] for k in range(count)]
    return loads(view[start:start + size], buffers=buffers)


# Results: a large one (its pickle over SHARED_BYTES) answered to a caller on this host goes
# through a file of /dev/shm that the caller maps and unlinks at once: its arrays and tensors are
# views of the mapping, read-only, with no copy in the caller (one in the callee, into the file).
SHARED_BYTES = 1 << 20
HOST = socket.gethostname()
_SHM = "/dev/shm"
_counter = [0]


def shared_prefix(pid):
    return f"gyre-rt-py-{pid}-"


def pack_shared(value, caller_pid):
    """`value` into a new file of /dev/shm for process `caller_pid`: (path, pickle, places, size)."""
    buffers = []
    data = dumps(value, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    places, offset = [], 0
    for raw in raws:
        offset += -offset % _ALIGN
        places.append((offset, raw.nbytes))
        offset += raw.nbytes
    size = max(offset, 1)
    _counter[0] += 1
    path = os.path.join(_SHM, f"{shared_prefix(caller_pid)}{os.getpid()}-{_counter[0]}")
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, size)
        with mmap.mmap(fd, size) as m:
            for (start, n), raw in zip(places, raws):
                m[start:start + n] = raw.cast("B")
    except BaseException:
        os.unlink(path)
        raise
    finally:
        os.close(fd)
    return path, data, places, size


def unpack_shared(path, data, places, size):
    """The value pack_shared wrote: the file mapped read-only and unlinked (the mapping stays)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        m = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
        os.unlink(path)
    view = memoryview(m)
    return loads(data, buffers=[view[start:start + n] for start, n in places])


def remove_shared_left(pid):
    """Files of /dev/shm answered to process `pid` and never read (its results it dropped)."""
    prefix = shared_prefix(pid)
    try:
        names = os.listdir(_SHM)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            try:
                os.unlink(os.path.join(_SHM, name))
            except OSError:
                pass
