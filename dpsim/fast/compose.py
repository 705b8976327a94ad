"""A chain recognized by its pieces, and its elements composed into one per-coordinate function.

:func:`composition` walks a :func:`~dpsim.transforms.named_chain`: its first piece must expose a
:class:`~dpsim.transforms.elements.Release` (a Gaussian privatizer, i.i.d. or correlated noise;
:func:`~dpsim.transforms.mean_gradient`) or be :func:`~dpsim.transforms.scale_then_privatize` of
such a privatizer over a piece with an element that keeps a second moment ``v`` ([DESIGN] Alg. 8:
the release unscaled and fed to that piece); every later piece must carry an
:class:`~dpsim.transforms.elements.Element`.  The chain is then

    g̃ = release of the batch (scaled by s, then divided by s, under scale-then-privatize)
    u = e_k(… e_2(e_1(g̃)) …)          each e_i updating its slots of the piece's state
    w ← w + u

coordinate by coordinate, which :mod:`dpsim.fast.release` runs in one pass per trial
and :mod:`dpsim.fast.block` in its step loop.  Otherwise :func:`composition` says, in one sentence, which piece stops it (the engine then
runs the chain, and :func:`dpsim.explain` reports the sentence).

:func:`body` composes the registered rules of a structure key (the elements' keys in chain order,
``"|"``-joined) into ``body(g, slots, k, r, j) -> u``: ``slots`` the tuple of every element's
state arrays in order, ``k`` the trial's constants in order, ``(r, j)`` the coordinate.  Each rule
is called with its own slice of ``slots`` and ``k`` (offsets fixed when the key is composed), all
inlined (``inline="always"``), so the composition is the sequence of the rules' operations —
nothing is recomputed and nothing reordered.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba

from ..transforms import _scalar, elements
from ..transforms.elements import RULES, Element, Release, Scaled

__all__ = ["Composition", "composition", "spec_of", "spec", "body", "fingerprint"]


@dataclass(frozen=True)
class Composition:
    """A chain the fused release composes (:func:`composition`).

    ``release``: the first piece's release; ``release_piece``: the name of the privatizer's state
    (its noise-stream state for correlated noise); ``pieces``: ``(name, element)`` of every later
    piece in chain order; ``stp_eps``: scale-then-privatize's ``ε_s`` (``None``: a plain
    post-processing chain), with ``stp_piece`` the piece whose ``v`` gives ``s``."""

    release: Release
    release_piece: str
    pieces: tuple
    stp_eps: Any = None
    stp_piece: str | None = None

    @property
    def key(self) -> str:
        """The structure key: the elements' keys in chain order."""
        return "|".join(e.key for _, e in self.pieces)


def _no_element(name) -> str:
    return (f"its piece {name!r} has no element (no per-coordinate rule that the fused release "
            "composes; dpsim.transforms.elements)")


def composition(tx) -> Composition | str:
    """The :class:`Composition` of the transform ``tx``, or why it has none (one sentence naming
    the piece)."""
    if not tx.parts:
        return ("it is not a named_chain of pieces (the fused release composes the pieces of a "
                "dpsim.transforms.named_chain)")
    (name, first), rest = tx.parts[0], tx.parts[1:]
    el = first.element
    pieces = []
    stp_eps = stp_piece = None
    if isinstance(el, Release):
        rel, rel_piece = el, name
    elif isinstance(el, Scaled):
        pname, qname = el.names
        if not el.unscale or el.lookahead is not None:
            return (f"its scale_then_privatize ({pname!r}, {qname!r}) "
                    + ("keeps its release scaled" if not el.unscale else "feeds a lookahead")
                    + ": the fused release composes [DESIGN] Alg. 8's form only")
        if not isinstance(el.privatizer.element, Release):
            return (f"its piece {pname!r} inside scale_then_privatize is not a Gaussian "
                    "privatizer (its release is not one the fused release draws)")
        q = el.preconditioner.element
        if not isinstance(q, Element):
            return _no_element(qname)
        if "v" not in q.slots:
            return f"its piece {qname!r} keeps no second moment v for scale_then_privatize's s"
        rel, rel_piece = el.privatizer.element, pname
        pieces.append((qname, q))
        stp_eps, stp_piece = el.eps_scale, qname
    else:
        label = repr(name) if name is not None else f"(pieces {', '.join(map(repr, first.names))})"
        return (f"its first piece {label} is not a Gaussian privatizer, mean_gradient or "
                "scale_then_privatize of one (the releases the fused release draws)")
    for name, piece in rest:
        if name is None:
            return (f"its pieces {', '.join(map(repr, piece.names))} come from a combinator the "
                    "fused release does not compose")
        if not isinstance(piece.element, Element):
            return _no_element(name)
        pieces.append((name, piece.element))
    return Composition(rel, rel_piece, tuple(pieces), stp_eps, stp_piece)


def spec(tx):
    """What a fast path runs for ``tx``: the description registered for it
    (:func:`dpsim.transforms.elements.description`), else its :class:`Composition`, else the
    sentence of :func:`composition` saying which piece stops it."""
    found = elements.description(tx)
    return found if found is not None else composition(tx)


def spec_of(tx):
    """:func:`spec`, with ``None`` in place of the sentence."""
    found = spec(tx)
    return None if isinstance(found, str) else found


# ------------------------------------------------------------------------------------------------
# composing the rules (closures over compiled rules, each inlined into the next)


@numba.njit(inline="always")
def _identity(g, slots, k, r, j):
    return g


def _step(fn, n_slots, so, ko, hi):
    """Rule ``fn`` as a step of :func:`body`: its slots ``slots[so:so + n_slots]`` at ``(r, j)``
    read, passed and written back; its constants ``k[ko:hi]``."""
    if n_slots == 0:
        def step(g, slots, k, r, j):
            return fn(g, k[ko:hi])
    elif n_slots == 1:
        def step(g, slots, k, r, j):
            a = slots[so]
            x, u = fn(g, a[r, j], k[ko:hi])
            a[r, j] = x
            return u
    elif n_slots == 2:
        s1 = so + 1

        def step(g, slots, k, r, j):
            a = slots[so]
            b = slots[s1]
            x, y, u = fn(g, a[r, j], b[r, j], k[ko:hi])
            a[r, j] = x
            b[r, j] = y
            return u
    else:
        raise ValueError(f"an element rule has at most two slots, got {n_slots}")
    return numba.njit(inline="always")(step)


def _then(step, rest):
    def composed(g, slots, k, r, j):
        return rest(step(g, slots, k, r, j), slots, k, r, j)
    return numba.njit(inline="always")(composed)


@functools.lru_cache(maxsize=None)
def body(key: str):
    """``(body, n_slots, n_consts)`` of the structure ``key``: ``body(g, slots, k, r, j) -> u``
    applies the registered rules of ``key`` (:data:`dpsim.transforms.elements.RULES`) in order to
    the coordinate ``(r, j)``, each updating its slots in place; ``n_slots``/``n_consts`` the
    lengths of ``slots`` and ``k`` it reads.  Compiled when first called inside a kernel."""
    rules = [RULES[part] for part in key.split("|")] if key else []
    steps = []
    so = ko = 0
    for rule in rules:
        steps.append(_step(rule.fn, rule.n_slots, so, ko, ko + rule.n_consts))
        so += rule.n_slots
        ko += rule.n_consts
    fn = _identity
    for step in reversed(steps):
        fn = _then(step, fn)
    return fn, so, ko


@functools.lru_cache(maxsize=None)
def _file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def fingerprint(key: str) -> str:
    """A digest of the source files that define the structure ``key``'s rules (the modules of its
    registered functions, :mod:`dpsim.transforms._scalar`, :mod:`~dpsim.transforms.elements` and
    this module).  The fused release compiles ``key`` into a kernel under ``key`` and this digest,
    so Numba's disk cache — which checks only the source file of the kernel itself — never serves
    a kernel made from an earlier version of a rule."""
    mods = {_scalar.__name__, elements.__name__, __name__}
    mods.update(RULES[part].fn.py_func.__module__ for part in key.split("|") if part)
    return "".join(_file_digest(sys.modules[m].__file__) for m in sorted(mods))
