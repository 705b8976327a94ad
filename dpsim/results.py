"""Results of :func:`dpsim.simulate`: :class:`Result`, its file format and :func:`load`."""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Result", "load", "FORMAT", "METRICS"]

#: File format written by :meth:`Result.save` (2: privacy records resolved from typed events).
FORMAT = "dpsim-result-2"
METRICS = ("loss", "excess_loss", "grad_norm_sq", "dist_to_opt")


@dataclass
class Result:
    """Recorded trajectories of one :func:`simulate` call (NumPy arrays).

    ``steps`` (K,) record step indices; ``loss``, ``excess_loss``, ``grad_norm_sq``, ``dist_to_opt``
    (K, R); ``records`` probe name → (K, R); ``params`` (R, d) final parameters; ``config`` plain
    dict; ``privacy`` the resolved privacy record (what :meth:`epsilon` accounts,
    :func:`dpsim.accounting.privacy_record`).
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

    @property
    def trials(self) -> int:
        return self.loss.shape[1]

    @property
    def diverged(self) -> np.ndarray:
        """``(R,)`` bool: the trials whose final parameters (or last recorded loss, when recorded)
        are not finite.  Summaries should report the finite trials separately."""
        bad = ~np.all(np.isfinite(self.params), axis=1)
        if self.loss is not None and self.loss.size and "loss" in self.config.get("metrics", ["loss"]):
            bad |= ~np.isfinite(self.loss[-1])
        return bad

    def epsilon(self, delta: float, *, accountant: str | None = None):
        """(ε, δ) privacy spent by the run, from the optimizer's declared privacy events and the
        sampler (:func:`dpsim.accounting.epsilon_of_record` of :attr:`privacy`).

        ``accountant``: ``"pld"`` or ``"rdp"``; default the run's (``privacy["accountant"]``,
        ``"pld"`` unless ``simulate(..., accountant=...)`` chose another).  Returns a float when
        every trial spent the same, else an ``(R,)`` array (per-trial noise multipliers).  Runs
        whose optimizer declares ``NonPrivate`` return ``inf``.  :meth:`privacy_report` says which
        accountant, adjacency and sampling the number is for.
        """
        from . import accounting

        if accountant is None:
            accountant = self.privacy.get("accountant", "pld")
        return accounting.epsilon_of_record(self.privacy, delta, accountant=accountant)

    def privacy_report(self, delta: float, *, accountant: str | None = None) -> dict:
        """``{"epsilon", "delta", "accountant", "adjacency", "sampling", "participation",
        "correlated", "private", "note"}``: ε with what it means (the accountant that computed it,
        the neighbouring relation, the sampler and the participation it implies, and — for
        correlated noise (DP-MF) — ``"amplified"``/``"unamplified"``/``"mixed"``, else ``None``).
        A ctCDP run reports its own conversion ([L2P] Thm A.1) as the accountant."""
        acc = accountant or self.privacy.get("accountant", "pld")
        eps = self.epsilon(delta, accountant=acc)
        kind = self.privacy.get("kind")
        return {"epsilon": eps, "delta": float(delta),
                "accountant": "tcdp (L2P Thm A.1)" if kind == "ctcdp" else acc,
                "adjacency": self.privacy.get("adjacency", self.config.get("adjacency", "n/a")),
                "sampling": self.privacy.get("sampling", self.config.get("sampling")),
                "participation": self.privacy.get("participation"),
                "correlated": self.privacy.get("correlated_accounting"),
                "private": bool(self.privacy.get("private")), "note": self.privacy.get("note", "")}

    def to_xarray(self):
        """Labelled ``xarray.Dataset`` with dims ``step`` × ``trial`` (and ``dim`` for params);
        per-trial hyperparameters become ``trial`` coordinates; config in ``attrs``."""
        import xarray as xr

        data = {k: (("step", "trial"), getattr(self, k)) for k in METRICS if getattr(self, k) is not None}
        for k, v in self.records.items():
            data[f"probe_{k}"] = (("step", "trial"), v)
        data["params"] = (("trial", "dim"), self.params)
        coords = {"step": self.steps, "trial": np.arange(self.trials)}
        for k, v in self.config.get("hyperparameters", {}).items():
            if isinstance(v, list) and len(v) == self.trials:
                coords[k] = ("trial", np.asarray(v, dtype=float))
        attrs = {"config": json.dumps(self.config), "privacy": json.dumps(self.privacy)}
        return xr.Dataset(data, coords=coords, attrs=attrs)

    def save(self, path) -> None:
        """Write the result to ``path`` (NumPy ``.npz`` with the config as JSON); see :func:`load`."""
        arrays = {"steps": self.steps, "loss": self.loss, "params": self.params}
        if self.grad_norm_sq is not None:
            arrays["grad_norm_sq"] = self.grad_norm_sq
        if self.excess_loss is not None:
            arrays["excess_loss"] = self.excess_loss
        if self.dist_to_opt is not None:
            arrays["dist_to_opt"] = self.dist_to_opt
        for k, v in self.records.items():
            arrays[f"probe__{k}"] = v
        if self.mean_batch_size is not None:
            arrays["mean_batch_size"] = np.asarray(self.mean_batch_size)
        meta = {"config": self.config, "privacy": self.privacy, "wall_time": self.wall_time,
                "format": FORMAT}
        with open(path, "wb") as fh:
            np.savez_compressed(fh, __meta__=np.array(json.dumps(meta)), **arrays)


def load(path) -> Result:
    """Read a :class:`Result` written by :meth:`Result.save`.

    A missing, truncated, corrupt or foreign file raises one ``ValueError`` naming the file."""
    try:
        return _load(path)
    except ValueError as exc:
        if str(path) in str(exc):
            raise
        raise ValueError(f"{path} is not a readable dpsim result file ({_why(exc)})") from None
    except (OSError, EOFError, KeyError, TypeError, AttributeError, json.JSONDecodeError,
            zipfile.BadZipFile) as exc:
        raise ValueError(f"{path} is not a readable dpsim result file ({_why(exc)})") from None


def _why(exc) -> str:
    text = str(exc).split("\n")[0][:120]
    if "pickled" in text:  # numpy's guess for bytes that are neither .npy nor .npz
        return "not a NumPy .npz archive"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _load(path) -> Result:
    with np.load(path, allow_pickle=False) as z:
        if not hasattr(z, "files") or "__meta__" not in z.files:
            raise ValueError(f"{path} is not a dpsim result file (no __meta__ entry)")
        meta = json.loads(str(z["__meta__"]))
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ValueError(f"{path} is not a dpsim result file of format {FORMAT!r} "
                             f"(found {meta.get('format')!r}); rerun to regenerate it")
        get = lambda k: np.array(z[k]) if k in z.files else None  # noqa: E731
        records = {k[len("probe__"):]: np.array(z[k]) for k in z.files if k.startswith("probe__")}
        return Result(steps=get("steps"), loss=get("loss"), excess_loss=get("excess_loss"),
                      grad_norm_sq=get("grad_norm_sq"), dist_to_opt=get("dist_to_opt"),
                      records=records, params=get("params"), config=meta["config"],
                      privacy=meta["privacy"], wall_time=meta.get("wall_time", float("nan")),
                      mean_batch_size=get("mean_batch_size"))
