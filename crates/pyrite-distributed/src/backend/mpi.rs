//! The MPI backend: one thread that owns MPI and runs every operation with MPI's nonblocking
//! calls, so that none can hang.
//!
//! MPI starts (`MPI_Init_thread`, funneled) on that thread, which alone calls MPI from then
//! on; process groups hand it operations through a channel. Its loop:
//!
//! - **Collectives** run one at a time per communicator, in submission order (MPI requires
//!   every rank to start them in the same order); point-to-point operations start at once.
//! - Before a collective's data moves, every rank sends every other a small **fingerprint**
//!   message on a second communicator: which operation this is and, in
//!   `PYRITE_DISTRIBUTED_DEBUG=DETAIL` mode, its shape, dtype, root and reduction. So a rank
//!   that never arrives is named when the timeout expires ("rank 1 never arrived"), and ranks
//!   that call different collectives get an error naming each rank and what it called,
//!   instead of corrupted results or a hang.
//! - Then the data moves with `MPI_Iallreduce`, `MPI_Ibcast`, ... from a copy of the tensor
//!   into a receive buffer, polled with `MPI_Test` until done or the deadline passes; the
//!   result is written into the tensors at the end. A communicator whose operation failed is
//!   not used again (its buffers are kept, as MPI may still write them).
//! - At exit (`on_exit`), MPI is finalized after a clean exit, and the job is aborted
//!   (`MPI_Abort`, which makes mpirun stop every rank) after a failed one or after a
//!   collective failed, so that no rank waits forever on one that has gone.

use super::{Backend, CommId};
use crate::op::{mismatch_message, Op, OpKind, ReduceOp};
use crate::work::Work;
use mpi::ffi;
use pyrite_core::{autograd, bail, err, DType, Error, Result, Tensor};
use std::collections::VecDeque;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The fingerprint message's size in bytes.
const HEADER_LEN: usize = 512;
const HEADER_TAG: c_int = 1;

enum Msg {
    Op { comm: CommId, op: Op, work: Work },
    NewComm { ranks: Vec<usize>, timeout: Duration, reply: Sender<Result<Option<CommId>>> },
    Exit { abort_code: Option<c_int>, done: Sender<()> },
}

pub(crate) struct MpiBackend {
    tx: Mutex<Sender<Msg>>,
    rank: usize,
    size: usize,
}

static BACKEND: OnceLock<std::result::Result<Arc<MpiBackend>, Error>> = OnceLock::new();
/// A collective failed: abort at exit rather than wait in `MPI_Finalize` for ranks that may
/// never come.
static FAILED: AtomicBool = AtomicBool::new(false);

impl MpiBackend {
    /// The process's MPI backend, starting MPI on first use.
    pub(crate) fn get() -> Result<Arc<MpiBackend>> {
        BACKEND.get_or_init(start).clone()
    }
}

fn start() -> Result<Arc<MpiBackend>> {
    let (tx, rx) = channel::<Msg>();
    let (ready_tx, ready_rx) = channel::<Result<(usize, usize)>>();
    std::thread::Builder::new()
        .name("pyrite-mpi".into())
        .spawn(move || {
            // SAFETY: MPI is started on this thread, which alone calls it from here on.
            match unsafe { Worker::start() } {
                Ok(w) => {
                    let _ = ready_tx.send(Ok((w.world_rank, w.world_size)));
                    w.run(rx);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            }
        })
        .map_err(|e| err!(Distributed, "could not start the MPI thread: {e}"))?;
    let (rank, size) =
        ready_rx.recv().map_err(|_| err!(Distributed, "the MPI thread ended while starting MPI"))??;
    register_exit_handler();
    Ok(Arc::new(MpiBackend { tx: Mutex::new(tx), rank, size }))
}

impl MpiBackend {
    fn send(&self, msg: Msg) -> Result<()> {
        self.tx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(msg)
            .map_err(|_| err!(Distributed, "the MPI backend has shut down (MPI was finalized at exit)"))
    }
}

impl Backend for MpiBackend {
    fn name(&self) -> &'static str {
        "mpi"
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn new_comm(&self, ranks: &[usize], timeout: Duration) -> Result<Option<CommId>> {
        let (reply, rx) = channel();
        self.send(Msg::NewComm { ranks: ranks.to_vec(), timeout, reply })?;
        rx.recv().map_err(|_| err!(Distributed, "the MPI thread ended while making a group"))?
    }
    fn submit(&self, comm: CommId, op: Op, work: Work) {
        if let Err(e) = self.send(Msg::Op { comm, op, work: work.clone() }) {
            work.complete(Err(e));
        }
    }
}

// ------------------------------------------------------------------------------ at exit

/// Finalizes MPI after a clean exit and aborts the job after a failed one (glibc's `on_exit`
/// gives the exit status; elsewhere `atexit` finalizes unless a collective failed).
fn register_exit_handler() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn on_exit(f: extern "C" fn(c_int, *mut c_void), arg: *mut c_void) -> c_int;
        }
        extern "C" fn handler(status: c_int, _: *mut c_void) {
            shutdown(status);
        }
        // SAFETY: registers a plain function; glibc calls it during exit.
        unsafe {
            on_exit(handler, std::ptr::null_mut());
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        extern "C" fn handler() {
            shutdown(0);
        }
        // SAFETY: as above.
        unsafe {
            libc::atexit(handler);
        }
    }
}

fn shutdown(status: c_int) {
    let Some(Ok(b)) = BACKEND.get() else { return };
    let abort_code = if status != 0 {
        Some(status)
    } else if FAILED.load(Ordering::SeqCst) {
        Some(1)
    } else {
        None
    };
    if let Some(code) = abort_code {
        eprintln!(
            "[rank {}] pyrite.distributed: {}; aborting the MPI job so that no rank waits for this one",
            b.rank,
            if status != 0 {
                format!("exiting with status {status}")
            } else {
                "a collective failed earlier".to_string()
            }
        );
        let _ = code;
    }
    let (done, rx) = channel();
    if b.send(Msg::Exit { abort_code, done }).is_ok() {
        let _ = rx.recv_timeout(Duration::from_secs(600));
    }
}

// ------------------------------------------------------------------------------ the worker

/// Returns an error unless an MPI call succeeded.
fn check(code: c_int, what: &str) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    let mut buf = vec![0u8; 512];
    let mut len: c_int = 0;
    // SAFETY: `buf` holds MPI_MAX_ERROR_STRING (256 in OpenMPI and MPICH) bytes and more.
    unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr() as *mut _, &mut len) };
    let msg = String::from_utf8_lossy(&buf[..len.max(0) as usize]).into_owned();
    bail!(Distributed, "{what} failed: {msg} (MPI error {code})")
}

struct Comm {
    /// Data moves here.
    data: ffi::MPI_Comm,
    /// Fingerprints move here.
    ctrl: ffi::MPI_Comm,
    /// World ranks by group rank.
    ranks: Vec<usize>,
    /// This process's group rank.
    rank: usize,
    /// Collectives waiting for the one running.
    queue: VecDeque<(Op, Work)>,
    /// A collective is running.
    busy: bool,
    /// Set when an operation failed: the communicator is not used again.
    failed: Option<Error>,
}

struct Worker {
    universe: Option<mpi::environment::Universe>,
    world_rank: usize,
    world_size: usize,
    /// For making communicators (never carries data, so it never waits behind collectives).
    admin: ffi::MPI_Comm,
    comms: Vec<Option<Comm>>,
    active: Vec<Active>,
    /// Buffers of operations abandoned after a failure: MPI may still write them.
    graveyard: Vec<Buffers>,
    /// The send copy of in-place all-reduces, kept between them.
    scratch: Vec<u8>,
}

/// An operation in progress.
struct Active {
    comm: CommId,
    started: Instant,
    op: Op,
    work: Work,
    deadline: Instant,
    stage: Stage,
    bufs: Buffers,
}

enum Stage {
    /// Fingerprints sent to and awaited from every other rank (`peers` are group ranks, one per
    /// receive request; the send requests follow).
    Fingerprints { reqs: Vec<ffi::MPI_Request>, peers: Vec<usize> },
    /// A receive waiting for its message to arrive (to check its size first).
    Probe,
    /// The data moving.
    Data { reqs: Vec<ffi::MPI_Request> },
}

/// Memory an operation's MPI calls read or write; it must outlive them.
#[derive(Default)]
struct Buffers {
    header_out: Vec<u8>,
    headers_in: Vec<Vec<u8>>,
    send: Vec<u8>,
    recv: Vec<u8>,
    counts: Vec<c_int>,
    displs: Vec<c_int>,
    recv_counts: Vec<c_int>,
    recv_displs: Vec<c_int>,
}

enum Step {
    Pending,
    Done(Result<()>),
}

impl Worker {
    /// # Safety
    /// Call once per process, on the thread that will make every MPI call.
    unsafe fn start() -> Result<Worker> {
        unsafe {
            let mut initialized: c_int = 0;
            ffi::MPI_Initialized(&mut initialized);
            if initialized != 0 {
                bail!(
                    Distributed,
                    "MPI was already initialized by this program: let init_process_group(\"mpi\") start it"
                );
            }
            let (universe, _threading) = mpi::initialize_with_threading(mpi::Threading::Funneled)
                .ok_or_else(|| err!(Distributed, "MPI_Init_thread failed"))?;
            let world = ffi::RSMPI_COMM_WORLD;
            check(ffi::MPI_Comm_set_errhandler(world, ffi::RSMPI_ERRORS_RETURN), "MPI_Comm_set_errhandler")?;
            let (mut rank, mut size) = (0, 0);
            check(ffi::MPI_Comm_rank(world, &mut rank), "MPI_Comm_rank")?;
            check(ffi::MPI_Comm_size(world, &mut size), "MPI_Comm_size")?;
            let mut admin = ffi::RSMPI_COMM_NULL;
            check(ffi::MPI_Comm_dup(world, &mut admin), "MPI_Comm_dup")?;
            let mut w = Worker {
                universe: Some(universe),
                world_rank: rank as usize,
                world_size: size as usize,
                admin,
                comms: Vec::new(),
                active: Vec::new(),
                graveyard: Vec::new(),
                scratch: Vec::new(),
            };
            let all: Vec<usize> = (0..w.world_size).collect();
            let c = w.make_comm(world, &all)?;
            w.comms.push(c);
            Ok(w)
        }
    }

    /// Duplicates `parent` into a data and a fingerprint communicator (`None` for
    /// `MPI_COMM_NULL`: this rank is not a member).
    unsafe fn make_comm(&self, parent: ffi::MPI_Comm, ranks: &[usize]) -> Result<Option<Comm>> {
        unsafe {
            if parent == ffi::RSMPI_COMM_NULL {
                return Ok(None);
            }
            let (mut data, mut ctrl) = (ffi::RSMPI_COMM_NULL, ffi::RSMPI_COMM_NULL);
            check(ffi::MPI_Comm_dup(parent, &mut data), "MPI_Comm_dup")?;
            check(ffi::MPI_Comm_dup(parent, &mut ctrl), "MPI_Comm_dup")?;
            check(ffi::MPI_Comm_set_errhandler(data, ffi::RSMPI_ERRORS_RETURN), "MPI_Comm_set_errhandler")?;
            check(ffi::MPI_Comm_set_errhandler(ctrl, ffi::RSMPI_ERRORS_RETURN), "MPI_Comm_set_errhandler")?;
            let mut rank = 0;
            check(ffi::MPI_Comm_rank(data, &mut rank), "MPI_Comm_rank")?;
            Ok(Some(Comm {
                data,
                ctrl,
                ranks: ranks.to_vec(),
                rank: rank as usize,
                queue: VecDeque::new(),
                busy: false,
                failed: None,
            }))
        }
    }

    fn run(mut self, rx: Receiver<Msg>) {
        let mut idle_polls: u32 = 0;
        loop {
            // take new requests: wait for one when nothing runs
            loop {
                let msg = if self.active.is_empty() && self.comms.iter().flatten().all(|c| c.queue.is_empty())
                {
                    match rx.recv_timeout(Duration::from_millis(200)) {
                        Ok(m) => m,
                        Err(RecvTimeoutError::Timeout) => continue,
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                } else {
                    match rx.try_recv() {
                        Ok(m) => m,
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => return,
                    }
                };
                match msg {
                    Msg::Op { comm, op, work } => self.accept(comm, op, work),
                    Msg::NewComm { ranks, timeout, reply } => {
                        let r = unsafe { self.new_comm(&ranks, timeout) };
                        let _ = reply.send(r);
                    }
                    Msg::Exit { abort_code, done } => {
                        unsafe { self.exit(abort_code) };
                        let _ = done.send(());
                        return;
                    }
                }
                idle_polls = 0;
            }
            self.start_queued();
            let progressed = self.poll();
            if progressed {
                idle_polls = 0;
            } else if self.active.iter().any(|a| matches!(a.stage, Stage::Data { .. })) {
                // MPI moves data only inside its calls (each call moves a large piece): poll
                // often while data is moving, without taking the core from compute threads
                idle_polls = idle_polls.saturating_add(1);
                data_pause(idle_polls);
            } else {
                idle_polls = idle_polls.saturating_add(1);
                backoff(idle_polls);
            }
        }
    }

    /// Takes an operation: collectives queue behind their communicator's running one;
    /// point-to-point operations start at once.
    fn accept(&mut self, comm_id: CommId, op: Op, work: Work) {
        let Some(Some(comm)) = self.comms.get_mut(comm_id) else {
            work.complete(Err(err!(Distributed, "operation on a group this rank is not a member of")));
            return;
        };
        if let Some(e) = &comm.failed {
            work.complete(Err(err!(
                Distributed,
                "[Rank {}] this process group can no longer be used: an earlier operation on it failed: {e}",
                comm.ranks[comm.rank]
            )));
            return;
        }
        if op.kind.is_collective() {
            comm.queue.push_back((op, work));
        } else {
            self.begin(comm_id, op, work);
        }
    }

    fn start_queued(&mut self) {
        for id in 0..self.comms.len() {
            let next = match &mut self.comms[id] {
                Some(c) if !c.busy && c.failed.is_none() => c.queue.pop_front(),
                _ => None,
            };
            if let Some((op, work)) = next {
                self.comms[id].as_mut().unwrap().busy = true;
                self.begin(id, op, work);
            }
        }
    }

    /// Starts an operation's first stage.
    fn begin(&mut self, comm_id: CommId, op: Op, work: Work) {
        let deadline = Instant::now() + op.timeout;
        let mut a = Active {
            comm: comm_id,
            started: Instant::now(),
            op,
            work,
            deadline,
            stage: Stage::Probe,
            bufs: Buffers::default(),
        };
        let comm = self.comms[comm_id].as_ref().unwrap();
        let started = if a.op.kind.is_collective() {
            unsafe { start_fingerprints(comm, &mut a) }
        } else if matches!(a.op.kind, OpKind::Recv { .. }) {
            Ok(())
        } else {
            unsafe { start_data(comm, &mut a) }
        };
        match started {
            Ok(()) => self.active.push(a),
            Err(e) => self.finish(a, Err(e)),
        }
    }

    /// Advances every running operation; true if one moved on.
    fn poll(&mut self) -> bool {
        let mut progressed = false;
        let mut i = 0;
        while i < self.active.len() {
            let step = {
                let a = &mut self.active[i];
                let comm = self.comms[a.comm].as_ref().unwrap();
                unsafe { advance(comm, a, &mut self.scratch, &mut progressed) }
            };
            match step {
                Step::Pending => i += 1,
                Step::Done(r) => {
                    progressed = true;
                    let a = self.active.swap_remove(i);
                    self.finish(a, r);
                }
            }
        }
        progressed
    }

    /// Completes an operation: on failure, marks its communicator failed and keeps its
    /// buffers; a collective frees its communicator for the next one.
    fn finish(&mut self, a: Active, r: Result<()>) {
        if pyrite_core::profiler_record::is_active() {
            let inputs: Vec<&Tensor> = a.op.kind.main_tensor().into_iter().collect();
            pyrite_core::profiler_record::record_span(a.op.kind.profile_name(), a.started, &inputs);
        }
        let comm = self.comms[a.comm].as_mut().unwrap();
        if a.op.kind.is_collective() {
            comm.busy = false;
        }
        if let Err(e) = &r
            && is_fatal(e)
        {
            FAILED.store(true, Ordering::SeqCst);
            comm.failed = Some(e.clone());
            for (_, w) in comm.queue.drain(..) {
                w.complete(Err(err!(
                    Distributed,
                    "[Rank {}] not run: an earlier operation on this process group failed: {e}",
                    comm.ranks[comm.rank]
                )));
            }
            self.graveyard.push(a.bufs);
        }
        a.work.complete(r);
    }

    /// A communicator over `ranks`, made together by the whole world: a barrier with the
    /// timeout first (so a rank that never comes is an error), then `MPI_Comm_split`.
    unsafe fn new_comm(&mut self, ranks: &[usize], timeout: Duration) -> Result<Option<CommId>> {
        unsafe {
            let mut req = ffi::RSMPI_REQUEST_NULL;
            check(ffi::MPI_Ibarrier(self.admin, &mut req), "MPI_Ibarrier")?;
            let deadline = Instant::now() + timeout;
            let mut polls = 0;
            loop {
                let mut flag = 0;
                check(ffi::MPI_Test(&mut req, &mut flag, ffi::RSMPI_STATUS_IGNORE), "MPI_Test")?;
                if flag != 0 {
                    break;
                }
                if Instant::now() > deadline {
                    FAILED.store(true, Ordering::SeqCst);
                    bail!(
                    Distributed,
                    "[Rank {}] new_group timed out after {} ms: every rank of the world must call new_group, \
                     members or not, in the same order",
                    self.world_rank,
                    timeout.as_millis()
                );
                }
                polls += 1;
                backoff(polls);
            }
            let pos = ranks.iter().position(|&r| r == self.world_rank);
            let color = if pos.is_some() { 0 } else { ffi::RSMPI_UNDEFINED };
            let mut split = ffi::RSMPI_COMM_NULL;
            check(
                ffi::MPI_Comm_split(self.admin, color, pos.unwrap_or(0) as c_int, &mut split),
                "MPI_Comm_split",
            )?;
            let comm = self.make_comm(split, ranks)?;
            if split != ffi::RSMPI_COMM_NULL {
                ffi::MPI_Comm_free(&mut split);
            }
            Ok(comm.map(|c| {
                self.comms.push(Some(c));
                self.comms.len() - 1
            }))
        }
    }

    unsafe fn exit(&mut self, abort_code: Option<c_int>) {
        unsafe {
            if let Some(code) = abort_code {
                ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, code);
            }
            // MPI_Finalize
            self.universe.take();
        }
    }
}

/// Errors after which MPI may still touch the operation's buffers, or ranks disagree on
/// what runs next: the communicator cannot be used again.
fn is_fatal(e: &Error) -> bool {
    e.kind() == pyrite_core::ErrorKind::Distributed
}

/// Between polls of moving data: yields a few times, then sleeps 10 µs (measured on 2 ranks:
/// a 100 MB all-reduce takes 41 ms polled with yields, 47 ms with 10 µs sleeps, 65 ms with 50
/// µs sleeps, 92 ms spinning on a loaded machine).
fn data_pause(idle_polls: u32) {
    if idle_polls < 16 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(10));
    }
}

/// Spins, then yields, then sleeps a little longer each time nothing moved.
fn backoff(idle_polls: u32) {
    if idle_polls < 64 {
        std::hint::spin_loop();
    } else if idle_polls < 256 {
        std::thread::yield_now();
    } else {
        let us = (idle_polls as u64 - 255).min(50) * 2;
        std::thread::sleep(Duration::from_micros(us));
    }
}

// ---------------------------------------------------------------------------- the stages

fn c_count(n: usize, what: &str) -> Result<c_int> {
    c_int::try_from(n).map_err(|_| {
        err!(Distributed, "{what}: {n} elements is over MPI's limit of {} per message", c_int::MAX)
    })
}

/// Sends this rank's fingerprint to every other rank of the group and posts the receives of
/// theirs.
unsafe fn start_fingerprints(comm: &Comm, a: &mut Active) -> Result<()> {
    unsafe {
        let n = comm.ranks.len();
        if n == 1 {
            return start_data(comm, a);
        }
        let text = if a.op.check {
            a.op.kind.fingerprint(a.op.seq).to_string()
        } else {
            format!("{}(SeqNum={})", a.op.kind.op_type(), a.op.seq)
        };
        let mut header = vec![0u8; HEADER_LEN];
        let bytes = text.as_bytes();
        let len = bytes.len().min(HEADER_LEN - 4);
        header[..4].copy_from_slice(&(len as u32).to_le_bytes());
        header[4..4 + len].copy_from_slice(&bytes[..len]);
        a.bufs.header_out = header;
        a.bufs.headers_in = vec![vec![0u8; HEADER_LEN]; n - 1];
        let mut reqs = Vec::with_capacity(2 * (n - 1));
        let mut peers = Vec::with_capacity(n - 1);
        for (k, peer) in (0..n).filter(|&p| p != comm.rank).enumerate() {
            let mut r = ffi::RSMPI_REQUEST_NULL;
            check(
                ffi::MPI_Irecv(
                    a.bufs.headers_in[k].as_mut_ptr() as *mut c_void,
                    HEADER_LEN as c_int,
                    ffi::RSMPI_UINT8_T,
                    peer as c_int,
                    HEADER_TAG,
                    comm.ctrl,
                    &mut r,
                ),
                "MPI_Irecv",
            )?;
            reqs.push(r);
            peers.push(peer);
        }
        for peer in (0..n).filter(|&p| p != comm.rank) {
            let mut r = ffi::RSMPI_REQUEST_NULL;
            check(
                ffi::MPI_Isend(
                    a.bufs.header_out.as_ptr() as *const c_void,
                    HEADER_LEN as c_int,
                    ffi::RSMPI_UINT8_T,
                    peer as c_int,
                    HEADER_TAG,
                    comm.ctrl,
                    &mut r,
                ),
                "MPI_Isend",
            )?;
            reqs.push(r);
        }
        a.stage = Stage::Fingerprints { reqs, peers };
        Ok(())
    }
}

fn header_text(h: &[u8]) -> String {
    let len = (u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize).min(HEADER_LEN - 4);
    String::from_utf8_lossy(&h[4..4 + len]).into_owned()
}

/// Tests each request once; returns which are done.
unsafe fn test_each(reqs: &mut [ffi::MPI_Request]) -> Result<Vec<bool>> {
    unsafe {
        let mut done = Vec::with_capacity(reqs.len());
        for r in reqs.iter_mut() {
            let mut flag = 0;
            check(ffi::MPI_Test(r, &mut flag, ffi::RSMPI_STATUS_IGNORE), "MPI_Test")?;
            done.push(flag != 0);
        }
        Ok(done)
    }
}

unsafe fn advance(comm: &Comm, a: &mut Active, scratch: &mut Vec<u8>, progressed: &mut bool) -> Step {
    unsafe {
        match advance_inner(comm, a, scratch, progressed) {
            Ok(s) => s,
            Err(e) => Step::Done(Err(e)),
        }
    }
}

unsafe fn advance_inner(
    comm: &Comm,
    a: &mut Active,
    scratch: &mut Vec<u8>,
    progressed: &mut bool,
) -> Result<Step> {
    unsafe {
        let me = comm.ranks[comm.rank];
        let what = || format!("{}(SeqNum={})", a.op.kind.op_type(), a.op.seq);
        match &mut a.stage {
            Stage::Fingerprints { reqs, peers } => {
                let done = test_each(reqs)?;
                if done.iter().all(|&d| d) {
                    *progressed = true;
                    if a.op.check {
                        let mine = header_text(&a.bufs.header_out);
                        let others: Vec<(usize, String)> = peers
                            .iter()
                            .zip(&a.bufs.headers_in)
                            .map(|(&p, h)| (comm.ranks[p], header_text(h)))
                            .collect();
                        if let Some(m) = mismatch_message(me, &mine, &others) {
                            bail!(Distributed, "{m}");
                        }
                    }
                    if let Some(r) = run_in_place(comm, a, scratch) {
                        return Ok(Step::Done(r));
                    }
                    start_data(comm, a)?;
                    return Ok(Step::Pending);
                }
                if Instant::now() > a.deadline {
                    let missing: Vec<usize> =
                        peers.iter().zip(&done).filter(|&(_, &d)| !d).map(|(&p, _)| comm.ranks[p]).collect();
                    let arrived: Vec<usize> = std::iter::once(me)
                        .chain(peers.iter().zip(&done).filter(|&(_, &d)| d).map(|(&p, _)| comm.ranks[p]))
                        .collect();
                    let fp = a.op.kind.fingerprint(a.op.seq);
                    bail!(
                    Distributed,
                    "[Rank {me}] {fp} timed out after {} ms: {} never arrived (ranks that did: {}). Every rank \
                     of the group must call the same collectives in the same order; run with \
                     PYRITE_DISTRIBUTED_DEBUG=DETAIL to check each collective's op, shape and dtype across ranks",
                    a.op.timeout.as_millis(),
                    rank_list(&missing),
                    arrived.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")
                );
                }
                Ok(Step::Pending)
            }
            Stage::Probe => {
                let OpKind::Recv { tensor, peer, tag } = &a.op.kind else { unreachable!() };
                let src = peer.map(|p| p as c_int).unwrap_or(ffi::RSMPI_ANY_SOURCE);
                let mut flag = 0;
                let mut status: ffi::MPI_Status = std::mem::zeroed();
                check(ffi::MPI_Iprobe(src, *tag, comm.data, &mut flag, &mut status), "MPI_Iprobe")?;
                if flag == 0 {
                    if Instant::now() > a.deadline {
                        bail!(
                            Distributed,
                            "[Rank {me}] recv from {} (tag {tag}) timed out after {} ms: nothing was sent",
                            peer.map(|p| format!("rank {}", comm.ranks[p]))
                                .unwrap_or_else(|| "any rank".into()),
                            a.op.timeout.as_millis()
                        );
                    }
                    return Ok(Step::Pending);
                }
                *progressed = true;
                let mut count: c_int = 0;
                check(ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count), "MPI_Get_count")?;
                let want = tensor.numel() * tensor.element_size();
                let from = status.MPI_SOURCE;
                if count as usize != want {
                    // take the message off the queue, then say what was wrong with it
                    let mut scratch = vec![0u8; count.max(0) as usize];
                    check(
                        ffi::MPI_Recv(
                            scratch.as_mut_ptr() as *mut c_void,
                            count,
                            ffi::RSMPI_UINT8_T,
                            from,
                            status.MPI_TAG,
                            comm.data,
                            ffi::RSMPI_STATUS_IGNORE,
                        ),
                        "MPI_Recv",
                    )?;
                    bail!(
                    Value,
                    "[Rank {me}] recv: the message from rank {} (tag {}) has {count} bytes, but the tensor to \
                     receive it ({:?}, {}) has {want}: send and recv need the same shape and dtype",
                    comm.ranks[from as usize],
                    status.MPI_TAG,
                    tensor.dims(),
                    tensor.dtype()
                );
                }
                a.work.set_source_rank(comm.ranks[from as usize]);
                a.bufs.recv = vec![0u8; want];
                let mut r = ffi::RSMPI_REQUEST_NULL;
                check(
                    ffi::MPI_Irecv(
                        a.bufs.recv.as_mut_ptr() as *mut c_void,
                        count,
                        ffi::RSMPI_UINT8_T,
                        from,
                        status.MPI_TAG,
                        comm.data,
                        &mut r,
                    ),
                    "MPI_Irecv",
                )?;
                a.stage = Stage::Data { reqs: vec![r] };
                Ok(Step::Pending)
            }
            Stage::Data { reqs } => {
                let done = test_each(reqs)?;
                if done.iter().all(|&d| d) {
                    *progressed = true;
                    finish_data(comm, a)?;
                    return Ok(Step::Done(Ok(())));
                }
                if Instant::now() > a.deadline {
                    bail!(
                        Distributed,
                        "[Rank {me}] {} timed out after {} ms while moving data{}: a rank may have died or \
                     stopped mid-operation",
                        what(),
                        a.op.timeout.as_millis(),
                        match &a.op.kind {
                            OpKind::Send { peer, .. } =>
                                format!(" (rank {} never received it)", comm.ranks[*peer]),
                            _ => String::new(),
                        }
                    );
                }
                Ok(Step::Pending)
            }
        }
    }
}

fn rank_list(ranks: &[usize]) -> String {
    match ranks {
        [r] => format!("rank {r}"),
        _ => format!("ranks {}", ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

// ------------------------------------------------------------------- moving the data

/// The MPI datatype and op a reduction runs in, and the dtype its buffers hold (16-bit floats
/// reduce in f32).
fn reduction(dtype: DType, op: ReduceOp, what: &str) -> Result<(ffi::MPI_Datatype, ffi::MPI_Op, DType)> {
    unsafe {
        let (dt, red) = match dtype {
            DType::Bool => (ffi::RSMPI_UINT8_T, DType::Bool),
            DType::U8 => (ffi::RSMPI_UINT8_T, DType::U8),
            DType::I32 => (ffi::RSMPI_INT32_T, DType::I32),
            DType::I64 => (ffi::RSMPI_INT64_T, DType::I64),
            DType::F16 | DType::BF16 | DType::F32 => (ffi::RSMPI_FLOAT, DType::F32),
            DType::F64 => (ffi::RSMPI_DOUBLE, DType::F64),
        };
        if op == ReduceOp::Avg && !dtype.is_floating_point() {
            bail!(DType, "{what}: ReduceOp.AVG needs a floating-point tensor, got {dtype}");
        }
        let mpi_op = match (dtype, op) {
            (DType::Bool, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Avg) => ffi::RSMPI_LOR,
            (DType::Bool, ReduceOp::Product | ReduceOp::Min) => ffi::RSMPI_LAND,
            (_, ReduceOp::Sum | ReduceOp::Avg) => ffi::RSMPI_SUM,
            (_, ReduceOp::Product) => ffi::RSMPI_PROD,
            (_, ReduceOp::Min) => ffi::RSMPI_MIN,
            (_, ReduceOp::Max) => ffi::RSMPI_MAX,
        };
        Ok((dt, mpi_op, red))
    }
}

/// A tensor's elements as contiguous bytes of `dtype`.
fn bytes_as(t: &Tensor, dtype: DType) -> Result<Vec<u8>> {
    if t.dtype() == dtype {
        t.to_raw_bytes()
    } else {
        t.to_dtype(dtype)?.to_raw_bytes()
    }
}

/// Writes `bytes` (elements of `dtype`, `t`'s shape) into `t`, converting to its dtype and
/// dividing by `avg` first where given.
fn write_into(t: &Tensor, bytes: &[u8], dtype: DType, avg: Option<usize>) -> Result<()> {
    let n = t.numel();
    if dtype == t.dtype() && avg.is_none() && t.is_contiguous() {
        let es = t.element_size();
        let off = t.storage_offset() * es;
        t.untyped_storage().with_bytes_mut(|s| s[off..off + n * es].copy_from_slice(&bytes[..n * es]));
        return Ok(());
    }
    let mut v = Tensor::from_raw_bytes(bytes, t.dims(), dtype)?;
    if let Some(k) = avg {
        v = v.div_scalar(k as f64)?;
    }
    if v.dtype() != t.dtype() {
        v = v.to_dtype(t.dtype())?;
    }
    let _ng = autograd::no_grad();
    if t.is_contiguous() {
        let es = t.element_size();
        let off = t.storage_offset() * es;
        let b = v.to_raw_bytes()?;
        t.untyped_storage().with_bytes_mut(|s| s[off..off + n * es].copy_from_slice(&b));
    } else {
        t.detach().copy_(&v)?;
    }
    Ok(())
}

/// Writes consecutive pieces of `bytes` into `outputs`, each its own size.
fn write_pieces(outputs: &[Tensor], bytes: &[u8]) -> Result<()> {
    let mut off = 0;
    for t in outputs {
        let len = t.numel() * t.element_size();
        write_into(t, &bytes[off..off + len], t.dtype(), None)?;
        off += len;
    }
    Ok(())
}

/// All-reduce or broadcast of a contiguous tensor straight into its memory: the data phase
/// runs to its end here, with the tensor's storage locked (a reader waits for the result).
/// Every rank has arrived by now, so it ends soon unless a rank dies, and the deadline still
/// holds. An all-reduce sends from a copy in `scratch`, which is kept for the next one
/// (OpenMPI's in-place all-reduce is twice as slow: it copies through a fresh temporary).
/// `None` for the operations that take the staged path.
unsafe fn run_in_place(comm: &Comm, a: &mut Active, scratch: &mut Vec<u8>) -> Option<Result<()>> {
    unsafe {
        let n = comm.ranks.len();
        let (tensor, reduce, root) = match &a.op.kind {
            OpKind::AllReduce { tensor, op }
                if tensor.is_contiguous() && !matches!(tensor.dtype(), DType::F16 | DType::BF16) =>
            {
                (tensor, Some(*op), None)
            }
            OpKind::Broadcast { tensor, root } if tensor.is_contiguous() => (tensor, None, Some(*root)),
            _ => return None,
        };
        let numel = tensor.numel();
        let es = tensor.element_size();
        let off = tensor.storage_offset() * es;
        let deadline = a.deadline;
        let me = comm.ranks[comm.rank];
        let what = format!("{}(SeqNum={})", a.op.kind.op_type(), a.op.seq);
        let timeout_ms = a.op.timeout.as_millis();
        let storage = tensor.untyped_storage();
        Some(storage.with_bytes_mut(|bytes| -> Result<()> {
        let buf = &mut bytes[off..off + numel * es];
        let mut req = ffi::RSMPI_REQUEST_NULL;
        match (reduce, root) {
            (Some(op), _) => {
                let (dt, mpi_op, _) = reduction(tensor.dtype(), op, "all_reduce")?;
                let count = c_count(numel, "all_reduce")?;
                if scratch.len() < buf.len() {
                    scratch.resize(buf.len(), 0);
                }
                scratch[..buf.len()].copy_from_slice(buf);
                check(
                    ffi::MPI_Iallreduce(
                        scratch.as_ptr() as *const c_void,
                        buf.as_mut_ptr() as *mut c_void,
                        count,
                        dt,
                        mpi_op,
                        comm.data,
                        &mut req,
                    ),
                    "MPI_Iallreduce",
                )?;
            }
            (None, Some(root)) => {
                let count = c_count(buf.len(), "broadcast")?;
                check(
                    ffi::MPI_Ibcast(buf.as_mut_ptr() as *mut c_void, count, ffi::RSMPI_UINT8_T, root as c_int, comm.data, &mut req),
                    "MPI_Ibcast",
                )?;
            }
            _ => unreachable!(),
        }
        let mut polls = 0u32;
        loop {
            let mut flag = 0;
            check(ffi::MPI_Test(&mut req, &mut flag, ffi::RSMPI_STATUS_IGNORE), "MPI_Test")?;
            if flag != 0 {
                break;
            }
            polls = polls.saturating_add(1);
            if Instant::now() > deadline {
                // MPI may still read the copy and write the tensor: keep both alive for good
                std::mem::forget(tensor.clone());
                std::mem::forget(std::mem::take(scratch));
                bail!(
                    Distributed,
                    "[Rank {me}] {what} timed out after {timeout_ms} ms while moving data: a rank may have died or stopped mid-operation"
                );
            }
            data_pause(polls);
        }
        if reduce == Some(ReduceOp::Avg) {
            divide(buf, tensor.dtype(), n);
        }
        Ok(())
    }))
    }
}

/// Divides the elements of `buf` (of `dtype`, f32 or f64) by `n`, in place.
fn divide(buf: &mut [u8], dtype: DType, n: usize) {
    fn each<T: Copy>(buf: &mut [u8], f: impl Fn(T) -> T) {
        // SAFETY: the storage is allocated for elements of T, so aligned; the length is a
        // whole number of them, and any bit pattern is a valid float.
        let (pre, mid, post) = unsafe { buf.align_to_mut::<T>() };
        assert!(pre.is_empty() && post.is_empty(), "a tensor's elements are aligned");
        for v in mid {
            *v = f(*v);
        }
    }
    match dtype {
        DType::F32 => each(buf, |v: f32| v / n as f32),
        DType::F64 => each(buf, |v: f64| v / n as f64),
        _ => unreachable!("AVG is for floating-point tensors"),
    }
}

/// Posts the operation's MPI call(s).
unsafe fn start_data(comm: &Comm, a: &mut Active) -> Result<()> {
    unsafe {
        let n = comm.ranks.len();
        let b = &mut a.bufs;
        let mut req = ffi::RSMPI_REQUEST_NULL;
        let byte = ffi::RSMPI_UINT8_T;
        match &a.op.kind {
            OpKind::AllReduce { tensor, op } => {
                let (dt, mpi_op, red) = reduction(tensor.dtype(), *op, "all_reduce")?;
                b.send = bytes_as(tensor, red)?;
                b.recv = vec![0u8; b.send.len()];
                let count = c_count(tensor.numel(), "all_reduce")?;
                check(
                    ffi::MPI_Iallreduce(
                        b.send.as_ptr() as *const c_void,
                        b.recv.as_mut_ptr() as *mut c_void,
                        count,
                        dt,
                        mpi_op,
                        comm.data,
                        &mut req,
                    ),
                    "MPI_Iallreduce",
                )?;
            }
            OpKind::Broadcast { tensor, root } => {
                b.recv = tensor.to_raw_bytes()?;
                let count = c_count(b.recv.len(), "broadcast")?;
                check(
                    ffi::MPI_Ibcast(
                        b.recv.as_mut_ptr() as *mut c_void,
                        count,
                        byte,
                        *root as c_int,
                        comm.data,
                        &mut req,
                    ),
                    "MPI_Ibcast",
                )?;
            }
            OpKind::Reduce { tensor, root, op } => {
                let (dt, mpi_op, red) = reduction(tensor.dtype(), *op, "reduce")?;
                b.send = bytes_as(tensor, red)?;
                b.recv = if comm.rank == *root { vec![0u8; b.send.len()] } else { vec![0u8; 1] };
                let count = c_count(tensor.numel(), "reduce")?;
                check(
                    ffi::MPI_Ireduce(
                        b.send.as_ptr() as *const c_void,
                        b.recv.as_mut_ptr() as *mut c_void,
                        count,
                        dt,
                        mpi_op,
                        *root as c_int,
                        comm.data,
                        &mut req,
                    ),
                    "MPI_Ireduce",
                )?;
            }
            OpKind::AllGather { input, .. } => {
                b.send = input.to_raw_bytes()?;
                b.recv = vec![0u8; b.send.len() * n];
                let count = c_count(b.send.len(), "all_gather")?;
                check(
                    ffi::MPI_Iallgather(
                        b.send.as_ptr() as *const c_void,
                        count,
                        byte,
                        b.recv.as_mut_ptr() as *mut c_void,
                        count,
                        byte,
                        comm.data,
                        &mut req,
                    ),
                    "MPI_Iallgather",
                )?;
            }
            OpKind::Gather { input, root, .. } => {
                b.send = input.to_raw_bytes()?;
                b.recv = if comm.rank == *root { vec![0u8; b.send.len() * n] } else { vec![0u8; 1] };
                let count = c_count(b.send.len(), "gather")?;
                check(
                    ffi::MPI_Igather(
                        b.send.as_ptr() as *const c_void,
                        count,
                        byte,
                        b.recv.as_mut_ptr() as *mut c_void,
                        count,
                        byte,
                        *root as c_int,
                        comm.data,
                        &mut req,
                    ),
                    "MPI_Igather",
                )?;
            }
            OpKind::Scatter { output, inputs, root } => {
                if comm.rank == *root {
                    for t in inputs {
                        b.send.extend_from_slice(&t.to_raw_bytes()?);
                    }
                } else {
                    b.send = vec![0u8; 1];
                }
                b.recv = vec![0u8; output.numel() * output.element_size()];
                let count = c_count(b.recv.len(), "scatter")?;
                check(
                    ffi::MPI_Iscatter(
                        b.send.as_ptr() as *const c_void,
                        count,
                        byte,
                        b.recv.as_mut_ptr() as *mut c_void,
                        count,
                        byte,
                        *root as c_int,
                        comm.data,
                        &mut req,
                    ),
                    "MPI_Iscatter",
                )?;
            }
            OpKind::ReduceScatter { output, input, op } => {
                let (dt, mpi_op, red) = reduction(input.dtype(), *op, "reduce_scatter_tensor")?;
                b.send = bytes_as(input, red)?;
                b.recv = vec![0u8; b.send.len() / n];
                let count = c_count(output.numel(), "reduce_scatter_tensor")?;
                check(
                    ffi::MPI_Ireduce_scatter_block(
                        b.send.as_ptr() as *const c_void,
                        b.recv.as_mut_ptr() as *mut c_void,
                        count,
                        dt,
                        mpi_op,
                        comm.data,
                        &mut req,
                    ),
                    "MPI_Ireduce_scatter_block",
                )?;
            }
            OpKind::AllToAll { output, input, send_counts, recv_counts } => {
                let es = input.element_size();
                b.send = input.to_raw_bytes()?;
                b.recv = vec![0u8; output.numel() * es];
                let displs = |counts: &[usize]| -> Result<(Vec<c_int>, Vec<c_int>)> {
                    let mut c = Vec::with_capacity(counts.len());
                    let mut d = Vec::with_capacity(counts.len());
                    let mut off = 0usize;
                    for &k in counts {
                        c.push(c_count(k * es, "all_to_all_single")?);
                        d.push(c_count(off, "all_to_all_single")?);
                        off += k * es;
                    }
                    Ok((c, d))
                };
                (b.counts, b.displs) = displs(send_counts)?;
                (b.recv_counts, b.recv_displs) = displs(recv_counts)?;
                check(
                    ffi::MPI_Ialltoallv(
                        b.send.as_ptr() as *const c_void,
                        b.counts.as_ptr(),
                        b.displs.as_ptr(),
                        byte,
                        b.recv.as_mut_ptr() as *mut c_void,
                        b.recv_counts.as_ptr(),
                        b.recv_displs.as_ptr(),
                        byte,
                        comm.data,
                        &mut req,
                    ),
                    "MPI_Ialltoallv",
                )?;
            }
            OpKind::Barrier => {
                check(ffi::MPI_Ibarrier(comm.data, &mut req), "MPI_Ibarrier")?;
            }
            OpKind::Send { tensor, peer, tag } => {
                b.send = tensor.to_raw_bytes()?;
                let count = c_count(b.send.len(), "send")?;
                check(
                    ffi::MPI_Isend(
                        b.send.as_ptr() as *const c_void,
                        count,
                        byte,
                        *peer as c_int,
                        *tag,
                        comm.data,
                        &mut req,
                    ),
                    "MPI_Isend",
                )?;
            }
            OpKind::Recv { .. } => unreachable!("a receive starts with its probe"),
        }
        a.stage = Stage::Data { reqs: vec![req] };
        Ok(())
    }
}

/// Writes what arrived into the operation's tensors.
fn finish_data(comm: &Comm, a: &mut Active) -> Result<()> {
    let n = comm.ranks.len();
    let b = &a.bufs;
    let avg = |op: &ReduceOp| (*op == ReduceOp::Avg).then_some(n);
    match &a.op.kind {
        OpKind::AllReduce { tensor, op } => {
            let (_, _, red) = reduction(tensor.dtype(), *op, "all_reduce")?;
            write_into(tensor, &b.recv, red, avg(op))
        }
        OpKind::Broadcast { tensor, root } => {
            if comm.rank != *root {
                write_into(tensor, &b.recv, tensor.dtype(), None)?;
            }
            Ok(())
        }
        OpKind::Reduce { tensor, root, op } => {
            if comm.rank == *root {
                let (_, _, red) = reduction(tensor.dtype(), *op, "reduce")?;
                write_into(tensor, &b.recv, red, avg(op))?;
            }
            Ok(())
        }
        OpKind::AllGather { outputs, .. } => write_pieces(outputs, &b.recv),
        OpKind::Gather { outputs, root, .. } => {
            if comm.rank == *root {
                write_pieces(outputs, &b.recv)?;
            }
            Ok(())
        }
        OpKind::Scatter { output, .. } => write_into(output, &b.recv, output.dtype(), None),
        OpKind::ReduceScatter { output, input, op } => {
            let (_, _, red) = reduction(input.dtype(), *op, "reduce_scatter_tensor")?;
            write_into(output, &b.recv, red, avg(op))
        }
        OpKind::AllToAll { output, .. } => write_into(output, &b.recv, output.dtype(), None),
        OpKind::Barrier | OpKind::Send { .. } => Ok(()),
        OpKind::Recv { tensor, .. } => write_into(tensor, &b.recv, tensor.dtype(), None),
    }
}
