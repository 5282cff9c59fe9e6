"""Ray Tune's search-space helpers, as gyre tune's --param specs (docs/tune.md)."""
import math

__all__ = ["uniform", "loguniform", "quniform", "randint", "choice", "grid_search"]


class Domain:
    """One hyperparameter's distribution: its gyre tune spec, and how a trial reads its value back
    from the text gyre tune puts in the trial's command."""

    def __init__(self, spec, parse):
        self.spec, self._parse = spec, parse

    def value(self, text):
        return self._parse(text)

    def __repr__(self):
        return f"Domain({self.spec})"


def _number(x, what):
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"gyre.tune.{what}: bounds must be finite numbers, not {x!r}")
    return x


def uniform(lower, upper):
    return Domain(f"uniform:{_number(lower, 'uniform')!r}:{_number(upper, 'uniform')!r}", float)


def loguniform(lower, upper):
    if not (_number(lower, "loguniform") > 0 and _number(upper, "loguniform") > lower):
        raise ValueError(f"gyre.tune.loguniform: needs 0 < lower < upper, not {lower!r}, {upper!r}")
    return Domain(f"loguniform:{lower!r}:{upper!r}", float)


def quniform(lower, upper, q):
    return Domain(f"quniform:{_number(lower, 'quniform')!r}:{_number(upper, 'quniform')!r}:{_number(q, 'quniform')!r}",
                  float)


def randint(lower, upper):
    """An int in [lower, upper), as Ray's."""
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (lower, upper)):
        raise ValueError("gyre.tune.randint: bounds must be ints")
    return Domain(f"randint:{lower}:{upper}", lambda t: int(float(t)))


def _listed(kind, values):
    values = list(values)
    if not values:
        raise ValueError(f"gyre.tune.{kind}: needs at least one value")
    texts = [_text(v, kind) for v in values]
    if len(set(texts)) != len(texts):
        raise ValueError(f"gyre.tune.{kind}: values must differ ({values!r})")
    by_text = dict(zip(texts, values))

    def parse(text):
        if text in by_text:
            return by_text[text]
        for t, v in by_text.items():  # a number gyre tune wrote in its own form (1e-3 as 0.001)
            try:
                if isinstance(v, (int, float)) and not isinstance(v, bool) and float(t) == float(text):
                    return v
            except ValueError:
                pass
        raise ValueError(f"gyre.tune: {text!r} is not one of {values!r}")
    return Domain(f"{'grid' if kind == 'grid_search' else 'choice'}:{','.join(texts)}", parse)


def _text(v, kind):
    if isinstance(v, bool) or v is None:
        t = str(v)
    elif isinstance(v, (int, float, str)):
        t = repr(v) if isinstance(v, float) else str(v)
    else:
        raise ValueError(f"gyre.tune.{kind}: values must be numbers, strings, booleans or None, not {type(v).__name__}")
    if "," in t or "{" in t or "}" in t or not t.strip():
        raise ValueError(f"gyre.tune.{kind}: {v!r} cannot be a value (commas and braces are the spec's)")
    return t


def choice(categories):
    return _listed("choice", categories)


def grid_search(values):
    """Every value, each with every combination of the other grids (times num_samples), as Ray's."""
    return _listed("grid_search", values)
