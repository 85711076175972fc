"""Replays reference/data/tune/*_traces.json with small from-scratch re-implementations of the
schedulers, written from reference/data/tune/defaults.md (no Ray or Optuna import), and checks
that every decision, chosen trial and controller call matches what the real libraries did.

It is the executable form of defaults.md: if the Rust port follows the same rules, it replays the
traces too. The only numeric helpers are numpy's summation (pairwise) and numpy's linear
percentile interpolation, re-implemented bit for bit below.

Run: python3 reference/check_tune_traces.py   (exit status 1 on the first mismatch)
"""
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "tune")


# ---------------------------------------------------------------------------------------------
# numpy's numerics
# ---------------------------------------------------------------------------------------------


def np_sum(a):
    """numpy.add.reduce on a float64 array: pairwise summation with 8 accumulators."""
    n = len(a)
    if n < 8:
        r = 0.0
        for x in a:
            r += x
        return r
    if n <= 128:
        r = list(a[:8])
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] += a[i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res += a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return np_sum(a[:n2]) + np_sum(a[n2:])


def np_mean(a):
    return np_sum(a) / len(a)


def np_median(a):
    s = sorted(a)
    n = len(s)
    if n % 2:
        return s[n // 2]
    return np_mean([s[n // 2 - 1], s[n // 2]])


def np_percentile(a, q):
    """np.nanpercentile(a, q) with the default 'linear' method (NaNs dropped)."""
    s = sorted(x for x in a if not math.isnan(x))
    n = len(s)
    if n == 0:
        return math.nan
    qf = q / 100
    vi = (n - 1) * qf
    prev = math.floor(vi)
    nxt = prev + 1
    prev = min(max(prev, 0), n - 1)
    nxt = min(max(nxt, 0), n - 1)
    g = vi - math.floor(vi)
    a_, b_ = s[prev], s[nxt]
    d = b_ - a_
    if g >= 0.5:
        return b_ - d * (1 - g)
    return a_ + d * g


def fail(msg):
    print("MISMATCH:", msg)
    sys.exit(1)


# ---------------------------------------------------------------------------------------------
# ASHA
# ---------------------------------------------------------------------------------------------


class AshaBracket:
    def __init__(self, min_t, max_t, rf, s, stop_last):
        self.rf = rf
        n_rungs = int(math.log(max_t / min_t) / math.log(rf) - s + 1)
        self.rungs = [(min_t * rf ** (k + s), {}) for k in reversed(range(n_rungs))]
        self.stop_last = stop_last

    def cutoff(self, rec):
        if not rec:
            return None
        return np_percentile(list(rec.values()), (1 - 1 / self.rf) * 100)

    def on_result(self, tid, t, rew):
        action = "CONTINUE"
        for milestone, rec in self.rungs:
            if t >= milestone and tid in rec and not self.stop_last:
                break
            if t < milestone or tid in rec:
                continue
            c = self.cutoff(rec)
            if c is not None and rew < c:
                action = "STOP"
            rec[tid] = rew
            break
        return action


def check_asha():
    d = json.load(open(os.path.join(DATA, "asha_traces.json")))
    n = 0
    for case in d["cases"]:
        o = case["options"]
        op = 1.0 if o["mode"] == "max" else -1.0
        brackets = [AshaBracket(o["grace_period"], o["max_t"], o["reduction_factor"], s, o["stop_last_trials"]) for s in range(o["brackets"])]
        if [[m for m, _ in b.rungs][::-1] for b in brackets] != case["rung_milestones"]:
            fail(f"{case['name']}: rung milestones")
        info = {}
        for ev in case["events"]:
            if ev["op"] == "add":
                info[ev["trial"]] = brackets[ev["bracket"]]
            elif ev["op"] == "result":
                if ev["t"] >= o["max_t"] and o["stop_last_trials"]:
                    dec = "STOP"
                else:
                    dec = info[ev["trial"]].on_result(ev["trial"], ev["t"], op * ev["value"])
                if dec != ev["decision"]:
                    fail(f"{case['name']}: {ev} -> {dec}")
                n += 1
            elif ev["op"] == "complete":
                info[ev["trial"]].on_result(ev["trial"], ev["t"], op * ev["value"])
                del info[ev["trial"]]
    print(f"asha: {len(d['cases'])} cases, {n} decisions match")


# ---------------------------------------------------------------------------------------------
# Runner (HyperBand, HyperBandForBOHB, MedianStoppingRule)
# ---------------------------------------------------------------------------------------------


class T:
    def __init__(self, tid, index, length):
        self.id = tid
        self.index = index
        self.status = "PENDING"
        self.last = None
        self.done = 0
        self.length = length


class Ctrl:
    def __init__(self, trials, time_attr, metric):
        self.trials = trials
        self.ops = []
        self.depth = 0
        self.time_attr = time_attr
        self.metric = metric
        self.sched = None

    def log(self, op):
        if self.depth > 0:
            op["nested"] = True
        self.ops.append(op)
        return op

    def live(self):
        return [t for t in self.trials if t.status not in ("TERMINATED", "ERROR")]

    def complete(self, t, cause, resumed=False):
        op = {"op": "complete", "trial": t.id, "t": t.last[self.time_attr], "value": t.last[self.metric], "cause": cause}
        if resumed:
            op["resumed"] = True
        self.log(op)
        self.sched.on_complete(self, t, t.last)
        t.status = "TERMINATED"

    def stop_impl(self, t):
        if t.status in ("TERMINATED", "ERROR"):
            return
        if t.status in ("PENDING", "PAUSED"):
            self.log({"op": "remove", "trial": t.id})
            self.sched.on_remove(self, t)
            t.status = "TERMINATED"
        elif t.status == "RUNNING":
            self.complete(t, "stop")

    def stop_trial(self, t):
        self.log({"op": "controller", "call": "stop_trial", "trial": t.id, "status": t.status})
        self.depth += 1
        self.stop_impl(t)
        self.depth -= 1

    def searcher(self, call, t):
        self.log({"op": "controller", "call": call, "trial": t.id})


def replay_runner(case, sched, time_attr, metric):
    recorded = case["ops"]
    picks = [op for op in recorded if not op.get("nested") and (op["op"] == "result" or (op["op"] == "complete" and op.get("resumed")))]
    trials = [T(f"t{i}", i, L) for i, L in enumerate(case["lengths"])]
    by_id = {t.id: t for t in trials}
    ctrl = Ctrl(trials, time_attr, metric)
    ctrl.sched = sched
    for t in trials:
        ctrl.log({"op": "add", "trial": t.id})
        sched.on_add(ctrl, t)
    pi = 0
    while True:
        while sum(t.status == "RUNNING" for t in trials) < case["concurrency"]:
            op = ctrl.log({"op": "choose", "trial": None})
            ch = sched.choose(ctrl)
            op["trial"] = ch.id if ch else None
            if ch is None:
                break
            ch.status = "RUNNING"
        if not any(t.status == "RUNNING" for t in trials):
            ctrl.log({"op": "end", "not_terminated": [{"trial": t.id, "status": t.status} for t in trials if t.status != "TERMINATED"]})
            break
        if pi >= len(picks):
            break  # the replay diverged; the comparison below shows where
        p = picks[pi]
        pi += 1
        t = by_id[p["trial"]]
        if t.status != "RUNNING":
            fail(f"{case['name']}: picked {t.id} is {t.status}")
        if t.done >= t.length:
            ctrl.complete(t, "end", resumed=True)
            continue
        res = {time_attr: p["t"], metric: p["value"]}
        op = ctrl.log({"op": "result", "trial": t.id, "t": p["t"], "value": p["value"], "decision": None})
        dec = sched.on_result(ctrl, t, res)
        op["decision"] = dec
        t.done += 1
        t.last = res
        if dec == "STOP":
            ctrl.stop_impl(t)
        elif dec == "PAUSE":
            t.status = "PAUSED"
        elif dec == "CONTINUE" and t.done >= t.length:
            ctrl.complete(t, "end")
    for i, (a, b) in enumerate(zip(ctrl.ops, recorded)):
        if a != b:
            fail(f"{case['name']}: op {i}: replay {a} != recorded {b}")
    if len(ctrl.ops) != len(recorded):
        fail(f"{case['name']}: {len(ctrl.ops)} ops replayed, {len(recorded)} recorded")
    return len(recorded)


class HBBracket:
    def __init__(self, time_attr, n0, r0, max_t, eta, s, stop_last):
        self.time_attr = time_attr
        self.live = {}
        self.all = []
        self.n = n0
        self.r = r0
        self.max_t = max_t
        self.cumul_r = r0
        self.eta = eta
        self.halves = s
        self.total_work = self.calc_work(n0, r0, s)
        self.progress = 0
        self.stop_last = stop_last
        self.being_processed = False
        self.to_unpause = set()

    def calc_work(self, n, r, s):
        work = 0
        cumulative_r = r
        for _ in range(s + 1):
            work += int(n) * int(r)
            n = int(math.ceil(n / self.eta))
            r *= self.eta
            r = int(min(r, self.max_t - cumulative_r))
        return work

    def tt(self, res):
        return 0 if res is None else res[self.time_attr]

    def cur_iter_done(self):
        return all(self.tt(r) >= self.cumul_r for r in self.live.values())

    def finished(self):
        return self.stop_last and self.halves == 0 and self.cur_iter_done()

    def continue_trial(self, t):
        if not self.stop_last and self.halves == 0:
            return True
        return self.tt(self.live[t]) < self.cumul_r

    def filled(self):
        return len(self.live) == self.n

    def halving(self, metric, op):
        if self.halves == 0 and not self.stop_last:
            return list(self.live), []
        self.halves -= 1
        self.n = int(math.ceil(self.n / self.eta))
        self.r *= self.eta
        self.r = int(min(self.r, self.max_t))
        self.cumul_r = self.r
        srt = sorted(self.live, key=lambda t: op * self.live[t][metric])
        return srt[-self.n:], srt[: -self.n]

    def update(self, t, res):
        self.progress += self.tt(res) - self.tt(self.live[t])
        self.live[t] = res
        self.to_unpause.discard(t)

    def completion(self):
        if self.finished():
            return 1.0
        return min(self.progress / self.total_work, 1.0)


class HyperBand:
    def __init__(self, o, bohb=False):
        self.bohb = bohb
        self.eta = o["reduction_factor"]
        self.max_t = o["max_t"]
        x = math.log(self.max_t) / math.log(self.eta)
        self.s_max_1 = int(round(x)) + 1  # numpy/Python round: half to even
        self.metric = o["metric"]
        self.op = 1.0 if o["mode"] == "max" else -1.0
        self.time_attr = o["time_attr"]
        self.stop_last = o["stop_last_trials"]
        self.bands = [[]]
        self.cur = None
        self.band_idx = 0
        self.info = {}

    def n0(self, s):
        return int(math.ceil(self.s_max_1 / (s + 1) * self.eta ** s))

    def r0(self, s):
        return int(self.max_t * self.eta ** (-s))

    def on_add(self, ctrl, t):
        if self.cur is None or self.cur.filled():
            while True:
                if len(self.bands[self.band_idx]) == self.s_max_1:
                    self.bands.append([])
                    self.band_idx += 1
                band = self.bands[self.band_idx]
                s = self.s_max_1 - len(band) - 1 if self.bohb else len(band)
                if self.r0(s) == 0:
                    band.append(None)
                    self.cur = None
                    continue
                self.cur = HBBracket(self.time_attr, self.n0(s), self.r0(s), self.max_t, self.eta, s, self.stop_last)
                band.append(self.cur)
                break
        self.cur.live[t] = None
        self.cur.all.append(t)
        self.info[t] = self.cur

    def on_result(self, ctrl, t, res):
        b = self.info[t]
        b.update(t, res)
        if b.continue_trial(t):
            return "CONTINUE"
        if self.bohb:
            if not b.filled() or any(o.status != "PAUSED" for o in b.live if o is not t):
                ctrl.searcher("searcher.on_pause", t)
                return "PAUSE"
            action = self.process(ctrl, b)
            if action == "PAUSE":
                ctrl.searcher("searcher.on_pause", t)
            return action
        return self.process(ctrl, b)

    def process(self, ctrl, b):
        action = "PAUSE"
        if b.cur_iter_done():
            if b.finished():
                for t in list(b.live):
                    if t.status == "PAUSED":
                        ctrl.stop_trial(t)
                return "STOP"
            b.being_processed = True
            good, bad = b.halving(self.metric, self.op)
            for t in bad:
                if t.status == "PAUSED":
                    ctrl.stop_trial(t)
                elif t.status == "RUNNING":
                    b.live.pop(t, None)
                    action = "STOP"
                else:
                    fail(f"bad trial {t.id} is {t.status}")
            for t in good:
                if b.continue_trial(t):
                    if t.status == "PAUSED":
                        if self.bohb:
                            ctrl.searcher("searcher.on_unpause", t)
                        b.to_unpause.add(t)
                    elif t.status == "RUNNING":
                        action = "CONTINUE"
                elif b.finished() and b.stop_last:
                    if t.status == "PAUSED":
                        ctrl.stop_trial(t)
                    elif t.status == "RUNNING":
                        b.live.pop(t, None)
                        action = "STOP"
        return action

    def on_remove(self, ctrl, t):
        b = self.info[t]
        b.live.pop(t, None)
        if not b.finished() and not b.being_processed:
            self.process(ctrl, b)

    def on_complete(self, ctrl, t, res):
        self.on_remove(ctrl, t)

    def _runnable(self, b, t):
        return (t.status == "PAUSED" and t in b.to_unpause) or t.status == "PENDING"

    def choose(self, ctrl, allow_recurse=True):
        for band in self.bands:
            brs = [b for b in band if b is not None]
            if not self.bohb:
                brs = sorted(brs, key=lambda b: b.completion())
            for b in brs:
                for t in list(b.live):
                    if self._runnable(b, t):
                        return t
        if not self.bohb:
            return None
        if not any(t.status == "RUNNING" for t in ctrl.trials):
            for band in self.bands:
                for b in band:
                    if b and any(t.status == "PAUSED" for t in list(b.live)):
                        self.process(ctrl, b)
                        if allow_recurse and any(self._runnable(b, t) for t in list(b.live)):
                            return self.choose(ctrl, allow_recurse=False)
        return None


def check_hyperband():
    total = 0
    for fn in ("hyperband_traces.json", "hyperband_bohb_traces.json"):
        d = json.load(open(os.path.join(DATA, fn)))
        for case in d["cases"]:
            o = case["options"]
            sched = HyperBand(o, bohb=case["scheduler"] == "HyperBandForBOHB")
            total += replay_runner(case, sched, o["time_attr"], o["metric"])
        print(f"{fn}: {len(d['cases'])} cases replayed op for op")
    return total


class MSR:
    def __init__(self, o):
        self.time_attr = o["time_attr"]
        self.metric = o["metric"]
        self.grace = o["grace_period"]
        self.min_samples = o["min_samples_required"]
        self.min_slice = o["min_time_slice"]
        self.hard = o["hard_stop"]
        self.mode = o["mode"]
        self.stopped = set()
        self.last_pause = {}
        self.results = {}  # insertion-ordered: trial -> list of results

    def on_add(self, ctrl, t):
        pass

    def running_mean(self, t, time):
        sc = [r[self.metric] for r in self.results[t] if self.grace <= r[self.time_attr] <= time]
        return math.nan if not sc else np_mean(sc)

    def best(self, t):
        vals = [r[self.metric] for r in self.results[t]]
        return max(vals) if self.mode == "max" else min(vals)

    def on_result(self, ctrl, t, res):
        if t in self.stopped:
            return "CONTINUE"
        time = res[self.time_attr]
        self.results.setdefault(t, []).append(res)
        if time < self.grace:
            return "CONTINUE"
        others = [o for o in self.results if self.results[o][-1][self.time_attr] >= time and o is not t]
        means = [m for m in (self.running_mean(o, time) for o in others) if math.isfinite(m)]
        if len(means) < self.min_samples:
            pause = time - self.last_pause.get(t, -math.inf) > self.min_slice
            pause = pause and any(o.status in ("PENDING", "PAUSED") for o in ctrl.live())
            if pause:
                self.last_pause[t] = time
                return "PAUSE"
            return "CONTINUE"
        med = np_median(means)
        best = self.best(t)
        worse = med > best if self.mode == "max" else med < best
        if worse:
            self.stopped.add(t)
            return "STOP" if self.hard else "PAUSE"
        return "CONTINUE"

    def on_complete(self, ctrl, t, res):
        self.results.setdefault(t, []).append(res)

    def on_remove(self, ctrl, t):
        pass

    def choose(self, ctrl):
        for t in ctrl.trials:
            if t.status == "PENDING":
                return t
        for t in ctrl.trials:
            if t.status == "PAUSED":
                return t
        return None


def check_msr():
    d = json.load(open(os.path.join(DATA, "median_stopping_traces.json")))
    for case in d["cases"]:
        o = case["options"]
        replay_runner(case, MSR(o), o["time_attr"], o["metric"])
    print(f"median_stopping_traces.json: {len(d['cases'])} cases replayed op for op")


# ---------------------------------------------------------------------------------------------
# Optuna MedianPruner
# ---------------------------------------------------------------------------------------------


def check_pruner():
    d = json.load(open(os.path.join(DATA, "median_pruner_traces.json")))
    n = 0
    for case in d["cases"]:
        o = case["options"]
        maximize = case["direction"] == "maximize"
        inter = {}  # trial -> {step: value}
        state = {}
        for op in case["ops"]:
            if op["op"] == "ask":
                inter[op["trial"]] = {}
                state[op["trial"]] = "RUNNING"
            elif op["op"] == "report":
                tr = op["trial"]
                inter[tr][op["step"]] = op["value"]
                pr = prune(o, maximize, tr, op["step"], inter, state)
                if pr != op["should_prune"]:
                    fail(f"{case['name']}: {op} -> {pr}")
                n += 1
            elif op["op"] == "tell":
                state[op["trial"]] = op["state"]
    print(f"median_pruner_traces.json: {len(d['cases'])} cases, {n} should_prune answers match")


def prune(o, maximize, tr, step, inter, state):
    completed = [t for t in inter if state[t] == "COMPLETE"]
    if len(completed) == 0 or len(completed) < o["n_startup_trials"]:
        return False
    w = o["n_warmup_steps"]
    if step < w:
        return False
    nearest = (step - w) // o["interval_steps"] * o["interval_steps"] + w
    second_last = max([s for s in inter[tr] if s != step], default=-1)
    if not second_last < nearest:
        return False
    vals = list(inter[tr].values())
    best = max(vals) if maximize else min(vals)
    at_step = [inter[t][step] for t in completed if step in inter[t]]
    if len(at_step) < o["n_min_trials"]:
        return False
    p = np_percentile(at_step, 100 - 50.0 if maximize else 50.0)
    return best < p if maximize else best > p


if __name__ == "__main__":
    check_asha()
    check_hyperband()
    check_msr()
    check_pruner()
    print("all traces replay exactly")
