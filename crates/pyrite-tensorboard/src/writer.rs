//! [`SummaryWriter`] (torch.utils.tensorboard's) and the [`FileWriter`] of one event file.

use crate::event::{Event, HParamValue, Summary, SESSION_LOG_START};
use crate::record::frame;
use crate::summary::{self, HistogramValues};
use pyrite_core::{err, Result, Tensor};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch (`time.time()`).
pub fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// The machine's name (`socket.gethostname()`), `localhost` if unknown.
pub fn hostname() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success
        // (the last byte stays 0 otherwise).
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
        if rc == 0 {
            let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            if n > 0 {
                return String::from_utf8_lossy(&buf[..n]).into_owned();
            }
        }
    }
    std::env::var("COMPUTERNAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "localhost".into())
}

/// Local time as `%b%d_%H-%M-%S` (`Jan05_14-03-59`), PyTorch's default run-folder stamp.
fn local_stamp() -> String {
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    #[cfg(unix)]
    {
        let t = secs as libc::time_t;
        // SAFETY: `tm` is plain data, fully written by localtime_r on success.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        if !unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
            return format!(
                "{}{:02}_{:02}-{:02}-{:02}",
                MONTHS[tm.tm_mon.clamp(0, 11) as usize],
                tm.tm_mday,
                tm.tm_hour,
                tm.tm_min,
                tm.tm_sec
            );
        }
    }
    // UTC from the civil-from-days algorithm.
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    format!("{}{:02}_{:02}-{:02}-{:02}", MONTHS[(m - 1) as usize], d, rem / 3600, rem % 3600 / 60, rem % 60)
}

static GLOBAL_UID: AtomicU64 = AtomicU64::new(0);

/// One event file: `events.out.tfevents.<time>.<hostname>.<pid>.<n><suffix>`, its first record
/// `file_version: "brain.Event:2"` (TensorBoard's `EventFileWriter`). Records are queued and
/// written whole: when more than `max_queue` wait, when `flush_secs` passed since the last
/// write, on [`flush`](FileWriter::flush), [`close`](FileWriter::close) and drop.
pub struct FileWriter {
    log_dir: PathBuf,
    path: PathBuf,
    file: Option<std::fs::File>,
    queue: Vec<Vec<u8>>,
    max_queue: usize,
    flush_secs: f64,
    last_flush: Instant,
}

impl FileWriter {
    /// Creates `log_dir` (and parents) and a new event file in it.
    pub fn new(
        log_dir: impl AsRef<Path>,
        max_queue: usize,
        flush_secs: f64,
        filename_suffix: &str,
    ) -> Result<FileWriter> {
        let log_dir = log_dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&log_dir).map_err(|e| {
            err!(Io, "SummaryWriter: cannot create the log folder {}: {e}", log_dir.display())
        })?;
        let name = format!(
            "events.out.tfevents.{:010}.{}.{}.{}{}",
            now() as u64,
            hostname(),
            std::process::id(),
            GLOBAL_UID.fetch_add(1, Ordering::Relaxed),
            filename_suffix
        );
        let path = log_dir.join(name);
        let file =
            std::fs::OpenOptions::new().create(true).append(true).open(&path).map_err(|e| {
                err!(Io, "SummaryWriter: cannot create the event file {}: {e}", path.display())
            })?;
        let mut w = FileWriter {
            log_dir,
            path,
            file: Some(file),
            queue: vec![],
            max_queue,
            flush_secs,
            last_flush: Instant::now(),
        };
        w.add_event(Event {
            wall_time: now(),
            file_version: Some("brain.Event:2".into()),
            ..Default::default()
        })?;
        w.flush()?;
        Ok(w)
    }

    /// The folder of the event file.
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// The event file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues an event (written whole at the next flush).
    pub fn add_event(&mut self, event: Event) -> Result<()> {
        if self.file.is_none() {
            return Err(err!(Io, "SummaryWriter: the event file {} is closed", self.path.display()));
        }
        self.queue.push(frame(&event.encode()));
        if self.queue.len() > self.max_queue || self.last_flush.elapsed().as_secs_f64() >= self.flush_secs {
            self.flush()?;
        }
        Ok(())
    }

    /// Queues a summary at `step` (none: 0) and `walltime` (none: now).
    pub fn add_summary(&mut self, summary: Summary, step: Option<u64>, walltime: Option<f64>) -> Result<()> {
        self.add_event(Event {
            wall_time: walltime.unwrap_or_else(now),
            step: step.unwrap_or(0) as i64,
            summary: Some(summary),
            ..Default::default()
        })
    }

    /// Writes the queued records, whole, in one write.
    pub fn flush(&mut self) -> Result<()> {
        self.last_flush = Instant::now();
        let Some(file) = self.file.as_mut() else { return Ok(()) };
        if self.queue.is_empty() {
            return Ok(());
        }
        let bytes: Vec<u8> = self.queue.concat();
        file.write_all(&bytes)
            .and_then(|_| file.flush())
            .map_err(|e| err!(Io, "SummaryWriter: writing {}: {e}", self.path.display()))?;
        self.queue.clear();
        Ok(())
    }

    /// Flushes and closes the file; later events are errors.
    pub fn close(&mut self) -> Result<()> {
        let r = self.flush();
        if r.is_ok() {
            self.file = None;
        }
        r
    }
}

impl Drop for FileWriter {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// [`SummaryWriter`]'s options, with torch's defaults.
#[derive(Clone, Debug)]
pub struct SummaryWriterOptions {
    /// The folder of the event files; `None`: `runs/<%b%d_%H-%M-%S>_<hostname><comment>`.
    pub log_dir: Option<PathBuf>,
    /// Appended to the default `log_dir` (no effect when `log_dir` is given).
    pub comment: String,
    /// After a crash at step T+X, resuming at step T: events at steps >= T are hidden
    /// (a `SessionLog.START` at this step).
    pub purge_step: Option<u64>,
    /// How many events wait in memory before a write (10).
    pub max_queue: usize,
    /// How many seconds at most between writes (120), checked at each event.
    pub flush_secs: f64,
    /// Appended to the event files' names.
    pub filename_suffix: String,
}

impl Default for SummaryWriterOptions {
    fn default() -> Self {
        SummaryWriterOptions {
            log_dir: None,
            comment: String::new(),
            purge_step: None,
            max_queue: 10,
            flush_secs: 120.0,
            filename_suffix: String::new(),
        }
    }
}

/// Writes TensorBoard event files, like `torch.utils.tensorboard.SummaryWriter`. The event file
/// is created with the writer (so an unwritable folder is an error at once); [`close`] or
/// drop writes what is queued.
///
/// [`close`]: SummaryWriter::close
pub struct SummaryWriter {
    options: SummaryWriterOptions,
    log_dir: PathBuf,
    file_writer: FileWriter,
    /// `add_scalars`' writers, by folder.
    all_writers: BTreeMap<PathBuf, FileWriter>,
}

impl SummaryWriter {
    /// A writer into `log_dir` with the default options.
    pub fn new(log_dir: impl AsRef<Path>) -> Result<SummaryWriter> {
        SummaryWriter::with_options(SummaryWriterOptions {
            log_dir: Some(log_dir.as_ref().to_path_buf()),
            ..Default::default()
        })
    }

    /// A writer with options (`log_dir: None` for torch's `runs/<datetime>_<hostname>`).
    pub fn with_options(options: SummaryWriterOptions) -> Result<SummaryWriter> {
        let log_dir = match &options.log_dir {
            Some(d) => d.clone(),
            None => Path::new("runs").join(format!("{}_{}{}", local_stamp(), hostname(), options.comment)),
        };
        let mut file_writer =
            FileWriter::new(&log_dir, options.max_queue, options.flush_secs, &options.filename_suffix)?;
        if let Some(step) = options.purge_step {
            file_writer.add_event(Event {
                wall_time: now(),
                step: step as i64,
                file_version: Some("brain.Event:2".into()),
                ..Default::default()
            })?;
            file_writer.add_event(Event {
                wall_time: now(),
                step: step as i64,
                session_log: Some(SESSION_LOG_START),
                ..Default::default()
            })?;
        }
        Ok(SummaryWriter { options, log_dir, file_writer, all_writers: BTreeMap::new() })
    }

    /// The folder the event files go to (`get_logdir()`).
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// The main event file.
    pub fn file_path(&self) -> &Path {
        self.file_writer.path()
    }

    /// The writer of the main event file (torch's `_get_file_writer()`).
    pub fn file_writer(&mut self) -> &mut FileWriter {
        &mut self.file_writer
    }

    /// Writes any summary (see [`summary`](crate::summary)) at `step` and `walltime` (none: now).
    pub fn add_summary(&mut self, summary: Summary, step: Option<u64>, walltime: Option<f64>) -> Result<()> {
        self.file_writer.add_summary(summary, step, walltime)
    }

    /// `add_scalar(tag, scalar_value, global_step)`; the value is stored as a 32-bit float.
    pub fn add_scalar(&mut self, tag: &str, value: f64, global_step: u64) -> Result<()> {
        self.add_scalar_with(tag, value, Some(global_step), None)
    }

    /// `add_scalar` with an optional step and wall time.
    pub fn add_scalar_with(
        &mut self,
        tag: &str,
        value: f64,
        step: Option<u64>,
        walltime: Option<f64>,
    ) -> Result<()> {
        self.add_summary(summary::scalar(tag, value), step, walltime)
    }

    /// `add_scalars(main_tag, tag_scalar_dict, global_step)`: each value goes, under the tag
    /// `main_tag`, to its own event file in `log_dir/<main_tag with / as _>_<tag>`, so that
    /// TensorBoard draws them in one chart.
    pub fn add_scalars<S: AsRef<str>>(
        &mut self,
        main_tag: &str,
        values: &[(S, f64)],
        global_step: u64,
    ) -> Result<()> {
        let walltime = now();
        for (tag, v) in values {
            let dir = PathBuf::from(format!(
                "{}/{}_{}",
                self.log_dir.display(),
                main_tag.replace('/', "_"),
                tag.as_ref()
            ));
            if !self.all_writers.contains_key(&dir) {
                let w = FileWriter::new(
                    &dir,
                    self.options.max_queue,
                    self.options.flush_secs,
                    &self.options.filename_suffix,
                )?;
                self.all_writers.insert(dir.clone(), w);
            }
            let w = self.all_writers.get_mut(&dir).expect("inserted above");
            w.add_summary(summary::scalar(main_tag, *v), Some(global_step), Some(walltime))?;
        }
        Ok(())
    }

    /// `add_histogram(tag, values, global_step)` with PyTorch's default `bins="tensorflow"`.
    pub fn add_histogram<V: HistogramValues + ?Sized>(
        &mut self,
        tag: &str,
        values: &V,
        global_step: u64,
    ) -> Result<()> {
        self.add_histogram_with(tag, values, Some(global_step), None)
    }

    /// `add_histogram` with an optional step and wall time.
    pub fn add_histogram_with<V: HistogramValues + ?Sized>(
        &mut self,
        tag: &str,
        values: &V,
        step: Option<u64>,
        walltime: Option<f64>,
    ) -> Result<()> {
        let s = summary::histogram(tag, values)?;
        self.add_summary(s, step, walltime)
    }

    /// `add_text(tag, text_string, global_step)` (shown under `<tag>/text_summary`).
    pub fn add_text(&mut self, tag: &str, text: &str, global_step: u64) -> Result<()> {
        self.add_summary(summary::text(tag, text), Some(global_step), None)
    }

    /// `add_image(tag, img_tensor, global_step)` with torch's default `dataformats="CHW"`.
    pub fn add_image(&mut self, tag: &str, img: &Tensor, global_step: u64) -> Result<()> {
        self.add_image_with(tag, img, global_step, "CHW")
    }

    /// `add_image(..., dataformats=)`: `"CHW"`, `"HWC"` or `"HW"`.
    pub fn add_image_with(
        &mut self,
        tag: &str,
        img: &Tensor,
        global_step: u64,
        dataformats: &str,
    ) -> Result<()> {
        let s = summary::image(tag, img, dataformats)?;
        self.add_summary(s, Some(global_step), None)
    }

    /// `add_hparams(hparam_dict, metric_dict)`: as PyTorch, into a new run folder
    /// `log_dir/<time.time()>` holding the hparams plugin's three summaries and each metric as a
    /// scalar.
    pub fn add_hparams<K: AsRef<str>, V: Into<HParamValue> + Clone, M: AsRef<str>>(
        &mut self,
        hparams: &[(K, V)],
        metrics: &[(M, f64)],
    ) -> Result<()> {
        self.add_hparams_with(hparams, metrics, None, None)
    }

    /// `add_hparams(..., run_name=, global_step=)`.
    pub fn add_hparams_with<K: AsRef<str>, V: Into<HParamValue> + Clone, M: AsRef<str>>(
        &mut self,
        hparams: &[(K, V)],
        metrics: &[(M, f64)],
        run_name: Option<&str>,
        global_step: Option<u64>,
    ) -> Result<()> {
        let run = run_name.map(str::to_string).unwrap_or_else(|| python_time_str(now()));
        let mut w = SummaryWriter::new(self.log_dir.join(run))?;
        w.write_hparams(hparams, metrics.iter().map(|(m, _)| m.as_ref().to_string()).collect(), global_step)?;
        for (m, v) in metrics {
            w.add_scalar_with(m.as_ref(), *v, global_step, None)?;
        }
        w.close()
    }

    /// Writes the hparams plugin's three summaries into this writer's own event file (what
    /// Lightning's TensorBoardLogger does), naming the metrics' tags.
    pub fn write_hparams<K: AsRef<str>, V: Into<HParamValue> + Clone>(
        &mut self,
        hparams: &[(K, V)],
        metric_tags: Vec<String>,
        step: Option<u64>,
    ) -> Result<()> {
        let hp: Vec<(String, HParamValue)> =
            hparams.iter().map(|(k, v)| (k.as_ref().to_string(), v.clone().into())).collect();
        let (exp, ssi, sei) = summary::hparams(&hp, &metric_tags);
        self.add_summary(exp, step, None)?;
        self.add_summary(ssi, step, None)?;
        self.add_summary(sei, step, None)
    }

    /// Writes what is queued, in every event file of the writer.
    pub fn flush(&mut self) -> Result<()> {
        self.file_writer.flush()?;
        for w in self.all_writers.values_mut() {
            w.flush()?;
        }
        Ok(())
    }

    /// Flushes and closes the event files.
    pub fn close(&mut self) -> Result<()> {
        self.file_writer.close()?;
        for w in self.all_writers.values_mut() {
            w.close()?;
        }
        Ok(())
    }
}

/// `str(time.time())`: Python's shortest repr of a float.
fn python_time_str(t: f64) -> String {
    let s = format!("{t}");
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}
