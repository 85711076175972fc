//! Trials in their own processes (`TrialExecutor::Process`): a crash (an abort, a segfault, an
//! out-of-memory kill) ends that trial, not the experiment.
//!
//! The driver starts the program again (the same executable and arguments) with the trial's
//! description in `PYRITE_TUNE_TRIAL`. In that child, `Tuner::fit` sees the variable, runs the
//! trainable for that one trial and exits; its session talks to the driver over a Unix socket,
//! one JSON line per report and per answer. The driver relays the reports to its loop exactly as
//! a thread's, and reads the child's exit status when it ends: no `done` line means it died.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pyrite_core::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::config::Config;
use crate::schedulers::Decision;
use crate::session::{Checkpoint, Link, Message, Session, SessionState};
use crate::trial::Metrics;
use crate::tuner::Trainable;

/// The variable that makes a process run one trial.
pub(crate) const TRIAL_ENV: &str = "PYRITE_TUNE_TRIAL";

/// What the child needs to run its trial.
#[derive(Serialize, Deserialize)]
pub(crate) struct TrialSpec {
    pub experiment: String,
    pub trial_id: String,
    pub trial_dir: PathBuf,
    pub config: Config,
    pub checkpoint: Option<PathBuf>,
    pub iteration: u64,
    pub time_offset: f64,
    pub socket: PathBuf,
    pub cpu: usize,
}

/// The trial this process was started to run, if any.
pub(crate) fn child_spec() -> Option<TrialSpec> {
    let s = std::env::var(TRIAL_ENV).ok()?;
    serde_json::from_str(&s).ok()
}

/// Runs the trial in this (child) process and exits with 0 once the driver has its outcome.
pub(crate) fn run_child(spec: TrialSpec, trainable: &Trainable) -> ! {
    let stream = match UnixStream::connect(&spec.socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "tune: trial {} could not reach the driver at {}: {e}",
                spec.trial_id,
                spec.socket.display()
            );
            std::process::exit(3);
        }
    };
    let writer = match stream.try_clone() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("tune: trial {}: {e}", spec.trial_id);
            std::process::exit(3);
        }
    };
    pyrite_core::set_num_threads(spec.cpu.max(1));
    let mut session = Session::new(SessionState {
        trial_id: spec.trial_id.clone(),
        trial_dir: spec.trial_dir.clone(),
        iteration: spec.iteration,
        time_offset: spec.time_offset,
        started: Instant::now(),
        last_report: Instant::now(),
        checkpoint: spec.checkpoint.clone().map(Checkpoint::from_directory),
        link: Link::Remote { reader: BufReader::new(stream), writer },
        decision: None,
        scratch: 0,
    });
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| trainable(&spec.config, &mut session)));
    let outcome: Option<String> = match r {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("{e:?}")),
        Err(p) => Some(format!(
            "the trainable panicked: {}",
            p.downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)")
        )),
    };
    session.send_done(outcome);
    std::process::exit(0)
}

/// A socket path short enough for `sockaddr_un` (108 bytes), unique to this driver and trial.
fn socket_path(trial_id: &str) -> PathBuf {
    std::env::temp_dir().join(format!("pyrite-tune-{}-{trial_id}.sock", std::process::id()))
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with code {c}"),
        (None, Some(s)) => {
            let name = match s {
                6 => " (SIGABRT)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                15 => " (SIGTERM)",
                _ => "",
            };
            format!("was killed by signal {s}{name}")
        }
        _ => format!("ended ({status})"),
    }
}

/// Starts the trial's process and a thread that relays its reports to the driver's loop.
pub(crate) fn spawn(mut spec: TrialSpec, tx: mpsc::Sender<Message>) -> Result<()> {
    let sock = socket_path(&spec.trial_id);
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).map_err(|e| {
        Error::new(ErrorKind::Io, format!("trial {}: socket {}: {e}", spec.trial_id, sock.display()))
    })?;
    listener.set_nonblocking(true).map_err(|e| Error::new(ErrorKind::Io, e.to_string()))?;
    spec.socket = sock.clone();
    let exe =
        std::env::current_exe().map_err(|e| Error::new(ErrorKind::Io, format!("the program's path: {e}")))?;
    let spec_json = serde_json::to_string(&spec).map_err(|e| Error::new(ErrorKind::Value, e.to_string()))?;
    let mut child = Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .env(TRIAL_ENV, spec_json)
        .env("PYRITE_NUM_THREADS", spec.cpu.max(1).to_string())
        .spawn()
        .map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("starting trial {}'s process ({}): {e}", spec.trial_id, exe.display()),
            )
        })?;
    let trial = spec.trial_id.clone();
    std::thread::Builder::new()
        .name(format!("trial-{trial}-relay"))
        .spawn(move || {
            let outcome = relay(&trial, &listener, &mut child, &tx);
            let _ = std::fs::remove_file(&sock);
            let _ = tx.send(Message::Done { trial, outcome });
        })
        .map_err(|e| Error::new(ErrorKind::Value, format!("could not start a relay thread: {e}")))?;
    Ok(())
}

fn relay(
    trial: &str,
    listener: &UnixListener,
    child: &mut std::process::Child,
    tx: &mpsc::Sender<Message>,
) -> std::result::Result<(), String> {
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!(
                        "the trial's process {} before it started the trial",
                        describe(status)
                    ));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("the trial's process could not connect: {e}"));
            }
        }
    };
    let _ = stream.set_nonblocking(false);
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(e) => return Err(e.to_string()),
    };
    let mut done: Option<std::result::Result<(), String>> = None;
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
        if let Some(m) = v.get("metrics") {
            let metrics: Metrics = serde_json::from_value(m.clone()).unwrap_or_default();
            let checkpoint = v.get("checkpoint").and_then(Value::as_str).map(PathBuf::from);
            let (reply, rx) = mpsc::channel();
            if tx.send(Message::Report { trial: trial.to_string(), metrics, checkpoint, reply }).is_err() {
                break;
            }
            let d = rx.recv().unwrap_or(Decision::Stop);
            let _ = writeln!(writer, "{}", json!({ "decision": d.as_str() }));
        } else if let Some(d) = v.get("done") {
            done = Some(match d.as_str() {
                Some(e) => Err(e.to_string()),
                None => Ok(()),
            });
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    match done {
        Some(outcome) => outcome,
        None => Err(format!("the trial's process {} while training", describe(status))),
    }
}
