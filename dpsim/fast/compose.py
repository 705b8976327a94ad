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

:func:`spec` also derives, from the parts the pieces expose (:mod:`dpsim.transforms.elements`),
the shapes a fast path runs that are not compositions: DP²'s (:func:`delayed`, from
``alternate``/``alongside``, ``accumulate``, ``apply_delayed``, the releases and the learning
rates), a scale-then-privatize that prepares its scale with a lookahead (:func:`prepared`,
AdaDPS), independent moment estimation (:func:`ime`, from the privatizer's
:class:`~dpsim.transforms.elements.Moments`, the moment rule's element and the learning rate) and
PAGAN/PASAN (:func:`ellipsoid`, from the ellipsoid privatizer's
:class:`~dpsim.transforms.elements.Projected`, AdaGrad's max-guard element or per-norm parts and
the learning rate) — for a registered optimizer and a user's chain of the same pieces alike; each
says, in one sentence, which piece stops it.  Nothing is read from beside the chain: a chain that
is none of these runs through its pieces.

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
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numba
import numpy as np

from ..transforms import _scalar, elements
from ..transforms.elements import (RULES, Accumulate, Alongside, Alternate, ApplyDelayed, Delayed,
                                   Element, Ellipsoid, Ime, Moments, PerNorm, Prepared, Projected,
                                   Release, Scaled)

__all__ = ["Composition", "composition", "delayed", "ime", "prepared", "ellipsoid", "lr_factor",
           "guard", "spec_of", "spec", "body", "fingerprint"]


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


def _moments(tx):
    """The privatizer's :class:`~dpsim.transforms.elements.Moments` when ``tx``'s first piece is
    a moment-input privatizer (plain, or inside ``scale_then_privatize``), else ``None``."""
    if not tx.parts:
        return None
    el = tx.parts[0][1].element
    if isinstance(el, Scaled):
        el = el.privatizer.element
    return el if isinstance(el, Moments) else None


def lr_factor(lr, ctx):
    """The learning-rate factor ``−η`` of a chain's ``"scale"`` element ``lr``, as its piece
    computes it (``lr.consts``: ``(ctx.hp(factor),)``; a scale reads no state)."""
    return lr.consts(None, ctx)[0]


def _lr_element(name, piece):
    """The ``"scale"`` element of the chain's last piece, or why it has none."""
    if name is None or not isinstance(piece.element, Element) or piece.element.key != "scale":
        label = repr(name) if name is not None else ", ".join(map(repr, piece.names))
        return f"its last piece {label} is not a scale (the learning rate its fast path applies)"
    return piece.element


def ime(tx) -> Ime | str:
    """The :class:`~dpsim.transforms.elements.Ime` derived from the pieces of ``tx`` (a chain
    whose first piece is a privatizer exposing :class:`~dpsim.transforms.elements.Moments`), or
    the sentence naming the piece that stops it: the privatizer's moments, the next piece's
    element (AdaGrad's ``precondition:adagrad``, or Adam's without Φ) and constants, the last
    piece's learning rate."""
    (name, first), rest = tx.parts[0], list(tx.parts[1:])
    el = first.element
    stp_eps = None
    if isinstance(el, Scaled):
        pname, qname = el.names
        mom, pre = el.privatizer.element, el.preconditioner
        if not el.unscale or el.lookahead is not None:
            return (f"its scale_then_privatize ({pname!r}, {qname!r}) "
                    + ("keeps its release scaled" if not el.unscale else "feeds a lookahead")
                    + ": the fused release composes [DESIGN] Alg. 8's form only")
        if not mom.noiseless:
            return (f"its piece {pname!r} inside scale_then_privatize releases a noisy square: "
                    "the fused IME pass takes scale-then-privatize with the noiseless oracle only")
        stp_eps, rel = el.eps_scale, replace(mom.release, scaled=True)
    else:
        mom, pname, rel = el, name, el.release
        if len(rest) != 2 or rest[0][0] is None:
            return (f"its first piece {pname!r} releases moment inputs, and one moment rule and "
                    "one learning-rate scale do not follow it (the fused IME pass runs those)")
        qname, pre = rest.pop(0)
    if len(rest) != 1:
        return (f"its pieces after {qname!r} are not one learning-rate scale (the fused IME pass "
                "runs privatizer, moment rule, learning rate)")
    q = pre.element
    if not isinstance(q, Element):
        return _no_element(qname)
    if q.key == "precondition:adagrad":
        rule = "adagrad"
    elif q.key in ("adam", "adam:eps"):
        rule = "adam"
    else:
        return (f"its piece {qname!r} (element {q.key!r}) is neither AdaGrad nor Adam without Φ, "
                "the moment rules the fused IME pass runs")
    lr = _lr_element(*rest[0])
    if isinstance(lr, str):
        return lr
    return Ime(release=rel, clip=mom.clip, s2=mom.s2, rule=rule, pre=q, lr=lr,
               names=(pname, qname), noiseless=mom.noiseless, stp_eps=stp_eps)


def ellipsoid(tx) -> Ellipsoid | str:
    """The :class:`~dpsim.transforms.elements.Ellipsoid` derived from the pieces of ``tx`` (a chain
    whose first piece is the ellipsoid privatizer, exposing
    :class:`~dpsim.transforms.elements.Projected`), or the sentence naming the piece that stops
    it: the privatizer's parts (i.i.d. noise), the next piece's AdaGrad with the max guard —
    per coordinate (its element ``"precondition:adagrad_max"``: PAGAN) or per trial on ``||ĝ||²``
    (its :class:`~dpsim.transforms.elements.PerNorm` ``"adagrad_max"``: PASAN) — and the last
    piece's learning rate."""
    (pname, first), rest = tx.parts[0], list(tx.parts[1:])
    el = first.element
    if el.source is not None:
        return (f"its piece {pname!r} draws correlated noise (DP-MF), which the fused release "
                "draws for composed chains and IME only, not for the ellipsoid privatizer")
    if len(rest) != 2 or rest[0][0] is None:
        return (f"its first piece {pname!r} projects onto an ellipsoid, and one AdaGrad step and "
                "one learning-rate scale do not follow it (the fused ellipsoid pass runs those)")
    qname, pre = rest[0]
    q = pre.element
    if isinstance(q, Element) and q.key == "precondition:adagrad_max":
        per_norm = False
    elif isinstance(q, PerNorm) and q.rule == "adagrad_max":
        per_norm = True
    else:
        what = (f"element {q.key!r}" if isinstance(q, Element)
                else f"per-norm rule {q.rule!r}" if isinstance(q, PerNorm) else "no element")
        return (f"its piece {qname!r} ({what}) is not AdaGrad with D = max(√v, ε) "
                "(precondition(adagrad(eps, guard='max')), per coordinate or per norm), the step "
                "the fused ellipsoid pass runs")
    lr = _lr_element(*rest[1])
    if isinstance(lr, str):
        return lr
    return Ellipsoid(glm_release=el.glm_release, pre=q, lr=lr, names=(pname, qname),
                     per_norm=per_norm)


def guard(sp, ctx):
    """The guard ``ε`` of an :class:`~dpsim.transforms.elements.Ellipsoid`'s
    ``D = max(√v, ε)``, as its AdaGrad piece computes it (``sp.pre.consts``: ``(ctx.hp(ε),)``;
    it reads no state)."""
    return sp.pre.consts(None, ctx)[0]


def _lookahead_prepare(el: Scaled):
    """The part of ``scale_then_privatize`` (parts ``el``, keeping its release scaled) before its
    release, with the combinator's own expressions: the preconditioner fed ``lookahead``, then
    ``s = 1/(√max(v, 0) + ε_s)``; ``(state', s)``."""
    qname = el.names[1]

    def prepare(batch, state, params, ctx):
        xp = ctx.xp
        _, q = el.preconditioner.update(el.lookahead(batch, ctx), state[qname], params, ctx)
        s = 1.0 / (xp.sqrt(xp.maximum(q.v, 0.0)) + ctx.hp(el.eps_scale))
        new = dict(state)
        new[qname] = q
        return new, s

    return prepare


def prepared(tx) -> Prepared | str:
    """The :class:`~dpsim.transforms.elements.Prepared` derived from the pieces of ``tx``
    (``named_chain(stp, (l, scale(−η)))``, ``stp`` a scale-then-privatize of a Gaussian privatizer
    that keeps its release scaled and feeds a lookahead), or the sentence naming the piece that
    stops it.  Its ``prepare`` is the piece's own (:attr:`Scaled.prepare`), else the
    combinator's expressions on its parts."""
    el = tx.parts[0][1].element
    pname, qname = el.names
    if not isinstance(el.privatizer.element, Release):
        return (f"its piece {pname!r} inside scale_then_privatize is not a Gaussian "
                "privatizer (its release is not one the fused release draws)")
    rel = _release_of(pname, el.privatizer, "a prepared scale")
    if isinstance(rel, str):
        return rel
    if len(tx.parts) != 2:
        return (f"its scale_then_privatize ({pname!r}, {qname!r}) keeps its release scaled, and "
                "one learning-rate scale does not follow it alone")
    lr = _lr_element(*tx.parts[1])
    if isinstance(lr, str):
        return lr
    prepare = el.prepare if el.prepare is not None else _lookahead_prepare(el)
    return Prepared(release=replace(rel, scaled=True), lr=lr, prepare=prepare)


def _release_of(name, piece, what="DP²'s steps"):
    """The :class:`Release` of the named piece (i.i.d. noise: ``what`` draws no correlated
    noise), or why it has none."""
    if name is None or not isinstance(piece.element, Release):
        label = repr(name) if name is not None else ", ".join(map(repr, piece.names))
        return (f"its piece {label} is not a Gaussian privatizer or mean_gradient (the releases "
                "the fused release draws)")
    if piece.element.source is not None:
        return (f"its piece {name!r} draws correlated noise (DP-MF), which the fused release "
                f"draws for composed chains and IME only, not for {what}")
    return piece.element


def _phase(tx, what):
    """``(release piece, rest)`` of a DP² phase ``tx`` (a named_chain), or why it is none."""
    if not tx.parts:
        return f"its {what} is not a named_chain of pieces"
    return tx.parts[0], list(tx.parts[1:])


def _sgd_phase(tx, what, refresh):
    """``(release, delayed-state name, lr element)`` of DP²'s SGD phase
    ``named_chain((p, P1), (q, accumulate(then_refresh=refresh)), (l, scale))`` (``refresh``
    ``True``: any refresh, returned as a fourth value; ``False``: none), or why it is not one;
    ``lr`` is ``None`` for a phase without its learning rate (the extra query's side)."""
    found = _phase(tx, what)
    if isinstance(found, str):
        return found
    (pn, priv), rest = found
    rel = _release_of(pn, priv)
    if isinstance(rel, str):
        return rel
    if not rest or rest[0][0] is None or not isinstance(rest[0][1].element, Accumulate):
        return f"its {what} does not feed its release to an accumulate() piece"
    qn, acc = rest.pop(0)
    rf = acc.element.refresh
    if (rf is not None) != bool(refresh):
        return (f"its piece {qn!r} in the {what} " + ("does not refresh" if refresh else "refreshes")
                + " where DP²'s arrangement " + ("does" if refresh else "does not"))
    if not rest:
        return rel, qn, None, rf
    if len(rest) != 1:
        return f"its {what} is not a release, an accumulate() and a learning rate"
    lr = _lr_element(*rest[0])
    if isinstance(lr, str):
        return lr
    return rel, qn, lr, rf


def _scaled_phase(tx, qname, what):
    """``(release, P, ε, lr element)`` of DP²'s adaptive phase
    ``named_chain(scale_then_privatize(P2, apply_delayed(P), unscale=False), (l2, scale))`` over
    the delayed state ``qname``, or why it is not one."""
    if len(tx.parts) != 2 or not isinstance(tx.parts[0][1].element, Scaled):
        return f"its {what} is not one scale_then_privatize and a learning rate"
    el = tx.parts[0][1].element
    pname, qn = el.names
    if el.unscale or el.lookahead is not None:
        return (f"its scale_then_privatize ({pname!r}, {qn!r}) in the {what} "
                + ("unscales its release" if el.unscale else "feeds a lookahead")
                + ", where DP²'s adaptive phase keeps the release of g/D")
    if qn != qname or not isinstance(el.preconditioner.element, ApplyDelayed):
        return (f"its piece {qn!r} in the {what} is not apply_delayed() on the SGD phase's "
                f"delayed state {qname!r}")
    rel = _release_of(pname, el.privatizer)
    if isinstance(rel, str):
        return rel
    lr = _lr_element(*tx.parts[1])
    if isinstance(lr, str):
        return lr
    return replace(rel, scaled=True), el.preconditioner.element.P, el.eps_scale, lr


def _same(a, b) -> bool:
    """Two releases with the same values (the side query of DP²'s extra query is the SGD
    phase's release)."""
    if a is b:
        return True
    return all(x is y or (x is not None and y is not None and not callable(getattr(x, "draw", None))
                          and np.array_equal(x, y))
               for x, y in ((getattr(a, f.name), getattr(b, f.name)) for f in fields(a)))


def delayed(tx) -> Delayed | str:
    """The :class:`~dpsim.transforms.elements.Delayed` derived from the pieces of ``tx`` (an
    :func:`~dpsim.transforms.combinators.alternate` of DP²'s phases, or for the extra query with
    delay 1 its refreshing SGD phase alone), or the sentence naming the piece that stops it."""
    el = tx.element
    if not isinstance(el, Alternate):  # the extra query with delay 1: every step refreshes
        sgd = _sgd_phase(tx, "chain", refresh=True)
        if isinstance(sgd, str):
            return sgd
        rel, qn, lr, rf = sgd
        if lr is None:
            return "its chain ends at its accumulate() piece: no learning rate follows"
        return Delayed(order="extra_query", s1=1, s2=0, P=None, eps=None, refresh=rf, rel1=rel,
                       rel2=rel, lr=lr, lr2=lr, piece=qn)
    second = el.second.element
    if isinstance(second, Alongside):  # [DP2] Alg. 2: alternate((1, first), (s − 1, second))
        if el.s1 != 1 or el.on_switch is not None:
            return ("its alternate with a side query is not DP²'s extra query (one refreshing "
                    "step, then the steps with a second release, no switch hook)")
        sgd = _sgd_phase(el.first, "first phase", refresh=True)
        if isinstance(sgd, str):
            return sgd
        rel1, qn, lr, rf = sgd
        if lr is None:
            return "its first phase ends at its accumulate() piece: no learning rate follows"
        side = _sgd_phase(second.side, "side query", refresh=False)
        if isinstance(side, str):
            return side
        if side[2] is not None or side[1] != qn or not _same(side[0], rel1):
            return ("its side query is not the first phase's release into the same accumulate() "
                    "state, without a learning rate")
        main = _scaled_phase(second.main, qn, "second phase's main query")
        if isinstance(main, str):
            return main
        rel2, P, eps, lr2 = main
        return Delayed(order="extra_query", s1=el.s1 + el.s2, s2=el.s2, P=P, eps=eps, refresh=rf,
                       rel1=rel1, rel2=rel2, lr=lr, lr2=lr2, piece=qn)
    sgd = _sgd_phase(el.first, "first phase", refresh=False)
    if isinstance(sgd, str):
        return sgd
    rel1, qn, lr, _ = sgd
    if lr is None:
        return "its first phase ends at its accumulate() piece: no learning rate follows"
    if el.on_switch is None or el.on_switch[0] != qn:
        return (f"its alternate does not refresh the delayed state {qn!r} at the switch "
                "(on_switch), as DP² does")
    rf = el.on_switch[1]
    parts = el.second.parts
    if parts and isinstance(parts[0][1].element, Scaled):
        main = _scaled_phase(el.second, qn, "second phase")
        if isinstance(main, str):
            return main
        rel2, P, eps, lr2 = main
        order = "dp2"
    else:  # release, then divide by the delayed D(v)
        found = _phase(el.second, "second phase")
        if isinstance(found, str):
            return found
        (pn2, priv2), rest = found
        rel2 = _release_of(pn2, priv2)
        if isinstance(rel2, str):
            return rel2
        if (len(rest) != 2 or rest[0][0] != qn
                or not isinstance(rest[0][1].element, ApplyDelayed)):
            return (f"its second phase is not a release, apply_delayed() on the delayed state "
                    f"{qn!r} and a learning rate")
        P, eps = rest[0][1].element.P, None
        lr2 = _lr_element(*rest[1])
        if isinstance(lr2, str):
            return lr2
        order = "noise_first"
    return Delayed(order=order, s1=el.s1, s2=el.s2, P=P, eps=eps, refresh=rf, rel1=rel1,
                   rel2=rel2, lr=lr, lr2=lr2, piece=qn)


def spec(tx):
    """What a fast path runs for ``tx``, derived from its pieces: a
    :class:`~dpsim.transforms.elements.Delayed` for an alternate of DP²'s phases or a chain with a
    refreshing ``accumulate()`` piece (:func:`delayed`); an
    :class:`~dpsim.transforms.elements.Ime` when its privatizer releases moment inputs
    (:func:`ime`); a :class:`~dpsim.transforms.elements.Prepared` for a scale-then-privatize that
    keeps its release scaled and feeds a lookahead (:func:`prepared`); an
    :class:`~dpsim.transforms.elements.Ellipsoid` when its privatizer projects onto an ellipsoid
    (:func:`ellipsoid`: PAGAN/PASAN); else its :class:`Composition`; or the sentence saying which
    piece stops it."""
    if isinstance(tx.element, Alternate) or any(
            isinstance(p.element, Accumulate) for _, p in tx.parts):
        return delayed(tx)
    if _moments(tx) is not None:
        return ime(tx)
    if tx.parts:
        el = tx.parts[0][1].element
        if isinstance(el, Scaled) and not el.unscale and el.lookahead is not None:
            return prepared(tx)
        if isinstance(el, Projected):
            return ellipsoid(tx)
    return composition(tx)


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
