"""``jst.settings``: every per-case option in one declaration, and the frozen object that carries them.

:data:`OPTIONS` is the one place an option is written down: its name, default, validation, docstring,
ini key and the entry points that take it. Everything else derives from it: the ``stabilize``
marker's accepted arguments and its ``pytest --markers`` line, the ``jaxstab`` fixture's and
``jst.check``'s keyword arguments, ``jst.improve``'s, and the ``--jaxstab-*`` options and
``jaxstab_*`` ini keys. A new option is one :class:`Option` entry.

Values are resolved once per case, in this order (each layer overrides the one before)::

    declared defaults < ini keys < profile < command line < marker < call (jst.check / jaxstab.check)

A profile is a named :class:`settings` (``settings.register_profile("ci", max_examples=1000)``),
chosen by ``--jaxstab-profile=NAME`` or the ``jaxstab_profile`` ini key; outside pytest,
``settings.load_profile(name)`` makes it the default of ``jst.check``.

This module imports only the standard library and ``_errors`` (the plugin imports it at start-up).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from ._errors import SettingsError

__all__ = ["CASE", "OPTIONS", "Option", "options", "settings"]

#: The entry points an option can reach: the marker, the fixture's ``check``, ``jst.check``,
#: ``jst.improve``, and the ini key with its ``--jaxstab-*`` command-line option.
ENTRY_POINTS = ("marker", "fixture", "check", "improve", "ini")
#: Where an option goes unless it says otherwise: every case entry point and the ini key.
CASE = frozenset({"marker", "fixture", "check", "ini"})


class Invalid(ValueError):
    """A value an option does not take; the message says what is expected (``"an integer >= 1"``)."""


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _count(minimum: int) -> tuple[Callable[[Any], Any], Callable[[str], Any]]:
    expected = f"an integer >= {minimum}"

    def validate(value: Any) -> Any:
        if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) < minimum:
            raise Invalid(expected)
        return int(value)

    def parse(text: str) -> Any:
        try:
            number = int(text)
        except ValueError:
            raise Invalid("an integer") from None
        return validate(number)

    return validate, parse


def _real(value: Any) -> bool:
    """A real number (Python's, NumPy's), not a bool."""
    return not isinstance(value, (bool, str, bytes)) and (isinstance(value, (int, float))
                                                          or hasattr(value, "__float__"))


def _as_float(value: Any) -> float:
    return float(value)


def _optional_int(expected: str = "an integer >= 0, or None") -> tuple[Callable[[Any], Any],
                                                                      Callable[[str], Any]]:
    def validate(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) < 0:
            raise Invalid(expected)
        return int(value)

    def parse(text: str) -> Any:
        if text.lower() == "none":
            return None
        try:
            number = int(text)
        except ValueError:
            raise Invalid("an integer") from None
        if number < 0:
            raise Invalid("an integer >= 0")
        return number

    return validate, parse


def _number(*, optional: bool) -> tuple[Callable[[Any], Any], Callable[[str], Any]]:
    expected = "a number >= 0" + (", or None" if optional else "")

    def validate(value: Any) -> Any:
        if value is None and optional:
            return None
        if not _real(value):
            raise Invalid(expected)
        number = _as_float(value)
        if not number >= 0:
            raise Invalid(expected)
        return number

    def parse(text: str) -> Any:
        if optional and text.lower() == "none":
            return None
        try:
            return validate(float(text))
        except ValueError:
            raise Invalid(expected) from None

    return validate, parse


def _budget(example: str) -> tuple[Callable[[Any], Any], Callable[[str], Any]]:
    """A positive limit; ``None`` or ``inf`` (``none`` in an ini file) lifts it."""
    expected = f"a number > 0 (e.g. {example}), or None for no limit"

    def validate(value: Any) -> Any:
        if value is None:
            return None
        if not _real(value):
            raise Invalid(expected)
        number = _as_float(value)
        if not number > 0:
            raise Invalid(expected)
        return None if number == math.inf else number

    def parse(text: str) -> Any:
        if text.lower() == "none":
            return None
        try:
            number = float(text)
        except ValueError:
            number = -1.0
        if not number > 0 or number == math.inf:
            raise Invalid(f"a number > 0 (e.g. {example}), or none for no limit")
        return number

    return validate, parse


def _seconds() -> tuple[Callable[[Any], Any], Callable[[str], Any]]:
    """A number of seconds > 0 (a limit that must hold: no None)."""
    expected = "a number of seconds > 0"

    def validate(value: Any) -> Any:
        if not _real(value):
            raise Invalid(expected)
        number = _as_float(value)
        if not 0 < number < math.inf:
            raise Invalid(expected)
        return number

    def parse(text: str) -> Any:
        try:
            return validate(float(text))
        except ValueError:
            raise Invalid(expected) from None

    return validate, parse


def _flag() -> tuple[Callable[[Any], Any], Callable[[str], Any]]:
    def validate(value: Any) -> Any:
        if not isinstance(value, bool):
            raise Invalid("True or False")
        return value

    def parse(text: str) -> Any:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise Invalid("true or false")

    return validate, parse


def _choice(*choices: str) -> tuple[Callable[[Any], Any], Callable[[str], Any]]:
    def validate(value: Any) -> Any:
        if value not in choices:
            raise Invalid(" or ".join(repr(c) for c in choices))
        return value

    def parse(text: str) -> Any:
        if text not in choices:
            raise Invalid(" or ".join(choices))
        return text

    return validate, parse


def _rules() -> tuple[Callable[[Any], Any], Callable[[str], Any]]:
    """None, a name, or rules and names; the names are resolved when a case is built."""

    def validate(value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
            return tuple(value)  # pyright: ignore[reportUnknownArgumentType]
        raise Invalid("None, a rule name, or a list of jst.rewrites.Rule objects and rule names")

    def parse(text: str) -> Any:
        return tuple(text.split()) or None

    return validate, parse


@dataclasses.dataclass(frozen=True)
class Option:
    """One per-case option: everything the entry points need to know about it.

    Attributes:
        name: the keyword (``max_examples``), also the :class:`settings` attribute.
        default: its value when no layer sets it.
        doc: what it does, one sentence (shown by ``pytest --markers``, ``--help`` and the ini list).
        validate: the value checked and normalised; raises :class:`Invalid` saying what is expected.
        parse: the value from an ini key or the command line (text); raises :class:`Invalid`.
        where: the entry points that take it (:data:`ENTRY_POINTS`).
        ini: its ini key, default ``jaxstab_<name>``; the command-line option is the same with dashes
            (``--jaxstab-<name>``). Only when ``"ini"`` is in ``where``.
        cli: argparse keywords replacing the default form of the command-line option (True/False
            options get ``--jaxstab-X`` / ``--no-jaxstab-X``, others take a value).
        metavar: how ``--help`` shows the command-line option's value (default ``VALUE``).
    """

    name: str
    default: Any
    doc: str
    validate: Callable[[Any], Any]
    parse: Callable[[str], Any]
    where: frozenset[str] = CASE
    ini: str | None = None
    cli: Mapping[str, Any] | None = None
    metavar: str = "VALUE"

    @property
    def ini_key(self) -> str | None:
        if "ini" not in self.where:
            return None
        return self.ini or f"jaxstab_{self.name}"

    @property
    def flag(self) -> str | None:
        """The command-line option (``--jaxstab-examples``), or None."""
        key = self.ini_key
        return None if key is None else "--" + key.replace("_", "-")

    def check(self, value: Any, source: str | None = None) -> Any:
        """``value`` validated; a :class:`SettingsError` naming ``source`` (default the name)."""
        try:
            return self.validate(value)
        except Invalid as exc:
            raise SettingsError(f"{source or self.name}={value!r}: expected {exc}") from None


def _option(name: str, default: Any, doc: str, kind: tuple[Callable[[Any], Any], Callable[[str], Any]],
            **kw: Any) -> Option:
    return Option(name, default, doc, kind[0], kind[1], **kw)


#: Every per-case option. Order is the order of ``pytest --markers`` and of the generated signatures.
OPTIONS: tuple[Option, ...] = (
    _option("max_examples", 100, "inputs drawn per case (and per search of jst.improve)", _count(1),
            where=CASE | {"improve"}, ini="jaxstab_examples", metavar="N"),
    _option("seed", None, "fixed seed: reproducible draws, no example database", _optional_int(),
            where=CASE | {"improve"}, metavar="N"),
    _option("tolerance_bits", 8.0, "the judged variant fails above this error, in bits (or on any overflow)",
            _number(optional=False), metavar="BITS"),
    _option("atol", None, "absolute differences at most atol count 0 bits (overflows count)",
            _number(optional=True), where=CASE - {"ini"}),
    _option("rules", None, "rewrite rules or rule names (None: the catalogue jst.rewrites.STABILITY)",
            _rules(), where=CASE - {"ini"}),
    _option("apply", False, "judge jst.stabilize(fn), for code that ships the rewritten function", _flag(),
            where=CASE - {"ini"}),
    _option("grad", False, "also judge the gradient (jax.grad; a VJP with ones for non-scalar outputs)",
            _flag(), where=CASE - {"ini"}),
    _option("judge", "stability", "the verdict's lens: 'stability' (error beyond what the problem's "
            "conditioning explains) or 'accuracy' (forward error, as Herbie)",
            _choice("stability", "accuracy"), metavar="stability|accuracy"),
    _option("oracle_budget", 1e7, "largest estimated cost of the exact oracle per case, in scalar operations "
            "(elements x equations x examples; a program the oracle's fast path covers counts a fifteenth); "
            "above it the case fails at once. None: no limit",
            _budget("1e8"), metavar="N|none"),
    _option("time_budget", 300.0, "seconds of drawing per case, after which the case is judged on the "
            "inputs drawn so far (a CheckWarning says so). None: no limit", _budget("60"),
            metavar="SECONDS|none"),
    _option("timing", False, "time both jitted variants on every JAX backend present", _flag()),
    _option("search", True, "when a case fails and the catalogue does not fix it, show the program "
            "jst.improve finds (time-limited) in the failure message", _flag(),
            where=frozenset({"marker", "fixture", "ini"}),
            cli={"nargs": "?", "const": "on", "choices": ("on", "off")}),
    _option("tune_precision", False, "on a bfloat16/float16 case, also find which lines must stay float32 "
            "(jst.tune_precision): the plan goes into the failure message, the JSON and HTML reports and "
            "the baseline, whose gate fails on a new line that must stay float32", _flag(),
            where=frozenset({"marker", "fixture", "ini"})),
    _option("time_limit", 15.0, "seconds of saturation and candidate search in jst.improve",
            _seconds(), where=frozenset({"improve"})),
    _option("node_limit", 5000, "e-nodes after which jst.improve's saturation stops", _count(1),
            where=frozenset({"improve"})),
    _option("iter_limit", 8, "saturation iterations of jst.improve at most", _count(1),
            where=frozenset({"improve"})),
)


def options(entry: str | None = None) -> tuple[Option, ...]:
    """The declared options (read at call time, so a fork of :data:`OPTIONS` is seen everywhere),
    those ``entry`` takes when given (one of :data:`ENTRY_POINTS`)."""
    return tuple(o for o in OPTIONS if entry is None or entry in o.where)


def option(name: str) -> Option | None:
    return next((o for o in OPTIONS if o.name == name), None)


class settings:
    """The options of a case, frozen: ``jst.settings(parent=None, **changes)``.

    Every option of :data:`OPTIONS` is an attribute (``s.max_examples``). A new object is made from
    a parent (default: the loaded profile, :attr:`settings.default`) with some values changed; each
    change is validated at once, and a bad value is a :class:`~pytest_jaxstab.SettingsError` naming
    it. Pass one to ``jst.check(..., settings=s)``, ``jaxstab.check``, the marker or ``jst.improve``;
    keyword arguments given there override it.

    Args:
        parent: the settings to start from (default :attr:`settings.default`).
        **changes: option values, by name.

    Example:
        >>> import pytest_jaxstab as jst
        >>> ci = jst.settings(max_examples=1000, seed=0)
        >>> ci.max_examples, ci.tolerance_bits
        (1000, 8.0)
        >>> jst.settings(ci, tolerance_bits=4).max_examples
        1000
    """

    default: ClassVar[settings]
    _profiles: ClassVar[dict[str, settings]] = {}
    _current: ClassVar[str] = "default"
    __slots__ = ("_parent", "_values")

    def __init__(self, parent: settings | None = None, /, **changes: Any) -> None:
        if parent is not None and not isinstance(parent, settings):
            raise SettingsError(f"parent={parent!r}: expected a jst.settings object (or None for the "
                                "loaded profile)")
        values = {}
        for name, value in changes.items():
            opt = option(name)
            if opt is None:
                raise SettingsError(f"unknown setting {name}={value!r}; the settings are "
                                    f"{', '.join(o.name for o in OPTIONS)}")
            values[name] = opt.check(value)
        if parent is None and hasattr(settings, "default"):
            parent = settings.default
        object.__setattr__(self, "_parent", parent)
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        node: settings | None = self
        while node is not None:
            values: dict[str, Any] = object.__getattribute__(node, "_values")
            if name in values:
                return values[name]
            node = object.__getattribute__(node, "_parent")
        opt = option(name)
        if opt is None:
            raise AttributeError(f"jst.settings has no option {name!r}; the options are "
                                 f"{', '.join(o.name for o in OPTIONS)}")
        return opt.default

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"jst.settings objects are frozen: make a new one, "
                             f"jst.settings(parent, {name}={value!r})")

    def explicit(self) -> dict[str, Any]:
        """The values set on this object or its parents (not the declared defaults)."""
        chain: list[settings] = []
        node: settings | None = self
        while node is not None:
            chain.append(node)
            node = node._parent
        out: dict[str, Any] = {}
        for node in reversed(chain):
            out.update(node._values)
        return out

    def as_dict(self) -> dict[str, Any]:
        """Every option's value, by name."""
        return {o.name: getattr(self, o.name) for o in OPTIONS}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, settings) and self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, repr(v)) for k, v in self.as_dict().items())))

    def __repr__(self) -> str:
        return f"settings({', '.join(f'{k}={v!r}' for k, v in self.explicit().items())})"

    @classmethod
    def register_profile(cls, name: str, parent: settings | None = None, **changes: Any) -> None:
        """Registers the profile ``name``: ``settings(parent, **changes)``, chosen by
        ``--jaxstab-profile=NAME``, the ``jaxstab_profile`` ini key or :meth:`load_profile`.

        Register profiles in the rootdir's ``conftest.py`` (read before the plugin resolves its options).

        Example:
            >>> import pytest_jaxstab as jst
            >>> jst.settings.register_profile("thorough", max_examples=2000, time_budget=None)
            >>> jst.settings.get_profile("thorough").max_examples
            2000
        """
        if not isinstance(name, str) or not name:
            raise SettingsError(f"name={name!r}: expected a non-empty profile name")
        cls._profiles[name] = settings(parent if parent is not None else _ROOT, **changes)

    @classmethod
    def get_profile(cls, name: str) -> settings:
        """The profile registered as ``name``; an unknown name is a :class:`SettingsError` listing them."""
        try:
            return cls._profiles[name]
        except (KeyError, TypeError):
            raise SettingsError(f"unknown jaxstab profile {name!r}: the registered profiles are "
                                f"{', '.join(map(repr, sorted(cls._profiles)))} (register one with "
                                f"jst.settings.register_profile({name!r}, ...) in conftest.py)") from None

    @classmethod
    def load_profile(cls, name: str) -> None:
        """Makes the profile ``name`` the default of every ``jst.check`` / ``jst.improve`` call."""
        cls.default = cls.get_profile(name)
        cls._current = name


_ROOT = settings.__new__(settings)
object.__setattr__(_ROOT, "_parent", None)
object.__setattr__(_ROOT, "_values", {})
settings._profiles["default"] = _ROOT
settings.default = _ROOT


def root() -> settings:
    """The declared defaults, with no profile."""
    return _ROOT


def layered(base: settings, changes: Mapping[str, Any], entry: str, *, where: str) -> settings:
    """``base`` with ``changes`` made, each checked against the options ``entry`` takes.

    ``where`` names the caller in the message of an unknown argument (``"jst.check()"``). A
    ``settings`` entry among the changes is a settings object whose explicit values apply first.
    ``None`` for an option that does not take None (``max_examples=None``, ``timing=None``) leaves
    it as ``base`` has it, as the marker and the fixture always read it.
    """
    changes = dict(changes)
    given = changes.pop("settings", None)
    if given is not None:
        if not isinstance(given, settings):
            raise SettingsError(f"settings={given!r}: expected a jst.settings object")
        base = settings(base, **given.explicit())
    accepted = {o.name for o in options(entry)}
    unknown = [k for k in changes if k not in accepted]
    if unknown:
        raise SettingsError(f"{where} got an unexpected argument {', '.join(unknown)}; it takes "
                            f"{', '.join(sorted(accepted))} (see jst.settings)")
    changes = {k: v for k, v in changes.items() if not (v is None and none_inherits(k))}
    return settings(base, **changes) if changes else base


def none_inherits(name: str) -> bool:
    """Whether ``name=None`` means "not given": the option does not take None as a value."""
    opt = option(name)
    if opt is None:
        return False
    try:
        opt.validate(None)
    except Invalid:
        return True
    return False
