#!/usr/bin/env python3
"""Fault-injection harness for `gyre train --max-restarts` and `gyre train --elastic`.

Two kinds of job (--job):
  restart  (default) checkpoints and restarts of every worker: `gyre train --checkpoint-dir ...
           --checkpoint-every C --max-restarts K` (docs/fault-tolerance.md).
  elastic  `gyre train --elastic --np N --min-np 1 --max-np N --commit-every C`: the survivors roll
           back to their last in-memory commit and go on without the lost worker (docs/elastic.md).
           With --replace, also --max-restarts K: a replacement worker joins at a later commit.

Restart mode. For each seed it kills one worker with SIGKILL at a step and a rank drawn from the
seed, then checks that
  - the job finishes (within --timeout; a hang is a failure) and exits 0, after exactly one restart;
  - the work lost to the failure is at most the checkpoint interval: lost = the highest step the
    failed generation logged in progress.jsonl minus the step the next generation resumed from.
    A checkpoint is committed when its write (in the background) has finished; when the kill comes
    while the newest due checkpoint is still being written, that one is lost with the process and
    the bound is the steps since the last committed checkpoint instead. A resume from anything
    older than the last committed checkpoint always fails;
  - the final test accuracy is within 0.5 points of a fault-free run with the same settings (the
    resume is deterministic, so the accuracy, and steps.jsonl, are normally identical; the line
    says whether they are), and steps.jsonl holds every step exactly once.

Elastic mode. For each seed it kills one worker (the worker id and the step drawn from the seed),
then checks that
  - the job finishes (within --timeout) and exits 0;
  - exactly the expected memberships were published (the launcher's "elastic epoch E: workers
    ..." lines): N workers, then the N - 1 survivors; with --replace, then N again with the
    replacement (or, when the run ended before the replacement could join, none: reported);
  - the work lost to the failure is at most the commit interval: lost = the highest step the
    membership of the failure logged in progress.jsonl minus the start_step of the next membership
    that trained. The killed worker commits at its step S before it dies, so after an internal
    kill the next membership must start from exactly S - S mod C. A membership change by a join
    (MembershipChanged, at a commit) loses nothing;
  - the final test accuracy is within 0.5 points of a fault-free run (the same command without the
    fault); the world shrinks but the global batch stays, so it is close, not bit for bit; and
    steps.jsonl holds every step exactly once.

Two ways to inject (--mode):
  internal  the worker kills itself: `gyre train --fault-at-step S --fault-rank R` makes rank R
            (elastic: worker id R) raise(SIGKILL) right after global step S, in generation 0 only.
            Deterministic (for CI).
  external  this script watches RUN/progress.jsonl and, once generation 0 (elastic: membership 1)
            logs step S, sends SIGKILL to the gyre_train_worker of rank R (found under the gyre
            process by its GYRE_RANK; elastic: by its GYRE_ELASTIC_ID). The kill lands at S or a
            little later; the lost work is measured anyway.
  alternate internal for odd seeds, external for even ones (default).

--signal stop (external mode only) sends SIGSTOP instead of SIGKILL: the worker stops answering
without exiting. The others' collectives time out (the runs get GYRE_TIMEOUT_MS=--peer-timeout-ms,
default 3000); in elastic mode the launcher must then name the stopped worker ("stopped
answering"), stop it and go on without it, with the same checks as for a kill.

Prints one line per seed and a summary; exits 1 when any check fails, 2 for bad arguments.
Examples (docs/fault-tolerance.md, docs/elastic.md):
  scripts/fault-injection.py --build build --model cnn --np 2 --epochs 1 --checkpoint-every 50 --seeds 1-5
  scripts/fault-injection.py --build build --job elastic --model mlp --np 2 --max-steps 120 --commit-every 10
Only the Python standard library; Linux (/proc).
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys

from proctree import descendants
import tempfile
import threading
import time

WORKER = "gyre_train_worker"


def parse_seeds(text):
    seeds = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise argparse.ArgumentTypeError(f"--seeds '{text}': use N, A-B or a comma-separated list of them")
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        if last < first:
            raise argparse.ArgumentTypeError(f"--seeds: {part} is an empty range")
        seeds.extend(range(first, last + 1))
    return seeds


def json_lines(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a line being written
    except FileNotFoundError:
        pass
    return out


def complete_checkpoints(ckpt_dir):
    """Steps of the checkpoints in ckpt_dir that have their manifest (committed)."""
    steps = []
    try:
        for name in os.listdir(ckpt_dir):
            m = re.fullmatch(r"ckpt-(\d+)", name)
            if m and os.path.exists(os.path.join(ckpt_dir, name, "manifest.json")):
                steps.append(int(m.group(1)))
    except FileNotFoundError:
        pass
    return sorted(steps)


def fault_worker(root, job, who):
    """The gyre_train_worker under `root` that the fault aims at, or None: restart mode, generation
    0's rank `who` (GYRE_RANK); elastic, worker id `who` (GYRE_ELASTIC_ID, never reused)."""
    want = ({b"GYRE_ELASTIC_ID": str(who).encode()} if job == "elastic"
            else {b"GYRE_RANK": str(who).encode(), b"GYRE_RESTART_COUNT": b"0"})
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0].decode(errors="replace")
            if os.path.basename(argv0) != WORKER:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except OSError:
            continue
        env.setdefault(b"GYRE_RESTART_COUNT", b"0")
        if all(env.get(k) == v for k, v in want.items()):
            return pid
    return None


# The generation that progress.jsonl numbers first: restart mode's generation 0, elastic
# membership 1.
FIRST_GENERATION = {"restart": 0, "elastic": 1}


class Run:
    """One `gyre train` with its run directory (and, restart mode, checkpoint directory)."""

    def __init__(self, args, work, name):
        self.run_dir = os.path.join(work, name)
        self.ckpt_dir = os.path.join(work, name + "-ckpt")
        self.args = args
        self.output = []
        self.exit_code = None
        self.hung = False
        self.seconds = 0.0
        self.kill = None  # external mode: {"who", "pid", "step_seen", "committed"}

    def argv(self, extra):
        a = self.args
        argv = [a.gyre, "train", "--model", a.model, "--np", str(a.np), "--epochs", str(a.epochs),
                "--batch", str(a.batch), "--lr-schedule", "cosine", "--seed", str(a.train_seed),
                "--progress", "off", "--run-dir", self.run_dir, "--timeout", str(a.timeout)]
        if a.job == "elastic":
            argv += ["--elastic", "--min-np", "1", "--max-np", str(a.np), "--commit-every", str(a.commit_every)]
            if a.replace:
                argv += ["--max-restarts", str(a.max_restarts)]
        else:
            argv += ["--checkpoint-dir", self.ckpt_dir, "--checkpoint-every", str(a.checkpoint_every)]
        if a.max_steps:
            argv += ["--max-steps", str(a.max_steps)]
        if a.threads:
            argv += ["--threads", str(a.threads)]
        if a.data_dir:
            argv += ["--data-dir", a.data_dir]
        return argv + extra

    def start(self, extra):
        self.started = time.monotonic()
        env = dict(os.environ)
        if self.args.signal == "stop":
            env["GYRE_TIMEOUT_MS"] = str(self.args.peer_timeout_ms)
        self.proc = subprocess.Popen(self.argv(extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.output.append(line.decode(errors="replace").rstrip("\n"))

    def deadline(self):
        # gyre train's own --timeout stops the job; this one catches a launcher that does not.
        return self.started + self.args.timeout + 30

    def finish(self):
        try:
            self.exit_code = self.proc.wait(timeout=max(0.0, self.deadline() - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.hung = True
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.exit_code = self.proc.wait(timeout=30)
        self.reader.join(timeout=10)
        self.seconds = time.monotonic() - self.started

    def kill_worker_at(self, who, step):
        """External mode: SIGKILL (--signal stop: SIGSTOP) the worker `who` names (fault_worker)
        once progress.jsonl shows the first generation at `step`."""
        log = os.path.join(self.run_dir, "progress.jsonl")
        first = FIRST_GENERATION[self.args.job]
        while self.proc.poll() is None and time.monotonic() < self.deadline():
            seen = max((j["step"] for j in json_lines(log) if j.get("generation") == first and "step" in j),
                       default=0)
            if seen >= step:
                pid = fault_worker(self.proc.pid, self.args.job, who)
                if pid is None:
                    break
                committed = complete_checkpoints(self.ckpt_dir)
                os.kill(pid, signal.SIGSTOP if self.args.signal == "stop" else signal.SIGKILL)
                self.kill = {"who": who, "pid": pid, "step_seen": seen,
                             "committed": committed[-1] if committed else 0}
                return True
            time.sleep(0.005)
        return False

    def text(self):
        return "\n".join(self.output)

    def tail(self, n=25):
        return "\n".join("    " + line for line in self.output[-n:])

    def accuracy(self):
        metrics = json_lines(os.path.join(self.run_dir, "metrics.jsonl"))
        return metrics[-1].get("test_accuracy") if metrics else None

    def steps(self):
        return json_lines(os.path.join(self.run_dir, "steps.jsonl"))

    def checkpoint_saves(self):
        """(MB, stall ms) of every save the trainer printed."""
        pattern = re.compile(r"checkpoint at step \d+: ([\d.]+) MB, training stalled ([\d.]+) ms")
        return [(float(m.group(1)), float(m.group(2))) for m in map(pattern.search, self.output) if m]

    def generations(self):
        """progress.jsonl by generation: {g: {"start": step, "max": step}}."""
        gens = {}
        for j in json_lines(os.path.join(self.run_dir, "progress.jsonl")):
            g = gens.setdefault(j.get("generation", -1), {"start": None, "max": None})
            if "start_step" in j:
                g["start"] = j["start_step"]
            if "step" in j:
                g["max"] = max(g["max"] or 0, j["step"])
        return gens

    def memberships(self):
        """Elastic: the memberships the launcher published, [(epoch, [worker ids])], in order."""
        pattern = re.compile(r"elastic epoch (\d+): workers ([\d, ]+)$")
        return [(int(m.group(1)), [int(w) for w in m.group(2).split(",")])
                for m in map(pattern.search, self.output) if m]


def check_restart(args, run, fault, problems):
    """Restart mode's checks of a faulted run; returns the figures for the seed's line."""
    out = run.text()
    # What the failed generation could count on when it died.
    committed = None
    if fault["mode"] == "internal":
        if fault["reported"]:
            committed = int(fault["reported"].group(2) or 0)
    elif run.kill:
        committed = run.kill["committed"]
    restarts = len(re.findall(r"restarting all \d+ workers?", out))
    if restarts != 1:
        problems.append(f"{restarts} restarts, expected 1")

    gens = run.generations()
    r = {"committed": committed, "lost": None, "in_flight": False, "failed_max": None}
    if 0 in gens and 1 in gens and gens[1]["start"] is not None:
        failed_max = gens[0]["max"] or 0
        resumed = gens[1]["start"]
        lost = failed_max - resumed
        c = args.checkpoint_every
        if committed is not None and resumed < committed:
            problems.append(f"resumed from step {resumed}, older than the checkpoint of step {committed} that was "
                            f"complete at the kill")
        # The newest checkpoint that was due by the kill; unless it was committed, it was being written.
        due = failed_max // c * c
        in_flight = committed is not None and committed < due
        bound = failed_max - committed if in_flight else c
        if lost < 0 or lost > bound:
            problems.append(f"lost {lost} steps, more than {bound}")
        r.update(lost=lost, in_flight=in_flight, failed_max=failed_max)
        r["text"] = (f"resumed from step {resumed}, lost {lost} step{'s' if lost != 1 else ''} "
                     f"(interval {c}" + (f"; checkpoint of step {due} still being written, last committed {committed}"
                                         if in_flight else "") + ")")
    else:
        problems.append(f"progress.jsonl shows no restart (generations {sorted(gens)})")
    return r


def check_elastic(args, run, fault, problems):
    """Elastic mode's checks of a faulted run; returns the figures for the seed's line."""
    n, c, who = args.np, args.commit_every, fault["who"]
    # Internal: the last commit before the kill at step S. The trainer commits every C steps (at
    # S too, before the kill) and after each epoch (not yet after one that S ends).
    committed = None
    if fault["mode"] == "internal" and fault["reported"]:
        s, per_epoch = int(fault["reported"].group(1)), fault["total"] // args.epochs
        committed = max(s // c * c, (s - 1) // per_epoch * per_epoch)
    r = {"committed": committed, "lost": None, "in_flight": False, "failed_max": None, "joined": None}
    if args.signal == "stop" and not re.search(rf"worker {who} on host \S+ stopped answering: ", run.text()):
        problems.append(f"the launcher did not say that the stopped worker {who} stopped answering")

    # The memberships published: N, then the N - 1 survivors, then (--replace) N with the newcomer.
    published = run.memberships()
    sizes = [len(ids) for _, ids in published]
    survivors = [w for w in range(n) if w != who]
    if not published or published[0][1] != list(range(n)):
        problems.append(f"the first membership is {published[0][1] if published else 'missing'}, expected workers "
                        f"0..{n - 1}")
    elif len(published) < 2 or published[1][1] != survivors:
        problems.append(f"after the kill of worker {who}: memberships {sizes}, expected {n} then the {n - 1} "
                        f"survivors {survivors}")
    elif not args.replace and len(published) != 2:
        problems.append(f"{len(published)} memberships {sizes}, expected 2 ({n} then {n - 1} workers)")
    elif args.replace:
        grown = len(published) == 3 and len(published[2][1]) == n and published[2][1][:n - 1] == survivors
        # A replacement not yet ready when the last member finished is stopped, never admitted.
        late = len(published) == 2 and re.search(r"the job is finishing; stopping the workers that are not members",
                                                 run.text())
        if not (grown or late):
            problems.append(f"{len(published)} memberships {sizes}, expected {n}, {n - 1}, then {n} with the "
                            f"replacement")
        r["joined"] = bool(grown)

    # What each change cost: the failure's at most the commit interval, a join's nothing.
    gens = run.generations()
    trained = sorted(g for g in gens if gens[g]["start"] is not None)
    if len(trained) < 2 or trained[0] != 1:
        problems.append(f"progress.jsonl shows no membership change (memberships {trained})")
        return r
    changes = []
    for before, after in zip(trained, trained[1:]):
        changes.append((before, after, (gens[before]["max"] or gens[before]["start"]) - gens[after]["start"]))
    failed, resumed = gens[trained[0]]["max"] or 0, gens[trained[1]]["start"]
    lost = changes[0][2]
    # -1: an external kill of rank 0 between a step and its line in progress.jsonl; the survivors
    # finished that step with it (its allreduce) and may have committed it.
    if lost < -1 or lost > c:
        problems.append(f"lost {lost} steps at the failure, more than the commit interval {c}")
    if committed is not None and resumed != committed:
        problems.append(f"membership {trained[1]} started from step {resumed}, not from the commit of step "
                        f"{committed} made before the kill")
    for before, after, joined_lost in changes[1:]:
        if joined_lost != 0:
            problems.append(f"the change from membership {before} to {after} (a join) lost {joined_lost} steps")
    r.update(lost=lost, failed_max=failed)
    r["text"] = (f"memberships {' -> '.join(map(str, sizes))} workers, membership {trained[1]} from step {resumed}, "
                 f"lost {lost} step{'s' if lost != 1 else ''} (commit interval {c})"
                 + ("" if r["joined"] is None else
                    ", replacement joined" if r["joined"] else ", the run ended before the replacement could join"))
    return r


def check_seed(args, work, seed, mode, total, reference):
    rng = random.Random(f"gyre-fault-injection-{seed}")  # a string seed is hashed: well mixed
    who = rng.randrange(args.np)  # a rank; elastic: a worker id
    # Never the last step: the fault must hit training, not the end of it. The external kill lands
    # a little late, so it aims at the first 80%; a replacement needs time to join, the first half.
    last = max(1, total // 2 if args.replace else total - 1 if mode == "internal" else int(total * 0.8))
    step = rng.randint(1, last)
    run = Run(args, work, f"seed{seed}")
    problems = []
    extra = ["--max-restarts", str(args.max_restarts)] if args.job == "restart" else []
    if mode == "internal":
        extra += ["--fault-at-step", str(step), "--fault-rank", str(who)]
    run.start(extra)
    if mode == "external" and not run.kill_worker_at(who, step):
        problems.append(f"could not kill {WHO[args.job]} {who} at step {step} (the run ended first?)")
    run.finish()

    fault = {"mode": mode, "who": who, "reported": None, "total": total}
    if mode == "internal":
        fault["reported"] = re.search(
            r"injecting a fault: (?:rank|worker) \d+ kills itself \(SIGKILL\) after step (\d+); newest complete "
            r"checkpoint: (?:step (\d+)|none)", run.text())
        if not fault["reported"]:
            problems.append("the worker did not report the injected fault")
    if run.hung:
        problems.append(f"hung: still running after {args.timeout + 30} s, killed")
    elif run.exit_code != 0:
        problems.append(f"gyre train exited with {run.exit_code}")
    r = (check_elastic if args.job == "elastic" else check_restart)(args, run, fault, problems)

    acc = run.accuracy()
    ref_acc = reference.accuracy()
    steps = run.steps()
    identical = steps == reference.steps()
    if [j.get("step") for j in steps] != list(range(1, total + 1)):
        problems.append(f"steps.jsonl does not hold steps 1..{total} once each")
    if acc is None:
        problems.append("no final test accuracy in metrics.jsonl")
    elif abs(acc - ref_acc) * 100 > 0.5:
        problems.append(f"test accuracy {acc * 100:.2f}% is {abs(acc - ref_acc) * 100:.2f} points from the "
                        f"fault-free {ref_acc * 100:.2f}%")

    kill_step = r["failed_max"] if r["failed_max"] is not None else step
    verb = "stopped (SIGSTOP)" if args.signal == "stop" else "killed"
    how = (f"{mode}: {WHO[args.job]} {who} {verb} after step {kill_step}" if mode == "internal" or not run.kill
           else f"{mode}: {WHO[args.job]} {who} (pid {run.kill['pid']}) {verb} at step {kill_step} (aimed at {step})")
    parts = [f"seed {seed}: {how}"]
    if "text" in r:
        parts.append(r["text"])
    if acc is not None:
        parts.append(f"test acc {acc * 100:.2f}% (fault-free {ref_acc * 100:.2f}%, "
                     f"{'steps.jsonl identical' if identical else 'steps.jsonl differs'})")
    parts.append(f"{run.seconds:.0f} s")
    print(", ".join(parts) + ("  ok" if not problems else "  FAIL: " + "; ".join(problems)), flush=True)
    if problems:
        print(run.tail(), flush=True)
    injected = r["committed"] is not None or run.kill is not None
    return {"ok": not problems, "lost": r["lost"], "injected": injected,
            "survived": injected and run.exit_code == 0 and not run.hung, "acc": acc, "identical": identical,
            "saves": run.checkpoint_saves(), "in_flight": r["in_flight"], "joined": r.get("joined")}


# What --fault-rank names.
WHO = {"restart": "rank", "elastic": "worker"}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                epilog="See docs/fault-tolerance.md and docs/elastic.md.")
    p.add_argument("--build", default="build", help="build directory with bin/gyre (default: build)")
    p.add_argument("--gyre", help="the gyre executable (default: BUILD/bin/gyre)")
    p.add_argument("--job", choices=["restart", "elastic"], default="restart",
                   help="restart: checkpoints and --max-restarts; elastic: gyre train --elastic (default restart)")
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--np", type=int, default=2, help="workers (default 2)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0, help="steps per epoch (0: the whole epoch)")
    p.add_argument("--batch", type=int, default=128, help="global batch (default 128)")
    p.add_argument("--checkpoint-every", type=int, default=50,
                   help="restart: checkpoint interval in steps (default 50)")
    p.add_argument("--commit-every", type=int, default=10, help="elastic: commit interval in steps (default 10)")
    p.add_argument("--replace", action="store_true",
                   help="elastic: pass --max-restarts, so that a replacement worker joins after the failure")
    p.add_argument("--max-restarts", type=int, default=2,
                   help="gyre train --max-restarts: restarts; elastic with --replace: replacements (default 2)")
    p.add_argument("--seeds", type=parse_seeds, default=parse_seeds("1-3"), help="e.g. 1-5 or 1,4,9 (default 1-3)")
    p.add_argument("--mode", choices=["internal", "external", "alternate"], default="alternate")
    p.add_argument("--signal", choices=["kill", "stop"], default="kill",
                   help="external mode: SIGKILL the worker, or SIGSTOP it (it stops answering) (default kill)")
    p.add_argument("--peer-timeout-ms", type=int, default=3000,
                   help="--signal stop: GYRE_TIMEOUT_MS of the runs, how soon the others give up on it (default 3000)")
    p.add_argument("--timeout", type=int, default=900, help="seconds one run may take (default 900)")
    p.add_argument("--threads", type=int, default=0, help="threads per worker (default: gyre train's)")
    p.add_argument("--train-seed", type=int, default=0, help="gyre train --seed (default 0)")
    p.add_argument("--data-dir", help="Fashion-MNIST (default: gyre train's)")
    p.add_argument("--keep", action="store_true", help="keep the run directories (printed)")
    args = p.parse_args()
    args.gyre = args.gyre or os.path.join(args.build, "bin", "gyre")
    if not os.access(args.gyre, os.X_OK):
        p.error(f"no gyre executable at {args.gyre} (--build or --gyre)")
    if (args.np < 1 or args.epochs < 1 or args.checkpoint_every < 1 or args.commit_every < 1
            or args.max_restarts < 1 or args.timeout < 1):
        p.error("--np, --epochs, --checkpoint-every, --commit-every, --max-restarts and --timeout must be at least 1")
    if args.job == "elastic" and args.np < 2:
        p.error("--job elastic needs --np 2 or more: the survivors of the failure go on")
    if args.signal == "stop" and args.mode != "external":
        p.error("--signal stop needs --mode external (gyre train --fault-at-step kills)")
    if args.peer_timeout_ms < 1:
        p.error("--peer-timeout-ms must be at least 1")
    if args.replace and args.job != "elastic":
        p.error("--replace is for --job elastic (restart mode restarts every worker)")

    work = tempfile.mkdtemp(prefix="gyre-fault-injection.")
    try:
        return run_all(args, work)
    finally:
        if args.keep:
            print(f"run directories kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def describe(args):
    """The command each seed runs, for the first line."""
    job = (f"--elastic --min-np 1 --max-np {args.np} --commit-every {args.commit_every}"
           + (f" --max-restarts {args.max_restarts}" if args.replace else "") if args.job == "elastic"
           else f"--checkpoint-every {args.checkpoint_every} --max-restarts {args.max_restarts}")
    return (f"gyre train --model {args.model} --np {args.np} --epochs {args.epochs}"
            + (f" --max-steps {args.max_steps}" if args.max_steps else "")
            + f" --batch {args.batch} --lr-schedule cosine {job}")


def run_all(args, work):
    print(f"fault injection ({args.job}): {describe(args)}; seeds {','.join(map(str, args.seeds))}, "
          f"mode {args.mode}" + (f", SIGSTOP, GYRE_TIMEOUT_MS={args.peer_timeout_ms}" if args.signal == "stop" else ""),
          flush=True)
    reference = Run(args, work, "fault-free")
    reference.start([])
    reference.finish()
    total = len(reference.steps())
    # Elastic: a worker lost without a fault would leave a smaller world and still exit 0.
    changed = args.job == "elastic" and [ids for _, ids in reference.memberships()] != [list(range(args.np))]
    if reference.hung or reference.exit_code != 0 or reference.accuracy() is None or total < 2 or changed:
        print(f"the fault-free run failed (exit {reference.exit_code}{', hung' if reference.hung else ''}, "
              f"{total} steps{', its membership changed' if changed else ''}):\n{reference.tail()}")
        return 1
    print(f"fault-free: {total} steps, test acc {reference.accuracy() * 100:.2f}%, {reference.seconds:.0f} s",
          flush=True)

    results = []
    for seed in args.seeds:
        mode = args.mode if args.mode != "alternate" else ("internal" if seed % 2 else "external")
        results.append(check_seed(args, work, seed, mode, total, reference))

    ok = all(r["ok"] for r in results)
    lost = [r["lost"] for r in results if r["lost"] is not None]
    accs = [r["acc"] for r in results if r["acc"] is not None]
    saves = reference.checkpoint_saves() + [s for r in results for s in r["saves"]]
    ref = reference.accuracy()
    interval = (f"commit interval {args.commit_every}" if args.job == "elastic"
                else f"checkpoint interval {args.checkpoint_every}")
    print(f"summary: {sum(r['injected'] for r in results)} faults injected, "
          f"{sum(r['survived'] for r in results)} survived "
          f"(finished, exit 0), {sum(r['ok'] for r in results)} passed every check")
    if lost:
        print(f"  lost work per failure: {', '.join(map(str, lost))} steps (mean {statistics.mean(lost):.1f}, "
              f"max {max(lost)}; {interval}"
              + (f"; {sum(r['in_flight'] for r in results)} kills came while a checkpoint was being written"
                 if any(r["in_flight"] for r in results) else "") + ")")
    if args.replace:
        print(f"  replacement joined in {sum(bool(r['joined']) for r in results)} of {len(results)} runs "
              f"(otherwise the run ended first)")
    if accs:
        worst = max(abs(a - ref) for a in accs) * 100
        print(f"  final test accuracy: fault-free {ref * 100:.2f}%, with a fault {min(accs) * 100:.2f}%.."
              f"{max(accs) * 100:.2f}% (max difference {worst:.2f} points, at most 0.5); steps.jsonl identical to "
              f"the fault-free run's in {sum(r['identical'] for r in results)} of {len(results)}")
    if saves:
        sizes = [s[0] for s in saves]
        stalls = [s[1] for s in saves]
        print(f"  checkpoints: {len(saves)} saves of {statistics.median(sizes):.2f} MB, training stalled "
              f"median {statistics.median(stalls):.1f} ms, max {max(stalls):.1f} ms")
    print("fault injection: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
