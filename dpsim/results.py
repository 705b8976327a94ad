"""Results of :func:`dpsim.simulate`: :class:`Result`, its file formats and :func:`load`.

A :class:`Result` prints as a short summary (``repr``; an HTML table in notebooks), converts to a
tidy :class:`pandas.DataFrame` (:meth:`Result.to_dataframe`) or a labelled
:class:`xarray.Dataset` (:meth:`Result.to_xarray`), and is saved as NumPy ``.npz`` or netCDF
``.nc`` (:meth:`Result.save`, chosen by suffix; :func:`load` reads both).

The ε these summaries report is at the δ of :meth:`Result.report_delta`: the calibration target δ
when the run was calibrated (``config["calibration"]["target_delta"]``), else
:data:`DEFAULT_DELTA`.
"""

from __future__ import annotations

import html
import json
import numbers
import os
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Result", "load", "FORMAT", "METRICS", "DIVERGENCE_FACTOR", "DEFAULT_DELTA",
           "SAVE_FORMATS", "divergence_rule"]

#: File format written by :meth:`Result.save` (2: privacy records resolved from typed events).
FORMAT = "dpsim-result-2"
#: The ``(K, R)`` metric fields of :class:`Result` (``None`` when not recorded, except ``loss``).
METRICS = ("loss", "excess_loss", "grad_norm_sq", "dist_to_opt", "test_loss", "test_accuracy")

#: A trial whose final recorded excess loss exceeds ``DIVERGENCE_FACTOR`` times its first recorded
#: excess loss (or, without an excess loss, whose loss rose by more than ``DIVERGENCE_FACTOR``
#: times ``max(|first loss|, 1)``) has blown up although it is still finite: :attr:`Result.diverged`
#: flags it.
DIVERGENCE_FACTOR = 100.0

#: δ of the ε that :meth:`Result.__repr__`, :meth:`Result.to_dataframe` and
#: :meth:`Result.to_xarray` report for a run that was not calibrated (a calibrated run reports ε at
#: its calibration target δ).
DEFAULT_DELTA = 1e-5

#: File suffix → format of :meth:`Result.save` and :func:`load`.
SAVE_FORMATS = {".npz": "npz", ".nc": "nc"}

#: A first excess loss at most this fraction of ``max(|first loss|, 1)`` means the trial started
#: at the optimum: the excess-loss growth ratio is then meaningless and the loss rule applies.
_AT_OPTIMUM = 1e-12

#: Added to the reason of a non-finite trial run with ``eps = 0`` and no noise.
_ZERO_DENOMINATOR = (" (eps=0 with noise_multiplier=0: the denominator sqrt(v) + eps is 0 on a "
                     "coordinate whose gradients have all been 0, and its update 0/0; use eps > 0)")

#: Lines of the text summary given to the final metric values (the rest are fixed rows).
_REPR_METRIC_ROWS = 9


def divergence_rule() -> str:
    """One line naming the rule of :attr:`Result.diverged` (with the current
    :data:`DIVERGENCE_FACTOR`), for summaries.

    Returns
    -------
    str
        The rule, in words.

    Examples
    --------
    >>> from dpsim.results import divergence_rule
    >>> divergence_rule()  # doctest: +ELLIPSIS
    'non-finite final parameters or loss, or final excess loss > 100x its first record ...'
    """
    f = f"{DIVERGENCE_FACTOR:g}"
    return (f"non-finite final parameters or loss, or final excess loss > {f}x its first record "
            f"(without an excess loss: loss rise > {f} x max(|first loss|, 1))")


@dataclass
class Result:
    """Recorded trajectories of one :func:`simulate` call (NumPy arrays).

    ``steps`` (K,) record step indices; ``loss``, ``excess_loss``, ``grad_norm_sq``, ``dist_to_opt``
    (K, R); ``records`` probe name → (K, R); ``params`` (R, d) final parameters; ``config`` plain
    dict; ``privacy`` the resolved privacy record (what :meth:`epsilon` accounts,
    :func:`dpsim.accounting.privacy_record`); ``test_loss``, ``test_accuracy`` (K, R) the held-out
    metrics (``None`` unless recorded).

    ``repr(result)`` is a summary of at most 20 lines (an HTML table in notebooks);
    :meth:`to_dataframe` and :meth:`to_xarray` convert it; :meth:`save` writes ``.npz`` or
    ``.nc``; :attr:`diverged` flags the trials that blew up.
    """

    steps: np.ndarray
    loss: np.ndarray
    excess_loss: np.ndarray | None
    grad_norm_sq: np.ndarray
    dist_to_opt: np.ndarray | None
    records: dict
    params: np.ndarray
    config: dict
    privacy: dict
    wall_time: float = float("nan")
    mean_batch_size: Any = None
    test_loss: np.ndarray | None = None
    test_accuracy: np.ndarray | None = None

    @property
    def trials(self) -> int:
        return self.loss.shape[1]

    @property
    def diverged(self) -> np.ndarray:
        """``(R,)`` bool: the trials that diverged; summaries report the other trials apart.

        A trial is flagged when any of these holds (checked in this order;
        :attr:`diverged_reason` says which):

        1. its final parameters are not all finite;
        2. the loss is recorded (``"loss"`` in ``config["metrics"]``) and its last record is not
           finite;
        3. a finite blow-up, judged on the first and last records (both finite):

           * with an excess loss recorded whose first record ``e0`` is above
             ``1e-12 * max(|loss0|, 1)`` (the trial did not start at the optimum): the final
             excess loss exceeds ``DIVERGENCE_FACTOR * e0`` -- the run ended
             :data:`DIVERGENCE_FACTOR` (100) times farther from the optimum, in objective value,
             than it started.  This is invariant to rescaling the objective and to adding a
             constant to it;
           * otherwise, with the loss recorded: ``loss[-1] - loss[0] >
             DIVERGENCE_FACTOR * max(|loss[0]|, 1)`` (the floor 1 keeps a loss that starts near
             zero from being flagged for a small absolute rise).

        So a logistic loss going from 0.69 to 9.5e17 is flagged, while a large learning rate
        that ends 10 times above its start is not.  When the loss is not recorded (its array is
        NaN-filled), only non-finite parameters count.
        """
        return self._divergence()[0]

    @property
    def diverged_reason(self) -> np.ndarray:
        """``(R,)`` str: why each trial is flagged by :attr:`diverged` (``""`` for the others),
        e.g. ``"non-finite final parameters"`` or ``"excess loss grew 1.3e+13x (> 100x)"``."""
        return self._divergence()[1]

    def _divergence(self) -> tuple[np.ndarray, np.ndarray]:
        R = self.params.shape[0]
        bad = np.zeros(R, dtype=bool)
        why = np.full(R, "", dtype=object)

        def flag(mask, reasons):
            new = np.asarray(mask, dtype=bool) & ~bad
            why[new] = np.asarray(reasons, dtype=object)[new] if np.ndim(reasons) else reasons
            bad[new] = True

        zero_den = self._zero_denominator(R)
        nonfinite = ~np.all(np.isfinite(self.params), axis=1)
        flag(nonfinite & ~zero_den, "non-finite final parameters")
        flag(nonfinite, "non-finite final parameters" + _ZERO_DENOMINATOR)
        has_loss = (self.loss is not None and self.loss.size > 0
                    and "loss" in self.config.get("metrics", ["loss"]))
        if not has_loss:
            return bad, why.astype(str)
        loss0, loss1 = self.loss[0], self.loss[-1]
        flag(~np.isfinite(loss1) & ~zero_den, "non-finite final loss")
        flag(~np.isfinite(loss1), "non-finite final loss" + _ZERO_DENOMINATOR)
        finite = np.isfinite(loss0) & np.isfinite(loss1)
        scale = np.maximum(np.abs(np.where(finite, loss0, 0.0)), 1.0)
        use_excess = np.zeros(R, dtype=bool)
        if self.excess_loss is not None and self.excess_loss.size > 0:
            e0, e1 = self.excess_loss[0], self.excess_loss[-1]
            use_excess = finite & np.isfinite(e0) & np.isfinite(e1) & (e0 > _AT_OPTIMUM * scale)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                ratio = np.where(use_excess, e1 / np.where(use_excess, e0, 1.0), 0.0)
            flag(use_excess & (ratio > DIVERGENCE_FACTOR),
                 [f"excess loss grew {x:.3g}x (> {DIVERGENCE_FACTOR:g}x)" for x in ratio])
        rise = np.where(finite, loss1 - loss0, 0.0)
        flag(finite & ~use_excess & (rise > DIVERGENCE_FACTOR * scale),
             [f"loss rose by {x:.3g} (> {DIVERGENCE_FACTOR:g} x max(|first loss|, 1) = "
              f"{DIVERGENCE_FACTOR * c:.3g})" for x, c in zip(rise, scale)])
        return bad, why.astype(str)

    def _zero_denominator(self, R: int) -> np.ndarray:
        """``(R,)`` bool: the trials run with ``eps = 0`` and no noise (``noise_multiplier`` 0 or
        absent), where an adaptive step's denominator ``√v̂ + eps`` is 0 on a coordinate whose
        gradients have all been 0, and its update 0/0 (named in :attr:`diverged_reason`)."""
        hp = self.config.get("hyperparameters") or {}
        try:
            eps = hp.get("eps")
            if eps is None or isinstance(eps, str):
                return np.zeros(R, dtype=bool)
            sigma = hp.get("noise_multiplier", 0.0)
            sigma = 0.0 if sigma is None or isinstance(sigma, str) else sigma
            return np.broadcast_to((np.asarray(eps, dtype=float) == 0.0)
                                   & (np.asarray(sigma, dtype=float) == 0.0), (R,))
        except (TypeError, ValueError):
            return np.zeros(R, dtype=bool)

    def epsilon(self, delta: float, *, accountant: str | None = None):
        """(ε, δ) privacy spent by the run, from the optimizer's declared privacy events and the
        sampler (:func:`dpsim.accounting.epsilon_of_record` of :attr:`privacy`).

        ``accountant``: ``"pld"`` or ``"rdp"``; default the run's (``privacy["accountant"]``,
        ``"pld"`` unless ``simulate(..., accountant=...)`` chose another).  Returns a float when
        every trial spent the same, else an ``(R,)`` array (per-trial noise multipliers).  Runs
        whose optimizer declares ``NonPrivate`` return ``inf``.  :meth:`privacy_report` says which
        accountant, adjacency and sampling the number is for.

        Parameters
        ----------
        delta : float
            The δ to report ε at.
        accountant : {'pld', 'rdp'}, optional
            Default: the run's.

        Returns
        -------
        float or numpy.ndarray
            ε, or ``(R,)`` per-trial values.

        Examples
        --------
        >>> import dpsim
        >>> prob = dpsim.problems.logistic_regression(200, 5, seed=0)
        >>> res = dpsim.simulate(prob, "dp_sgd", steps=3, batch_size=8, trials=2, seed=0)
        >>> round(res.epsilon(1e-5), 2)
        1.07
        """
        from . import accounting

        if accountant is None:
            accountant = self.privacy.get("accountant", "pld")
        return accounting.epsilon_of_record(self.privacy, delta, accountant=accountant)

    def privacy_report(self, delta: float, *, accountant: str | None = None) -> dict:
        """``{"epsilon", "delta", "accountant", "adjacency", "sampling", "participation",
        "correlated", "private", "note", "scope", "accountant_note"}``: ε with what it means (the
        accountant that computed it, the neighbouring relation, the sampler and the participation
        it implies, and — for correlated noise (DP-MF) — ``"amplified"``/``"unamplified"``/
        ``"mixed"``, else ``None``).  A ctCDP run reports its own conversion ([L2P] Thm A.1) as the
        accountant.

        ``scope`` says what ε does not cover (:data:`dpsim.accounting.EPSILON_SCOPE`):
        hyperparameter tuning on the same private data, and the diagnostics this result records
        from the private data without noise (losses, gradient norms, probes, mean batch sizes).
        ``adjacency`` for Poisson sampling is add/remove *with the sampling rate fixed in advance*
        (the neighbour one example shorter is sampled at the same ``b/n``).  ``accountant_note``
        is ``""`` unless the accountant hit one of its limits and another valid bound is the
        answer (:class:`dpsim.accounting.AccountingNote`; e.g. PLD could not refine and the RDP
        bound was smaller).

        Parameters
        ----------
        delta : float
            The δ to report ε at.
        accountant : {'pld', 'rdp'}, optional
            Default: the run's.

        Returns
        -------
        dict
            ε and what it means.
        """
        from . import accounting

        acc = accountant or self.privacy.get("accountant", "pld")
        with accounting.collect_notes() as notes:
            eps = self.epsilon(delta, accountant=acc)
        kind = self.privacy.get("kind")
        return {"epsilon": eps, "delta": float(delta),
                "accountant": "tcdp (L2P Thm A.1)" if kind == "ctcdp" else acc,
                "adjacency": self.privacy.get("adjacency", self.config.get("adjacency", "n/a")),
                "sampling": self.privacy.get("sampling", self.config.get("sampling")),
                "participation": self.privacy.get("participation"),
                "correlated": self.privacy.get("correlated_accounting"),
                "private": bool(self.privacy.get("private")), "note": self.privacy.get("note", ""),
                "scope": accounting.EPSILON_SCOPE, "accountant_note": "; ".join(notes)}

    # -- summaries -------------------------------------------------------------------------------

    def report_delta(self) -> tuple[float, str]:
        """The δ at which :meth:`__repr__`, :meth:`to_dataframe` and :meth:`to_xarray` report ε.

        Returns
        -------
        delta : float
            ``config["calibration"]["target_delta"]`` when the run was calibrated
            (``simulate(..., target_epsilon=..., target_delta=...)``), else
            :data:`DEFAULT_DELTA` (``1e-5``).
        source : str
            ``"calibration target"`` or ``"default"``.
        """
        cal = self.config.get("calibration")
        if isinstance(cal, dict) and cal.get("target_delta") is not None:
            return float(cal["target_delta"]), "calibration target"
        return DEFAULT_DELTA, "default"

    def _epsilon_or_error(self, delta: float):
        """``(ε, None)``, or ``(None, message)`` when the accountant cannot compute ε at ``delta``
        (e.g. PLD with a tiny noise multiplier)."""
        try:
            return self.epsilon(delta), None
        except ValueError as exc:
            return None, str(exc).split("\n")[0]

    def _noise_multiplier(self):
        """σ from the hyperparameters: a float, an ``(R,)`` array (per-trial σ), or NaN when the
        optimizer has no ``noise_multiplier`` hyperparameter (or it is ``None``)."""
        v = self.config.get("hyperparameters", {}).get("noise_multiplier")
        if isinstance(v, (list, tuple)):
            if len(v) != self.trials:
                raise ValueError(f"hyperparameter noise_multiplier={v!r} has {len(v)} values for "
                                 f"{self.trials} trials")
            return np.array([np.nan if x is None else x for x in v], dtype=float)
        return float("nan") if v is None else float(v)

    def _recorded(self) -> dict:
        """``name → (K, R)`` of the metrics that were recorded (the loss only when ``"loss"`` is
        in ``config["metrics"]``: otherwise its array is NaN-filled)."""
        metrics = self.config.get("metrics")
        out = {}
        for k in METRICS:
            a = getattr(self, k)
            if a is None or (k == "loss" and metrics is not None and "loss" not in metrics):
                continue
            out[k] = a
        return out

    def _summary_rows(self) -> list[tuple[str, str, bool]]:
        """``(label, text, indented)`` rows shared by :meth:`__repr__` and :meth:`_repr_html_`."""
        cfg, R = self.config, self.trials
        prob = cfg.get("problem", {})
        pname = str(prob.get("name", "?")) if isinstance(prob, dict) else str(prob)
        dims = ", ".join(f"{k}={prob[k]}" for k in ("n", "d") if isinstance(prob, dict) and k in prob)
        hp = cfg.get("hyperparameters", {})
        rows = [("optimizer", str(cfg.get("optimizer", "?")), False),
                ("problem", pname + (f" ({dims})" if dims else ""), False),
                ("hyperparameters",
                 _clip(", ".join(f"{k}={_fmt_value(v)}" for k, v in hp.items()) or "none"), False),
                ("run", f"{cfg.get('steps', '?')} steps, batch size {cfg.get('batch_size', '?')}, "
                        f"{_trials(R)}, sampling {cfg.get('sampling', '?')}, "
                        f"engine {cfg.get('engine', '?')}", False)]
        bad, why = self._divergence()
        keep = ~bad
        series = list(self._recorded().items()) + [(f"probe {k}", v) for k, v in self.records.items()]
        if self.steps.size == 0:
            rows.append(("final values", "none (nothing recorded)", False))
        elif not series:
            rows.append(("final values", "none (no metric recorded)", False))
        else:
            rows.append(("final values", f"mean over the {int(keep.sum())} of {_trials(R)} not "
                                         f"diverged, at step {int(self.steps[-1])}", False))
            shown = series
            if len(series) > _REPR_METRIC_ROWS:
                shown = series[:_REPR_METRIC_ROWS - 1]
            for label, arr in shown:
                last = np.asarray(arr)[-1][keep]
                fin = np.isfinite(last)
                if not fin.any():
                    text = "n/a (no finite value)"
                else:
                    text = f"{np.mean(last[fin]):.6g}"
                    if not fin.all():
                        text += f" (over the {_trials(int(fin.sum()))} with a finite value)"
                rows.append((label, text, True))
            if len(shown) < len(series):
                rows.append(("...", f"{len(series) - len(shown)} more (see to_dataframe())", True))
        rows.append(("privacy", self._epsilon_text(), False))
        rows.append(("ε scope", self._scope_text(), True))
        n_bad = int(bad.sum())
        text = f"{n_bad} of {_trials(R)}"
        if n_bad:
            idx = np.flatnonzero(bad)
            text += ": " + "; ".join(f"trial {i} {why[i]}" for i in idx[:2])
            text += f"; and {n_bad - 2} more" if n_bad > 2 else ""
        rows.append(("diverged", _clip(text), False))
        wall = self.wall_time
        rows.append(("wall time", "n/a" if wall is None or not np.isfinite(wall) else f"{wall:.3g} s",
                     False))
        return rows

    def _epsilon_text(self) -> str:
        delta, source = self.report_delta()
        where = f"at δ = {delta:g} ({source} δ)"
        try:
            rep = self.privacy_report(delta)
        except ValueError as exc:
            return _clip(f"ε not computable {where}: {str(exc).splitlines()[0]}")
        eps = np.asarray(rep["epsilon"], dtype=float)
        if not rep["private"] or np.all(np.isinf(eps)):
            return "ε = inf (not private)"
        val = f"{float(eps):.4g}" if eps.ndim == 0 else f"{eps.min():.4g} .. {eps.max():.4g} (per trial)"
        return f"ε = {val} {where}, accountant {rep['accountant']}"

    def _scope_text(self) -> str:
        """The neighbouring relation and what ε leaves out, on one line (:meth:`privacy_report`)."""
        from .accounting import EPSILON_SCOPE_SHORT

        adj = self.privacy.get("adjacency") or self.privacy.get("adjacency_note")
        if not adj and self.privacy.get("kind") == "ctcdp":
            adj = "replace one example (ctCDP)"
        return _clip(f"{adj or 'n/a'}; {EPSILON_SCOPE_SHORT}", 140)

    def __repr__(self) -> str:
        """A summary of at most 20 lines: optimizer, problem, hyperparameters, steps / batch size /
        trials / engine, the final mean of each recorded metric and probe (over the trials not
        :attr:`diverged`, finite values only), ε at :meth:`report_delta`'s δ with its neighbouring
        relation and what it does not cover (tuning on the private data, the recorded
        diagnostics), the diverged count and the wall time.  No arrays."""
        rows = self._summary_rows()
        width = max(len(label) + 2 * ind for label, _, ind in rows)
        lines = ["dpsim.Result"]
        lines += [f"  {'  ' * ind + label:<{width}}  {text}" for label, text, ind in rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The content of :meth:`__repr__` as a small HTML table (every text escaped)."""
        cells = []
        for label, text, ind in self._summary_rows():
            pad = "padding-left:1.5em;" if ind else ""
            cells.append(f'<tr><th style="text-align:left;{pad}">{html.escape(label)}</th>'
                         f'<td style="text-align:left">{html.escape(text)}</td></tr>')
        return ("<table><caption style=\"text-align:left\"><b>dpsim.Result</b></caption>"
                + "".join(cells) + "</table>")

    # -- conversions -----------------------------------------------------------------------------

    def to_dataframe(self, delta: float | None = None):
        """Tidy :class:`pandas.DataFrame`: one row per (trial, record step), trial-major.

        Parameters
        ----------
        delta : float, optional
            δ of the ``epsilon`` column; default :meth:`report_delta` (the calibration target δ
            of a calibrated run, else :data:`DEFAULT_DELTA` = ``1e-5``).

        Returns
        -------
        pandas.DataFrame
            ``trials * len(steps)`` rows with the columns, in order:

            * ``trial``, ``step``;
            * every metric recorded (``loss`` when ``"loss"`` is in ``config["metrics"]``;
              ``excess_loss``, ``grad_norm_sq``, ``dist_to_opt``, ``test_loss``,
              ``test_accuracy`` when not None);
            * every probe of :attr:`records` by its name (``probe_<name>`` when the name is
              taken by a column above or below);
            * ``optimizer``;
            * every hyperparameter but ``noise_multiplier``: a per-trial list gives each trial its
              own value, a scalar repeats, non-numeric values (strings, ``None``) are kept as they
              are; a name taken by another column (ctCDP's ``epsilon`` and ``delta`` budget) is
              the column ``hp_<name>``;
            * ``noise_multiplier``: σ from the hyperparameters (per trial when a list), NaN when the
              optimizer has none;
            * ``epsilon``: ε at ``delta`` (per trial when σ is; ``inf`` for a non-private run;
              NaN when the accountant cannot compute it, the reason then in
              ``df.attrs["epsilon_error"]``), and ``delta``;
            * ``diverged``: bool per trial (:attr:`diverged`).

            ``df.attrs`` holds ``"delta"`` and ``"delta_source"`` (``"calibration target"``,
            ``"default"`` or ``"argument"``).
        """
        import pandas as pd

        delta, source = (float(delta), "argument") if delta is not None else self.report_delta()
        R, K = self.trials, int(np.size(self.steps))
        n = R * K
        cols: dict[str, Any] = {"trial": np.repeat(np.arange(R), K), "step": np.tile(self.steps, R)}
        for k, a in self._recorded().items():
            cols[k] = np.asarray(a).T.reshape(-1)
        reserved = {"trial", "step", "optimizer", "noise_multiplier", "epsilon", "delta", "diverged"}
        for k, a in self.records.items():
            cols[_free_name(k, "probe_", cols, reserved)] = np.asarray(a).T.reshape(-1)
        cols["optimizer"] = [self.config.get("optimizer")] * n
        for k, v in self.config.get("hyperparameters", {}).items():
            if k == "noise_multiplier":
                continue
            name = _free_name(k, "hp_", cols, reserved)
            if isinstance(v, (list, tuple)) and len(v) == R:
                cols[name] = [v[r] for r in range(R) for _ in range(K)]
            else:
                cols[name] = [v] * n
        cols["noise_multiplier"] = _per_row(self._noise_multiplier(), K, n)
        eps, err = self._epsilon_or_error(delta)
        cols["epsilon"] = _per_row(float("nan") if err else eps, K, n)
        cols["delta"] = np.full(n, delta)
        cols["diverged"] = np.repeat(self.diverged, K)
        df = pd.DataFrame(cols)
        df.attrs.update(delta=delta, delta_source=source)
        if err:
            df.attrs["epsilon_error"] = err
        return df

    def to_xarray(self, delta: float | None = None):
        """Labelled :class:`xarray.Dataset`, writable as netCDF 3 (``ds.to_netcdf(path)``, scipy
        engine) and holding everything :func:`load` needs.

        Parameters
        ----------
        delta : float, optional
            δ of the ``epsilon`` variable; default :meth:`report_delta`.

        Returns
        -------
        xarray.Dataset
            Dims ``step`` × ``trial`` (and ``dim`` for ``params``).  Data variables: the metrics
            that are not None (``loss`` always, NaN-filled when not recorded), each probe as
            ``probe_<name>``, ``params`` (trial, dim), ``mean_batch_size`` (trial,),
            ``optimizer`` (0-d string), each scalar hyperparameter as a 0-d variable (numbers,
            booleans and strings; ``None`` values are only in ``attrs["config"]``),
            ``noise_multiplier`` (0-d, NaN when the optimizer has none), ``epsilon`` (0-d, or
            (trial,) with per-trial σ; ``inf`` for a non-private run; NaN when the accountant
            cannot compute it, the reason in ``attrs["epsilon_error"]``), ``delta`` (0-d),
            ``diverged`` (trial,; bool, stored as int8 in the file by xarray) and
            ``diverged_reason`` (trial,).  Per-trial hyperparameters are ``trial`` coordinates
            (floats, ``None`` as NaN; non-numeric ones as their ``str``), ``noise_multiplier``
            included.  A hyperparameter named like another variable (ctCDP's ``epsilon`` and
            ``delta``) is ``hp_<name>``.  ``attrs``: ``config`` and ``privacy`` (JSON), ``format``,
            ``wall_time``, ``delta_source`` and ``layout`` (JSON: the metrics, probe variables
            and array dtypes that :func:`load` restores).
        """
        import xarray as xr

        delta, source = (float(delta), "argument") if delta is not None else self.report_delta()
        R = self.trials
        metrics = [k for k in METRICS if getattr(self, k) is not None]
        data: dict[str, Any] = {k: (("step", "trial"), getattr(self, k)) for k in metrics}
        probes = {}
        for k, v in self.records.items():
            probes[k] = f"probe_{k}"
            data[probes[k]] = (("step", "trial"), v)
        data["params"] = (("trial", "dim"), self.params)
        dtypes = {k: np.asarray(getattr(self, k)).dtype.str for k in metrics + ["steps", "params"]}
        dtypes.update({probes[k]: np.asarray(v).dtype.str for k, v in self.records.items()})
        if self.mean_batch_size is not None:
            mbs = np.asarray(self.mean_batch_size)
            if mbs.ndim == 1 and mbs.shape[0] == R:
                data["mean_batch_size"] = (("trial",), mbs)
            elif mbs.ndim == 0:
                data["mean_batch_size"] = ((), mbs)
            else:
                raise ValueError(f"mean_batch_size has shape {mbs.shape}; expected () or ({R},)")
            dtypes["mean_batch_size"] = mbs.dtype.str
        coords: dict[str, Any] = {"step": self.steps, "trial": np.arange(R)}
        reserved = set(data) | {"step", "trial", "dim", "optimizer", "noise_multiplier", "epsilon",
                                "delta", "diverged", "diverged_reason", "mean_batch_size"}
        taken: dict[str, Any] = {}
        for k, v in self.config.get("hyperparameters", {}).items():
            if k == "noise_multiplier":
                continue
            name = _free_name(k, "hp_", taken, reserved)
            if isinstance(v, (list, tuple)) and len(v) == R:
                coords[name] = taken[name] = ("trial", _trial_values(v))
            elif isinstance(v, (numbers.Real, str)):
                data[name] = taken[name] = ((), v)
        sigma = self._noise_multiplier()
        if np.ndim(sigma):
            coords["noise_multiplier"] = ("trial", sigma)
        else:
            data["noise_multiplier"] = ((), sigma)
        eps, err = self._epsilon_or_error(delta)
        eps = np.asarray(float("nan") if err else eps, dtype=float)
        data["epsilon"] = (("trial",) if eps.ndim else (), eps)
        data["delta"] = ((), delta)
        data["optimizer"] = ((), str(self.config.get("optimizer", "")))
        bad, why = self._divergence()
        data["diverged"] = (("trial",), bad)
        data["diverged_reason"] = (("trial",), why)
        layout = {"metrics": metrics, "probes": probes, "dtypes": dtypes,
                  "mean_batch_size": self.mean_batch_size is not None}
        attrs = {"config": json.dumps(self.config), "privacy": json.dumps(self.privacy),
                 "format": FORMAT, "wall_time": float(self.wall_time), "delta_source": source,
                 "layout": json.dumps(layout)}
        if err:
            attrs["epsilon_error"] = err
        return xr.Dataset(data, coords=coords, attrs=attrs)

    # -- files -----------------------------------------------------------------------------------

    def save(self, path, *, format: str | None = None) -> None:
        """Write the result to ``path``; :func:`load` reads it back.

        Parameters
        ----------
        path : str or os.PathLike
            ``*.npz``: NumPy archive with the config as JSON (the cache format, unchanged);
            ``*.nc``: netCDF 3 of :meth:`to_xarray` (scipy engine; opens with
            ``xarray.open_dataset``).
        format : {"npz", "nc"}, optional
            Overrides the suffix (for a path without one, e.g. ``/proc/self/fd/N`` or a temporary
            name).

        Raises
        ------
        ValueError
            When ``path`` has another suffix and ``format`` is not given, naming the path and
            the accepted suffixes.
        """
        fmt = _save_format(path, format)
        if fmt == "nc":
            self.to_xarray().to_netcdf(os.fspath(path), engine="scipy")
            return
        arrays = {"steps": self.steps, "loss": self.loss, "params": self.params}
        if self.grad_norm_sq is not None:
            arrays["grad_norm_sq"] = self.grad_norm_sq
        if self.excess_loss is not None:
            arrays["excess_loss"] = self.excess_loss
        if self.dist_to_opt is not None:
            arrays["dist_to_opt"] = self.dist_to_opt
        for k in ("test_loss", "test_accuracy"):  # held-out metrics: entries only when recorded
            if getattr(self, k) is not None:
                arrays[k] = getattr(self, k)
        for k, v in self.records.items():
            arrays[f"probe__{k}"] = v
        if self.mean_batch_size is not None:
            arrays["mean_batch_size"] = np.asarray(self.mean_batch_size)
        meta = {"config": self.config, "privacy": self.privacy, "wall_time": self.wall_time,
                "format": FORMAT}
        with open(path, "wb") as fh:
            np.savez_compressed(fh, __meta__=np.array(json.dumps(meta)), **arrays)


def _trials(n: int) -> str:
    return f"{n} trial" if n == 1 else f"{n} trials"


def _clip(text: str, width: int = 100) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _fmt_value(v) -> str:
    if isinstance(v, (list, tuple)):
        items = [_fmt_value(x) for x in v]
        if len(items) > 4:
            items = items[:2] + ["..."] + items[-1:]
        return "[" + ", ".join(items) + "]"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _free_name(name: str, prefix: str, taken, reserved) -> str:
    """``name``, or ``prefix + name`` when ``name`` is reserved or taken (a collision of both is
    an error naming the column)."""
    if name not in reserved and name not in taken:
        return name
    alt = prefix + name
    if alt in reserved or alt in taken:
        raise ValueError(f"cannot name the column of {name!r}: both {name!r} and {alt!r} are taken")
    return alt


def _per_row(value, K: int, n: int):
    """A per-trial ``(R,)`` array repeated over the ``K`` records, or a scalar over ``n`` rows."""
    if np.ndim(value):
        return np.repeat(np.asarray(value, dtype=float), K)
    return np.full(n, float(value))


def _trial_values(v) -> np.ndarray:
    """Per-trial hyperparameter values as a netCDF-storable array: numbers (bools included) as
    float with ``None`` as NaN, anything else as its ``str``."""
    if all(x is None or isinstance(x, numbers.Real) for x in v):
        return np.array([np.nan if x is None else x for x in v], dtype=float)
    return np.array([str(x) for x in v])


def _save_format(path, format) -> str:
    if format is not None:
        if format not in SAVE_FORMATS.values():
            raise ValueError(f"format={format!r} is not one of "
                             f"{', '.join(repr(f) for f in SAVE_FORMATS.values())}")
        return format
    suffix = os.path.splitext(os.fspath(path))[1]
    if suffix.lower() not in SAVE_FORMATS:
        raise ValueError(f"cannot save a result to {os.fspath(path)}: suffix {suffix!r} is not one "
                         f"of {', '.join(SAVE_FORMATS)} (or pass format='npz' or 'nc')")
    return SAVE_FORMATS[suffix.lower()]


def load(path) -> Result:
    """Read a :class:`Result` written by :meth:`Result.save`.

    The format follows the suffix (``.npz`` or ``.nc``); a file with another suffix is read by
    its content (a zip archive as ``.npz``, netCDF as ``.nc``).  A missing, truncated, corrupt or
    foreign file raises one ``ValueError`` naming the file.

    Parameters
    ----------
    path : str or path-like
        A ``.npz`` or ``.nc`` file written by :meth:`Result.save`.

    Returns
    -------
    Result
        The result as saved.

    Raises
    ------
    ValueError
        For a missing, truncated, corrupt or foreign file.
    """
    try:
        return _load(path)
    except ValueError as exc:
        if str(path) in str(exc):
            raise
        raise ValueError(f"{path} is not a readable dpsim result file ({_why(exc)})") from None
    except MemoryError:
        raise
    except (OSError, EOFError, KeyError, TypeError, AttributeError, IndexError,
            json.JSONDecodeError, zipfile.BadZipFile, zlib.error, Exception) as exc:
        # any failure to decode (a bit-flipped archive raises zlib.error, a truncated member
        # EOFError, a foreign one anything): one line naming the file
        raise ValueError(f"{path} is not a readable dpsim result file ({_why(exc)})") from None


def _why(exc) -> str:
    text = str(exc).split("\n")[0][:120]
    if "pickled" in text:  # numpy's guess for bytes that are neither .npy nor .npz
        return "not a NumPy .npz archive"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _load(path) -> Result:
    fmt = _load_format(path)
    res = _load_nc(path) if fmt == "nc" else _load_npz(path)
    _check_shapes(path, res)
    return res


def _check_shapes(path, res: Result) -> None:
    """The arrays of a loaded result agree with what :meth:`Result.save` writes: numbers,
    ``steps`` (K,), ``params`` (R, d), each metric and probe record (K, R), ``mean_batch_size``
    (R,); else one ``ValueError`` naming the file and the first array that does not (a member
    replaced or cut, which NumPy may still read as bytes or as another shape)."""

    def numeric(a) -> bool:
        return isinstance(a, np.ndarray) and a.dtype.kind in "biuf"

    def bad(what, a):
        shape = getattr(a, "shape", None)
        kind = f"dtype {a.dtype}, shape {shape}" if isinstance(a, np.ndarray) else type(a).__name__
        raise ValueError(f"{path} is not a consistent dpsim result file ({what} has {kind})")

    if not numeric(res.steps) or res.steps.ndim != 1 or res.steps.size < 1:
        bad("steps, expected (K,) numbers,", res.steps)
    if not numeric(res.params) or res.params.ndim != 2:
        bad("params, expected (R, d) numbers,", res.params)
    K, R = res.steps.size, res.params.shape[0]
    arrays = {m: getattr(res, m) for m in METRICS}
    arrays.update({f"probe {name!r}": a for name, a in (res.records or {}).items()})
    for what, a in arrays.items():
        if (a is None and what != "loss") or (numeric(a) and a.shape == (K, R)):
            continue
        bad(f"{what}, expected ({K}, {R}) numbers,", a)
    mbs = res.mean_batch_size
    if mbs is not None and not (numeric(mbs) and mbs.shape in ((R,), ())):
        bad(f"mean_batch_size, expected ({R},) numbers,", mbs)


def _load_format(path) -> str:
    suffix = os.path.splitext(os.fspath(path))[1]
    if suffix.lower() in SAVE_FORMATS:
        return SAVE_FORMATS[suffix.lower()]
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head.startswith(b"PK"):
        return "npz"
    if head.startswith(b"CDF") or head.startswith(b"\x89HDF"):
        return "nc"
    raise ValueError(f"{path} is not a readable dpsim result file (suffix {suffix!r} is not one "
                     f"of {', '.join(SAVE_FORMATS)} and the content is neither a zip archive nor "
                     "netCDF)")


def _check_format(path, found) -> None:
    if found != FORMAT:
        raise ValueError(f"{path} is not a dpsim result file of format {FORMAT!r} "
                         f"(found {found!r}); rerun to regenerate it")


def _load_npz(path) -> Result:
    with np.load(path, allow_pickle=False) as z:
        if not hasattr(z, "files") or "__meta__" not in z.files:
            raise ValueError(f"{path} is not a dpsim result file (no __meta__ entry)")
        meta = json.loads(str(z["__meta__"]))
        if not isinstance(meta, dict):
            raise ValueError(f"{path} is not a dpsim result file (its __meta__ is not a mapping)")
        _check_format(path, meta.get("format"))
        missing = [k for k in ("steps", "loss", "params") if k not in z.files]
        if missing or not isinstance(meta.get("config"), dict) or not isinstance(meta.get("privacy"), dict):
            raise ValueError(f"{path} is not a complete dpsim result file (missing "
                             f"{', '.join(missing) or 'its config or privacy record'})")
        get = lambda k: np.array(z[k]) if k in z.files else None  # noqa: E731
        records = {k[len("probe__"):]: np.array(z[k]) for k in z.files if k.startswith("probe__")}
        return Result(steps=get("steps"), loss=get("loss"), excess_loss=get("excess_loss"),
                      grad_norm_sq=get("grad_norm_sq"), dist_to_opt=get("dist_to_opt"),
                      records=records, params=get("params"), config=meta["config"],
                      privacy=meta["privacy"], wall_time=meta.get("wall_time", float("nan")),
                      mean_batch_size=get("mean_batch_size"), test_loss=get("test_loss"),
                      test_accuracy=get("test_accuracy"))


def _load_nc(path) -> Result:
    import xarray as xr

    with xr.open_dataset(os.fspath(path)) as ds:
        ds = ds.load()
    attrs = ds.attrs
    if "format" not in attrs:
        raise ValueError(f"{path} is not a dpsim result file (no 'format' attribute)")
    _check_format(path, attrs["format"])
    layout = json.loads(attrs["layout"])
    dtypes = layout["dtypes"]

    def get(var, dims, key=None):
        return np.array(ds[var].transpose(*dims).values, dtype=dtypes[key or var])

    metrics = {k: get(k, ("step", "trial")) for k in layout["metrics"]}
    records = {name: get(var, ("step", "trial")) for name, var in layout["probes"].items()}
    mbs = None
    if layout["mean_batch_size"]:
        mbs = np.array(ds["mean_batch_size"].values, dtype=dtypes["mean_batch_size"])
    wall = attrs.get("wall_time", float("nan"))
    return Result(steps=np.array(ds["step"].values, dtype=dtypes["steps"]),
                  loss=metrics["loss"], excess_loss=metrics.get("excess_loss"),
                  grad_norm_sq=metrics.get("grad_norm_sq"), dist_to_opt=metrics.get("dist_to_opt"),
                  records=records, params=get("params", ("trial", "dim")),
                  config=json.loads(attrs["config"]), privacy=json.loads(attrs["privacy"]),
                  wall_time=float(wall), mean_batch_size=mbs,
                  test_loss=metrics.get("test_loss"), test_accuracy=metrics.get("test_accuracy"))
