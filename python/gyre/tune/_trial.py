"""One run of a gyre.tune trial: `python3 -m gyre.tune._trial TRAINABLE.pkl --NAME VALUE ...`, the
command gyre.tune.Tuner gives gyre tune. Builds the trial's config (the searched values, read back
into their Python types, and the space's constants) and calls the trainable; a dict it returns is
reported as a last result."""
import sys

from gyre.rt import _serialization

from . import _report
from ._space import Domain


def main(argv):
    with open(argv[0], "rb") as f:
        saved = _serialization.loads(f.read())
    space, values = saved["space"], dict(zip(argv[1::2], argv[2::2]))
    config = {}
    for name, spec in space.items():
        config[name] = spec.value(values["--" + name]) if isinstance(spec, Domain) else spec
    returned = saved["trainable"](config)
    if isinstance(returned, dict) and returned:
        _report.report(returned)


if __name__ == "__main__":
    main(sys.argv[1:])
