"""Reference traces for pyrite-tune's trial schedulers, from the real Ray Tune and Optuna classes.

Run: python3 reference/gen_tune_schedulers.py
Writes (compact JSON, each with a "meta" object first):
  reference/data/tune/asha_traces.json            ray.tune.schedulers.AsyncHyperBandScheduler
  reference/data/tune/hyperband_traces.json       ray.tune.schedulers.HyperBandScheduler
  reference/data/tune/hyperband_bohb_traces.json  ray.tune.schedulers.HyperBandForBOHB
  reference/data/tune/median_stopping_traces.json ray.tune.schedulers.MedianStoppingRule
  reference/data/tune/median_pruner_traces.json   optuna.pruners.MedianPruner (ask / report /
                                                  should_prune / tell)

No Ray cluster is started: the schedulers are driven directly with mock trials (trial_id, status,
is_saving=False, last_result) and a mock controller (the `TuneController` argument). Every metric
sequence comes from a seeded Python `random.Random`: each trial is a noisy decaying curve
(level + amp * exp(-k / tau) + noise) with its own level; some trials are quantised to 0.01 (ties
inside a rung) and some are exact copies of another trial (ties across trials). No NaN and no
infinities. Reports from several trials are interleaved at random, as a parallel run would.
Every input float is written exactly (already short: metric values rounded to 6 decimals, times
to 6 decimals, so `repr` round-trips); derived floats (cutoffs) are rounded to 10 significant
digits.

Common op format (one list per case, in call order):
  {"op":"add","trial":"t3"}                          scheduler.on_trial_add
  {"op":"result","trial":"t3","t":T,"value":V,"decision":D}
        scheduler.on_trial_result(controller, trial, {time_attr: T, metric: V}); D is the returned
        string: CONTINUE / PAUSE / STOP / NOOP.
  {"op":"complete","trial":"t3","t":T,"value":V,"cause":"stop"|"end"}
        scheduler.on_trial_complete(controller, trial, last_result) with that trial's last result
        (T, V). Ray's controller calls it (through TuneController.stop_trial) right after a STOP
        decision ("stop") and when a trial ends by itself after its last result ("end").

ASHA cases use only add / result / complete (ASHA never pauses and never calls the controller);
"add" carries "bracket": the index into scheduler._brackets that Ray drew with
np.random.choice (a replay forces it). The trace file of the runner-based schedulers (HyperBand,
HyperBandForBOHB, MedianStoppingRule) also has "choose", "controller", "remove" and "end" ops and
a "runner" text that says exactly how the ops were produced.
"""
import json
import math
import os
import random
import sys
import time
from importlib.metadata import version

import numpy as np

import optuna
from optuna.trial import TrialState
from ray.tune.experiment import Trial
from ray.tune.schedulers import (
    AsyncHyperBandScheduler,
    HyperBandForBOHB,
    HyperBandScheduler,
    MedianStoppingRule,
)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "data", "tune")
CMD = "python3 reference/gen_tune_schedulers.py"


def meta(extra=None):
    m = {
        "command": CMD,
        "python": sys.version.split()[0],
        "versions": {p: version(p) for p in ("ray", "optuna", "numpy")},
    }
    if extra:
        m.update(extra)
    return m


def r10(x):
    """Round a derived float to 10 significant digits (None / non-finite passed through)."""
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x):
        return None
    return float(f"{x:.10g}")


def write(name, obj):
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.join(OUT_DIR, name)
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"), allow_nan=False)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


# --------------------------------------------------------------------------------------------
# Metric curves
# --------------------------------------------------------------------------------------------


def make_curves(rng, n, length, mode, quant_every=5, copy_pairs=((7, 2), (13, 4)), base=2.5):
    """Per trial, a list of `length` metric values (value of the k-th report, k = 0..length-1).

    loss_k = level + amp * exp(-k / tau) + noise * N(0, 1), clipped at 0.001; "max" mode reports
    base - loss. Every `quant_every`-th trial (index % quant_every == 1) is rounded to 0.01, the
    rest to 1e-6; trial a of each (a, b) in copy_pairs is an exact copy of trial b.
    """
    curves = []
    for i in range(n):
        level = rng.uniform(0.05, 1.0)
        amp = rng.uniform(0.3, 2.0)
        tau = rng.uniform(2.0, 40.0)
        noise = rng.uniform(0.0, 0.04)
        digits = 2 if (quant_every and i % quant_every == 1) else 6
        vals = []
        for k in range(length):
            loss = max(0.001, level + amp * math.exp(-k / tau) + noise * rng.gauss(0.0, 1.0))
            v = loss if mode == "min" else base - loss
            vals.append(round(v, digits))
        curves.append(vals)
    for a, b in copy_pairs:
        if a < n and b < n:
            curves[a] = list(curves[b])
    return curves


def make_times(rng, n, length, dt_lo=0.6, dt_hi=1.8):
    """Per trial, cumulative float times (time_total_s) of each report, in whole microseconds."""
    out = []
    for _ in range(n):
        base = rng.uniform(dt_lo, dt_hi)
        us = 0
        ts = []
        for _k in range(length):
            us += int(round(base * rng.uniform(0.8, 1.2) * 1e6))
            ts.append(us / 1e6)
        out.append(ts)
    return out


class MockTrial:
    """What Ray's schedulers touch on a Trial: trial_id, status, is_saving, last_result."""

    def __init__(self, tid, index):
        self.trial_id = tid
        self.index = index
        self.status = Trial.PENDING
        self.is_saving = False
        self.last_result = {}
        self.config = {}
        self.done_steps = 0
        self.length = 0

    def is_finished(self):
        return self.status in (Trial.TERMINATED, Trial.ERROR)

    def __repr__(self):
        return self.trial_id


# --------------------------------------------------------------------------------------------
# ASHA
# --------------------------------------------------------------------------------------------

ASHA_CASES = [
    # name, options, n_trials, concurrency, seed, extra
    ("asha_default_min", dict(mode="min"), 20, 4, 11, {}),
    ("asha_default_max", dict(mode="max"), 20, 4, 12, {}),
    ("asha_gp2_rf3_max27", dict(mode="min", grace_period=2, reduction_factor=3, max_t=27), 20, 3, 13, {}),
    ("asha_brackets3", dict(mode="max", brackets=3), 24, 4, 14, {}),
    (
        "asha_no_stop_last",
        dict(mode="min", grace_period=1, reduction_factor=3, max_t=27, stop_last_trials=False),
        20, 3, 15, {"length_over": 4},
    ),
    (
        "asha_time_total_s",
        dict(mode="min", time_attr="time_total_s", grace_period=2.0, reduction_factor=3, max_t=60.0),
        20, 4, 16, {"time": True},
    ),
    ("asha_rf2_ties_max16", dict(mode="max", reduction_factor=2, max_t=16, grace_period=1), 22, 3, 17, {"quant_all": True}),
    ("asha_max_t_243_rf3", dict(mode="min", reduction_factor=3, max_t=243, grace_period=1, brackets=2), 20, 4, 18, {"short": True}),
]

ASHA_DEFAULTS = dict(
    time_attr="training_iteration", metric=None, mode=None, max_t=100, grace_period=1,
    reduction_factor=4, brackets=1, stop_last_trials=True,
)


def run_asha_case(name, opts, n, conc, seed, extra):
    rng = random.Random(seed)
    np.random.seed(seed)  # Ray draws the bracket of each new trial with np.random.choice
    options = dict(ASHA_DEFAULTS)
    options.update(opts)
    options["metric"] = "loss" if options["mode"] == "min" else "acc"
    sched = AsyncHyperBandScheduler(**options)
    time_attr = options["time_attr"]
    max_t = options["max_t"]
    is_time = extra.get("time", False)
    max_len = (int(max_t / 0.45) + 5) if is_time else (int(max_t) + extra.get("length_over", 0) + 5)
    curves = make_curves(rng, n, max_len, options["mode"])
    if extra.get("quant_all"):
        curves = [[round(v, 1) for v in c] for c in curves]
    times = make_times(rng, n, max_len) if is_time else None

    # Each trial's own length (when it ends by itself): most run until ASHA stops them; a few
    # end early; with stop_last_trials=False they run a little past max_t.
    trials = []
    for i in range(n):
        tr = MockTrial(f"t{i}", i)
        if is_time:
            # stop at max_t (time >= max_t) or end earlier
            tr.length = max_len
        else:
            tr.length = int(max_t) + extra.get("length_over", 0)
        if i in (5, 17):
            tr.length = 3 if i == 5 else 9
        trials.append(tr)

    # Capture the cutoff each on_result computes (for debugging a replay; decisions are exact).
    captured = []
    for bi, b in enumerate(sched._brackets):
        orig = b.cutoff

        def cut(recorded, _orig=orig, _bi=bi, _b=b):
            c = _orig(recorded)
            milestone = next(m for m, rec in _b._rungs if rec is recorded)
            captured.append((_bi, milestone, c, len(recorded)))
            return c

        b.cutoff = cut

    events = []
    pending = list(trials)
    running = []

    def result_of(tr):
        k = tr.done_steps
        t = times[tr.index][k] if is_time else k + 1
        v = curves[tr.index][k]
        res = {time_attr: t, options["metric"]: v}
        if time_attr != "training_iteration":
            res["training_iteration"] = k + 1
        return res

    while pending or running:
        while len(running) < conc and pending:
            tr = pending.pop(0)
            sched.on_trial_add(None, tr)
            br = sched._brackets.index(sched._trial_info[tr.trial_id])
            events.append({"op": "add", "trial": tr.trial_id, "bracket": br})
            tr.status = Trial.RUNNING
            running.append(tr)
        tr = rng.choice(running)
        res = result_of(tr)
        captured.clear()
        decision = sched.on_trial_result(None, tr, res)
        ev = {"op": "result", "trial": tr.trial_id, "t": res[time_attr], "value": res[options["metric"]], "decision": decision}
        if captured:
            bi, milestone, c, nrec = captured[-1]
            ev["rung"] = milestone
            ev["cutoff"] = r10(c)
            ev["n_recorded"] = nrec
        events.append(ev)
        tr.done_steps += 1
        tr.last_result = res
        if decision == "STOP" or tr.done_steps >= tr.length:
            captured.clear()
            sched.on_trial_complete(None, tr, res)
            events.append({
                "op": "complete", "trial": tr.trial_id, "t": res[time_attr], "value": res[options["metric"]],
                "cause": "stop" if decision == "STOP" else "end",
            })
            tr.status = Trial.TERMINATED
            running.remove(tr)
    rungs = [[[m for m, _ in b._rungs][::-1]] for b in sched._brackets]
    final = [
        {"bracket": bi, "rungs": [{"milestone": m, "recorded": {k: v for k, v in rec.items()}} for m, rec in b._rungs[::-1]]}
        for bi, b in enumerate(sched._brackets)
    ]
    # recorded values are metric_op * value (negated for mode=min)
    for fb in final:
        for rg in fb["rungs"]:
            rg["recorded"] = {k: r10(v) for k, v in rg["recorded"].items()}
    return {
        "name": name,
        "options": options,
        "concurrency": conc,
        "seed": seed,
        "rung_milestones": [r[0] for r in rungs],
        "events": events,
        "final_rungs": final,
    }


def gen_asha():
    cases = [run_asha_case(*c) for c in ASHA_CASES]
    doc = {
        "meta": meta({"scheduler": "ray.tune.schedulers.AsyncHyperBandScheduler"}),
        "format": (
            "events in call order. add: on_trial_add (bracket = index into scheduler._brackets "
            "that Ray drew with np.random.choice(len(brackets), p=softmax(rung counts)); force it in a "
            "replay). result: on_trial_result(None, trial, {time_attr: t, metric: value}) returned "
            "decision; when the bracket computed a cutoff, 'rung' is the milestone it was computed "
            "for, 'cutoff' = np.nanpercentile(recorded values, (1 - 1/rf) * 100) in the "
            "metric_op-signed space (value for max, -value for min) before this trial's value is "
            "recorded, 'n_recorded' how many values that rung had. complete: on_trial_complete(None, "
            "trial, last result), called after every STOP (cause stop, as Ray's controller does via "
            "stop_trial) and when the trial's own run ends (cause end). A trial that got STOP reports "
            "no more. Runner: up to 'concurrency' trials run at once, started (add) in index order as "
            "slots free; each step one running trial chosen by a seeded random.Random reports its "
            "next result. final_rungs: each bracket's rungs (ascending milestone) with the recorded "
            "signed values at the end."
        ),
        "cases": cases,
    }
    write("asha_traces.json", doc)
    return cases


# --------------------------------------------------------------------------------------------
# Runner-based schedulers: HyperBand, HyperBandForBOHB, MedianStoppingRule
# --------------------------------------------------------------------------------------------

RUNNER_TEXT = (
    "All n trials are created up front: for i in 0..n, op add then scheduler.on_trial_add(ctrl, "
    "t_i); every trial starts PENDING. Then loop: (1) fill: while fewer than `concurrency` trials "
    "are RUNNING, call scheduler.choose_trial_to_run(ctrl) (op choose, 'trial' = returned id or "
    "null); null ends the filling, otherwise that trial becomes RUNNING. (2) if no trial is "
    "RUNNING, stop (op end lists the trials not TERMINATED with their status). (3) pick one "
    "RUNNING trial with a seeded random.Random (rng.choice over the running trials in index "
    "order); if it has already made all `length` reports (it was paused on its last one and "
    "resumed) it ends: op complete cause end with resumed=true (scheduler.on_trial_complete(ctrl, "
    "trial, last_result)), status TERMINATED, back to (1). Otherwise it reports its next result: op "
    "result, decision = scheduler.on_trial_result(ctrl, trial, {time_attr: t, metric: value}); "
    "the trial's last_result becomes this result after the call; then the decision is executed: "
    "CONTINUE keeps it RUNNING (and if that was its last report it ends at once: op complete cause "
    "end, TERMINATED); PAUSE sets it PAUSED; STOP runs the controller's stop_trial on it (it is "
    "RUNNING, so: op complete cause stop, scheduler.on_trial_complete(ctrl, trial, last_result), "
    "then TERMINATED); NOOP does nothing. The mock controller: get_trials() = all trials in index "
    "order; get_live_trials() = those not TERMINATED/ERROR; stop_trial(t) called by the scheduler "
    "logs op controller call stop_trial (with the trial's status at the call) and does what Ray's "
    "TuneController.stop_trial does: TERMINATED/ERROR -> nothing; PENDING/PAUSED -> op remove + "
    "scheduler.on_trial_remove(ctrl, t); RUNNING -> op complete cause stop + "
    "scheduler.on_trial_complete(ctrl, t, t.last_result); then status TERMINATED. pause_trial(t) "
    "logs call pause_trial and sets PAUSED. search_alg.searcher.on_pause(id) / on_unpause(id) "
    "(HyperBandForBOHB) log calls searcher.on_pause / searcher.on_unpause and do nothing else. "
    "Every op is logged when the call starts (outputs such as decision / chosen trial are filled "
    "in when it returns), so the controller calls a scheduler makes inside a call come right after "
    "that call's op; ops logged while inside a controller call carry nested=true (a replay's mock "
    "controller produces them itself; they are not runner inputs). Trial status is never "
    "'is_saving'."
)


class MockSearcher:
    def __init__(self, ctrl):
        self.ctrl = ctrl

    def on_pause(self, trial_id):
        self.ctrl.log({"op": "controller", "call": "searcher.on_pause", "trial": trial_id})

    def on_unpause(self, trial_id):
        self.ctrl.log({"op": "controller", "call": "searcher.on_unpause", "trial": trial_id})


class _SearchAlg:
    def __init__(self, searcher):
        self.searcher = searcher


class MockController:
    def __init__(self, trials, time_attr, metric):
        self.trials = trials
        self.sched = None
        self.ops = []
        self.depth = 0
        self.time_attr = time_attr
        self.metric = metric
        self.search_alg = _SearchAlg(MockSearcher(self))

    def log(self, op):
        if self.depth > 0:
            op["nested"] = True
        self.ops.append(op)
        return op

    def get_trials(self):
        return list(self.trials)

    def get_live_trials(self):
        return [t for t in self.trials if t.status not in (Trial.TERMINATED, Trial.ERROR)]

    def _complete(self, trial, cause, resumed=False):
        lr = trial.last_result
        op = {"op": "complete", "trial": trial.trial_id, "t": lr.get(self.time_attr), "value": lr.get(self.metric), "cause": cause}
        if resumed:
            op["resumed"] = True
        self.log(op)
        self.sched.on_trial_complete(self, trial, lr)
        trial.status = Trial.TERMINATED

    def stop_impl(self, trial):
        """Ray's TuneController.stop_trial."""
        if trial.status in (Trial.TERMINATED, Trial.ERROR):
            return
        if trial.status in (Trial.PENDING, Trial.PAUSED):
            self.log({"op": "remove", "trial": trial.trial_id})
            self.sched.on_trial_remove(self, trial)
            trial.status = Trial.TERMINATED
        elif trial.status == Trial.RUNNING:
            self._complete(trial, "stop")

    def stop_trial(self, trial):
        self.log({"op": "controller", "call": "stop_trial", "trial": trial.trial_id, "status": trial.status})
        self.depth += 1
        try:
            self.stop_impl(trial)
        finally:
            self.depth -= 1

    def pause_trial(self, trial, should_checkpoint=True):
        self.log({"op": "controller", "call": "pause_trial", "trial": trial.trial_id, "status": trial.status})
        trial.status = Trial.PAUSED


def run_runner(sched, n, conc, seed, curves, times, lengths, time_attr, metric, max_results=20000, script=None):
    """script: optional list of trial indices picked in order (instead of the seeded RNG)."""
    rng = random.Random(seed * 7919 + 1)
    script = list(script or [])
    trials = []
    for i in range(n):
        tr = MockTrial(f"t{i}", i)
        tr.length = lengths[i]
        trials.append(tr)
    ctrl = MockController(trials, time_attr, metric)
    ctrl.sched = sched
    for tr in trials:
        ctrl.log({"op": "add", "trial": tr.trial_id})
        sched.on_trial_add(ctrl, tr)
    n_results = 0
    while True:
        while sum(t.status == Trial.RUNNING for t in trials) < conc:
            op = ctrl.log({"op": "choose", "trial": None})
            ch = sched.choose_trial_to_run(ctrl)
            op["trial"] = ch.trial_id if ch is not None else None
            if ch is None:
                break
            assert ch.status in (Trial.PENDING, Trial.PAUSED), (ch, ch.status)
            ch.status = Trial.RUNNING
        running = [t for t in trials if t.status == Trial.RUNNING]
        if not running:
            left = [{"trial": t.trial_id, "status": t.status} for t in trials if t.status != Trial.TERMINATED]
            ctrl.log({"op": "end", "not_terminated": left})
            break
        if script:
            tr = trials[script.pop(0)]
            assert tr.status == Trial.RUNNING, (tr, tr.status)
        else:
            tr = rng.choice(running)
        if tr.done_steps >= tr.length:
            ctrl._complete(tr, "end", resumed=True)
            continue
        k = tr.done_steps
        t = times[tr.index][k] if times is not None else k + 1
        res = {time_attr: t, metric: curves[tr.index][k]}
        if time_attr != "training_iteration":
            res["training_iteration"] = k + 1
        op = ctrl.log({"op": "result", "trial": tr.trial_id, "t": t, "value": res[metric], "decision": None})
        decision = sched.on_trial_result(ctrl, tr, res)
        op["decision"] = decision
        tr.done_steps += 1
        tr.last_result = res
        n_results += 1
        if decision == "STOP":
            ctrl.stop_impl(tr)
        elif decision == "PAUSE":
            tr.status = Trial.PAUSED
        elif decision == "CONTINUE":
            if tr.done_steps >= tr.length:
                ctrl._complete(tr, "end")
        elif decision == "NOOP":
            pass
        else:
            raise ValueError(decision)
        if n_results > max_results:
            raise RuntimeError("runner did not finish")
    return ctrl.ops, trials


HB_DEFAULTS = dict(time_attr="training_iteration", metric=None, mode=None, max_t=81, reduction_factor=3, stop_last_trials=True)

HB_CASES = [
    # name, class, options, n, concurrency, seed, early-enders {index: length}
    ("hyperband_default_min", "HyperBandScheduler", dict(mode="min"), 14, 2, 21, {}),
    ("hyperband_default_max", "HyperBandScheduler", dict(mode="max"), 8, 3, 22, {}),
    ("hyperband_max27_rf3_min", "HyperBandScheduler", dict(mode="min", max_t=27), 22, 2, 23, {}),
    ("hyperband_max27_rf3_max", "HyperBandScheduler", dict(mode="max", max_t=27), 14, 4, 24, {}),
    ("hyperband_max27_rf3_early_end", "HyperBandScheduler", dict(mode="min", max_t=27), 12, 2, 25, {5: 2, 8: 5}),
    ("hyperband_max27_rf3_late_end", "HyperBandScheduler", dict(mode="min", max_t=27), 14, 3, 28, {5: 12, 7: 15, 12: 5}),
    ("hyperband_max9_rf3_stuck", "HyperBandScheduler", dict(mode="max", max_t=9), 17, 3, 43, {8: 9, 9: 2, 10: 9, 11: 2, 12: 9, 13: 2, 14: 9, 15: 2, 16: 9, 4: 5}),
    ("hyperband_max100_rf4", "HyperBandScheduler", dict(mode="min", max_t=100, reduction_factor=4), 14, 2, 26, {}),
    ("hyperband_max27_no_stop_last", "HyperBandScheduler", dict(mode="max", max_t=27, stop_last_trials=False), 12, 2, 27, {"all": 30}),
    ("bohb_default_min", "HyperBandForBOHB", dict(mode="min"), 12, 2, 31, {}),
    ("bohb_max27_rf3_max", "HyperBandForBOHB", dict(mode="max", max_t=27), 20, 2, 32, {}),
    ("bohb_max9_rf3_min", "HyperBandForBOHB", dict(mode="min", max_t=9), 20, 3, 33, {}),
]


def run_hb_cases(case_list):
    cases = []
    for name, cls_name, opts, n, conc, seed, early in case_list:
        rng = random.Random(seed)
        options = dict(HB_DEFAULTS)
        options.update(opts)
        options["metric"] = "loss" if options["mode"] == "min" else "acc"
        cls = {"HyperBandScheduler": HyperBandScheduler, "HyperBandForBOHB": HyperBandForBOHB}[cls_name]
        sched = cls(**options)
        max_t = options["max_t"]
        early = dict(early)
        length_all = early.pop("all", None)
        lengths = [length_all or max_t] * n
        for i, L in early.items():
            lengths[i] = L
        curves = make_curves(rng, n, max(lengths) + 1, options["mode"])
        ops, trials = run_runner(sched, n, conc, seed, curves, None, lengths, options["time_attr"], options["metric"])
        brackets = []
        for bi, band in enumerate(sched._hyperbands):
            for pos, b in enumerate(band):
                s = pos if cls_name == "HyperBandScheduler" else sched._s_max_1 - pos - 1
                if b is None:
                    brackets.append({"band": bi, "s": s, "none": True})
                    continue
                brackets.append({
                    "band": bi, "s": s, "n0": b._n0, "r0": b._r0, "trials": [t.trial_id for t in b._all_trials],
                    "final_n": b._n, "final_r": b._r, "halves_left": b._halves, "total_work": b._total_work,
                })
        cases.append({
            "name": name,
            "scheduler": cls_name,
            "options": options,
            "n_trials": n,
            "concurrency": conc,
            "seed": seed,
            "lengths": lengths,
            "s_max_1": sched._s_max_1,
            "brackets": brackets,
            "ops": ops,
        })
    return cases


HB_FORMAT = (
    "ops as described in 'runner'. result ops carry t (time_attr value, here "
    "training_iteration = the trial's report count) and value (the metric). lengths[i]: how "
    "many reports trial t_i makes before it ends by itself. brackets: every bracket created "
    "(band index, s, n0 = max trials, r0 = first milestone, its trials in add order, and its "
    "final n / r / halvings left / total work), in creation order."
)


def gen_hyperband():
    hb = run_hb_cases([c for c in HB_CASES if c[1] == "HyperBandScheduler"])
    write("hyperband_traces.json", {
        "meta": meta({"scheduler": "ray.tune.schedulers.HyperBandScheduler"}),
        "runner": RUNNER_TEXT,
        "format": HB_FORMAT,
        "cases": hb,
    })
    bohb = run_hb_cases([c for c in HB_CASES if c[1] == "HyperBandForBOHB"])
    write("hyperband_bohb_traces.json", {
        "meta": meta({"scheduler": "ray.tune.schedulers.HyperBandForBOHB"}),
        "runner": RUNNER_TEXT,
        "format": HB_FORMAT + " HyperBandForBOHB calls tune_controller.search_alg.searcher.on_pause / on_unpause.",
        "cases": bohb,
    })
    return hb + bohb


MSR_DEFAULTS = dict(time_attr="time_total_s", metric=None, mode=None, grace_period=60.0, min_samples_required=3, min_time_slice=0, hard_stop=True)

MSR_CASES = [
    # name, options, n, concurrency, seed, float times?
    ("msr_all_running_min", dict(mode="min", grace_period=5.0), 12, 12, 41, True),
    ("msr_conc3_min", dict(mode="min", grace_period=4.0), 12, 3, 42, True),
    ("msr_conc3_max_soft", dict(mode="max", grace_period=4.0, hard_stop=False, min_time_slice=3), 10, 3, 43, True),
    ("msr_iter_max_min2", dict(mode="max", time_attr="training_iteration", grace_period=3, min_samples_required=2), 12, 4, 44, False),
    ("msr_iter_min_slice", dict(mode="min", time_attr="training_iteration", grace_period=2, min_samples_required=4, min_time_slice=5), 14, 5, 45, False),
]


# A hand-made case where Ray's duplicate append in on_trial_complete decides: t0 reports 3.0, 1.0
# and ends (its history becomes 3.0, 1.0, 1.0); at t = 2, t1's best is 1.8 and t0's running mean
# is (3 + 1 + 1) / 3 = 1.667 < 1.8 -> STOP (without the duplicate it would be 2.0 -> CONTINUE).
MSR_SCRIPTED = [
    ("msr_duplicate_complete", dict(mode="min", time_attr="training_iteration", grace_period=1, min_samples_required=1),
     [[3.0, 1.0], [2.9, 1.8, 1.7]], [0, 0, 1, 1]),
]


def gen_msr():
    cases = []
    todo = [(name, opts, n, conc, seed, ft, None, None) for name, opts, n, conc, seed, ft in MSR_CASES]
    todo += [(name, opts, len(c), len(c), 0, False, c, sc) for name, opts, c, sc in MSR_SCRIPTED]
    for name, opts, n, conc, seed, float_times, fixed, script in todo:
        rng = random.Random(seed)
        options = dict(MSR_DEFAULTS)
        options.update(opts)
        options["metric"] = "loss" if options["mode"] == "min" else "acc"
        sched = MedianStoppingRule(**options)
        if fixed is not None:
            curves = fixed
            lengths = [len(c) for c in fixed]
            times = None
        else:
            lengths = [rng.randint(12, 30) for _ in range(n)]
            curves = make_curves(rng, n, max(lengths) + 1, options["mode"], quant_every=4, copy_pairs=((9, 3),))
            times = make_times(rng, n, max(lengths) + 1, 0.5, 1.5) if float_times else None
        ops, trials = run_runner(sched, n, conc, seed, curves, times, lengths, options["time_attr"], options["metric"], script=script)
        cases.append({
            "name": name,
            "options": options,
            "n_trials": n,
            "concurrency": conc,
            "seed": seed,
            "lengths": lengths,
            "stopped": sorted((t.trial_id for t in sched._stopped_trials), key=lambda s: int(s[1:])),
            "ops": ops,
        })
    doc = {
        "meta": meta({"scheduler": "ray.tune.schedulers.MedianStoppingRule"}),
        "runner": RUNNER_TEXT,
        "format": (
            "ops as described in 'runner'; scheduler.choose_trial_to_run is FIFOScheduler's (first "
            "PENDING in index order, else first PAUSED). t = time_attr value (float seconds for "
            "time_total_s, the report count for training_iteration). Note: Ray's "
            "on_trial_complete appends the last result to the trial's history a second time (it "
            "was already appended by on_trial_result), which changes later running means; a replay "
            "must do the same. 'stopped': scheduler._stopped_trials at the end."
        ),
        "cases": cases,
    }
    write("median_stopping_traces.json", doc)
    return cases


# --------------------------------------------------------------------------------------------
# Optuna MedianPruner
# --------------------------------------------------------------------------------------------

MP_DEFAULTS = dict(n_startup_trials=5, n_warmup_steps=0, interval_steps=1, n_min_trials=1)

MP_CASES = [
    # name, direction, options, n_trials, concurrency, seed, sparse steps?
    ("median_pruner_default_minimize", "minimize", {}, 30, 4, 51, False),
    ("median_pruner_default_maximize", "maximize", {}, 30, 4, 52, False),
    ("median_pruner_s2_w3_i2_minimize", "minimize", dict(n_startup_trials=2, n_warmup_steps=3, interval_steps=2), 30, 3, 53, False),
    ("median_pruner_s2_w3_i2_maximize", "maximize", dict(n_startup_trials=2, n_warmup_steps=3, interval_steps=2), 30, 3, 54, False),
    ("median_pruner_sparse_nmin3_minimize", "minimize", dict(n_startup_trials=3, n_warmup_steps=2, interval_steps=3, n_min_trials=3), 30, 4, 55, True),
    ("median_pruner_sequential_maximize", "maximize", dict(n_startup_trials=3, n_warmup_steps=1), 20, 1, 56, False),
]


def gen_median_pruner():
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    cases = []
    for name, direction, opts, n_trials, conc, seed, sparse in MP_CASES:
        rng = random.Random(seed)
        options = dict(MP_DEFAULTS)
        options.update(opts)
        pruner = optuna.pruners.MedianPruner(**options)
        study = optuna.create_study(direction=direction, pruner=pruner, sampler=optuna.samplers.RandomSampler(seed=seed))
        mode = "min" if direction == "minimize" else "max"
        n_steps = [rng.randint(8, 20) for _ in range(n_trials)]
        curves = make_curves(rng, n_trials, 25, mode, quant_every=4, copy_pairs=((11, 6), (17, 2)), base=1.0)
        steps_of = []
        for i in range(n_trials):
            if sparse:
                s, steps = 0, []
                while len(steps) < n_steps[i]:
                    steps.append(s)
                    s += rng.choice([1, 1, 2, 3])
                steps_of.append(steps)
            else:
                steps_of.append(list(range(n_steps[i])))
        ops = []
        active = []  # (trial, index, next report position)
        next_idx = 0
        while next_idx < n_trials or active:
            while len(active) < conc and next_idx < n_trials:
                tr = study.ask()
                assert tr.number == next_idx
                ops.append({"op": "ask", "trial": tr.number})
                active.append([tr, next_idx, 0])
                next_idx += 1
            slot = rng.randrange(len(active))
            tr, i, pos = active[slot]
            step = steps_of[i][pos]
            v = curves[i][pos]
            tr.report(v, step)
            pr = tr.should_prune()
            ops.append({"op": "report", "trial": tr.number, "step": step, "value": v, "should_prune": bool(pr)})
            active[slot][2] += 1
            if pr:
                study.tell(tr, state=TrialState.PRUNED)
                ops.append({"op": "tell", "trial": tr.number, "state": "PRUNED", "value": None})
                active.pop(slot)
            elif active[slot][2] >= len(steps_of[i]):
                study.tell(tr, v)
                ops.append({"op": "tell", "trial": tr.number, "state": "COMPLETE", "value": v})
                active.pop(slot)
        states = {}
        for t in study.get_trials(deepcopy=False):
            states[t.state.name] = states.get(t.state.name, 0) + 1
        cases.append({
            "name": name,
            "direction": direction,
            "options": options,
            "n_trials": n_trials,
            "concurrency": conc,
            "seed": seed,
            "ops": ops,
            "final_states": states,
        })
    doc = {
        "meta": meta({"pruner": "optuna.pruners.MedianPruner"}),
        "format": (
            "ops in call order on one in-memory study (RandomSampler, no parameters suggested). "
            "ask: study.ask() (trial = its number). report: trial.report(value, step) then "
            "trial.should_prune() -> should_prune. tell: study.tell(trial, value) (COMPLETE, after "
            "the trial's last report) or study.tell(trial, state=PRUNED) right after a report whose "
            "should_prune was true (value null; Optuna stores the last intermediate value). Up to "
            "'concurrency' trials are open at once, asked in number order as slots free; each step "
            "a seeded random.Random picks which open trial reports next. The pruner only compares "
            "against COMPLETE trials (not PRUNED ones)."
        ),
        "cases": cases,
    }
    write("median_pruner_traces.json", doc)
    return cases


def summary(kind, cases, key):
    for c in cases:
        evs = c[key]
        counts = {}
        for e in evs:
            k = e["op"] if e["op"] != "result" else "result:" + str(e.get("decision"))
            if e["op"] == "report":
                k = "report:prune" if e["should_prune"] else "report"
            if e["op"] == "controller":
                k = "controller:" + e["call"]
            counts[k] = counts.get(k, 0) + 1
        print(f"  {kind} {c['name']}: {len(evs)} ops {counts}")


if __name__ == "__main__":
    t0 = time.time()
    summary("asha", gen_asha(), "events")
    summary("hb", gen_hyperband(), "ops")
    summary("msr", gen_msr(), "ops")
    summary("pruner", gen_median_pruner(), "ops")
    print(f"done in {time.time() - t0:.1f} s")
