//! GPUtil's logic on device records: [`Gpu`], `getAvailable`'s filter and order, and
//! `showUtilization`'s table. Nothing here talks to a driver: a [`GpuSource`] supplies the
//! records (NVML in [`crate::NvmlSource`], a `Vec<Gpu>` in tests), so every rule is testable
//! with synthetic GPUs.

use std::fmt::Write as _;
use std::str::FromStr;
use std::time::Duration;

use pyrite_core::{Error, ErrorKind, Result};

/// One GPU as `nvidia-smi --query-gpu=...` reports it: what a [`GpuSource`] produces.
///
/// Numbers that the driver cannot give (an unsupported sensor, `[N/A]`) are `NaN`, as
/// GPUtil's `safeFloatCast` makes them; strings keep the driver's text (`[N/A]`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuRecord {
    /// The device index (`nvidia-smi`'s `index`).
    pub id: usize,
    /// `GPU-xxxxxxxx-...`.
    pub uuid: String,
    /// `NVIDIA H100 80GB HBM3`, ...
    pub name: String,
    /// GPU utilization in 0..=1 (`utilization.gpu / 100`).
    pub load: f64,
    /// Total memory in MB (MiB, `nvidia-smi`'s `memory.total` with `nounits`).
    pub memory_total: f64,
    /// Used memory in MB.
    pub memory_used: f64,
    /// Free memory in MB.
    pub memory_free: f64,
    /// GPU core temperature in degrees C.
    pub temperature: f64,
    /// The driver version, `550.54.15`.
    pub driver: String,
    /// The board serial number (`[N/A]` on most consumer boards).
    pub serial: String,
    /// Whether a display is connected: `Enabled` / `Disabled` (`display_mode`).
    pub display_mode: String,
    /// Whether a display is initialized on the GPU: `Enabled` / `Disabled` (`display_active`).
    pub display_active: String,
}

/// GPUtil's `GPU`: a [`GpuRecord`] plus `memory_util = memory_used / memory_total`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gpu {
    /// The device index (`GPU.id`).
    pub id: usize,
    /// `GPU.uuid`.
    pub uuid: String,
    /// `GPU.name`.
    pub name: String,
    /// `GPU.load`: utilization in 0..=1, `NaN` when unknown.
    pub load: f64,
    /// `GPU.memoryTotal`, MB.
    pub memory_total: f64,
    /// `GPU.memoryUsed`, MB.
    pub memory_used: f64,
    /// `GPU.memoryFree`, MB.
    pub memory_free: f64,
    /// `GPU.memoryUtil`: `memory_used / memory_total` in 0..=1 (`NaN` when either is unknown
    /// or the total is zero).
    pub memory_util: f64,
    /// `GPU.temperature`, degrees C.
    pub temperature: f64,
    /// `GPU.driver`.
    pub driver: String,
    /// `GPU.serial`.
    pub serial: String,
    /// `GPU.display_mode`.
    pub display_mode: String,
    /// `GPU.display_active`.
    pub display_active: String,
}

impl From<GpuRecord> for Gpu {
    fn from(r: GpuRecord) -> Gpu {
        // GPUtil divides float(memoryUsed) / float(memoryTotal); a zero total would raise there,
        // here it is NaN (unknown), which the availability rules treat as GPUtil treats NaN.
        let memory_util = if r.memory_total == 0.0 { f64::NAN } else { r.memory_used / r.memory_total };
        Gpu {
            id: r.id,
            uuid: r.uuid,
            name: r.name,
            load: r.load,
            memory_total: r.memory_total,
            memory_used: r.memory_used,
            memory_free: r.memory_free,
            memory_util,
            temperature: r.temperature,
            driver: r.driver,
            serial: r.serial,
            display_mode: r.display_mode,
            display_active: r.display_active,
        }
    }
}

/// Where GPU records come from: NVML ([`crate::NvmlSource`]) or, for tests and tools, a
/// fixed list (`Vec<Gpu>` and `[Gpu]` implement it).
pub trait GpuSource {
    /// GPUtil's `getGPUs()`: every GPU, in device order; empty when there is none.
    fn gpus(&self) -> Result<Vec<Gpu>>;
}

impl GpuSource for [Gpu] {
    fn gpus(&self) -> Result<Vec<Gpu>> {
        Ok(self.to_vec())
    }
}

impl GpuSource for Vec<Gpu> {
    fn gpus(&self) -> Result<Vec<Gpu>> {
        Ok(self.clone())
    }
}

/// `getAvailable`'s `order`: how the available GPUs are ranked before `limit` is applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    /// `"first"`: lowest id first (the default).
    #[default]
    First,
    /// `"last"`: highest id first.
    Last,
    /// `"random"`: a random permutation.
    Random,
    /// `"load"`: lowest load first (unknown load last).
    Load,
    /// `"memory"`: lowest memory utilization first (unknown last).
    Memory,
}

impl FromStr for Order {
    type Err = Error;
    /// GPUtil's names: `first`, `last`, `random`, `load`, `memory`.
    fn from_str(s: &str) -> Result<Order> {
        Ok(match s {
            "first" => Order::First,
            "last" => Order::Last,
            "random" => Order::Random,
            "load" => Order::Load,
            "memory" => Order::Memory,
            _ => {
                return Err(Error::new(
                    ErrorKind::Value,
                    format!("unknown GPU order {s:?}: expected first, last, random, load or memory"),
                ))
            }
        })
    }
}

/// `getAvailable`'s keyword arguments, with GPUtil's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct GetAvailableOptions {
    /// `order='first'`.
    pub order: Order,
    /// `limit=1`: at most this many ids.
    pub limit: usize,
    /// `maxLoad=0.5`: a GPU is available when `load < max_load`.
    pub max_load: f64,
    /// `maxMemory=0.5`: ... and `memory_util < max_memory`.
    pub max_memory: f64,
    /// `memoryFree=0`: ... and `memory_free >= memory_free` (MB).
    pub memory_free: f64,
    /// `includeNan=False`: count an unknown (NaN) load or memory utilization as available.
    pub include_nan: bool,
    /// `excludeID=[]`.
    pub exclude_id: Vec<usize>,
    /// `excludeUUID=[]`.
    pub exclude_uuid: Vec<String>,
}

impl Default for GetAvailableOptions {
    fn default() -> Self {
        GetAvailableOptions {
            order: Order::First,
            limit: 1,
            max_load: 0.5,
            max_memory: 0.5,
            memory_free: 0.0,
            include_nan: false,
            exclude_id: vec![],
            exclude_uuid: vec![],
        }
    }
}

/// `getFirstAvailable`'s keyword arguments, with GPUtil's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct GetFirstAvailableOptions {
    /// `order='first'`.
    pub order: Order,
    /// `maxLoad=0.5`.
    pub max_load: f64,
    /// `maxMemory=0.5`.
    pub max_memory: f64,
    /// `attempts=1`: how many times to look.
    pub attempts: usize,
    /// `interval=900` seconds between attempts.
    pub interval: Duration,
    /// `verbose=False`: print each attempt.
    pub verbose: bool,
    /// `includeNan=False`.
    pub include_nan: bool,
    /// `excludeID=[]`.
    pub exclude_id: Vec<usize>,
    /// `excludeUUID=[]`.
    pub exclude_uuid: Vec<String>,
}

impl Default for GetFirstAvailableOptions {
    fn default() -> Self {
        GetFirstAvailableOptions {
            order: Order::First,
            max_load: 0.5,
            max_memory: 0.5,
            attempts: 1,
            interval: Duration::from_secs(900),
            verbose: false,
            include_nan: false,
            exclude_id: vec![],
            exclude_uuid: vec![],
        }
    }
}

/// GPUtil's `getAvailability`: for each GPU, whether it passes the thresholds and exclusions.
///
/// Exactly GPUtil's rule: `memory_free >= opts.memory_free` (a NaN free memory never passes),
/// `load < max_load` or (`include_nan` and load is NaN), `memory_util < max_memory` or
/// (`include_nan` and it is NaN), and neither the id nor the uuid excluded.
pub fn availability(gpus: &[Gpu], opts: &GetAvailableOptions) -> Vec<bool> {
    gpus.iter()
        .map(|g| {
            g.memory_free >= opts.memory_free
                && (g.load < opts.max_load || (opts.include_nan && g.load.is_nan()))
                && (g.memory_util < opts.max_memory || (opts.include_nan && g.memory_util.is_nan()))
                && !opts.exclude_id.contains(&g.id)
                && !opts.exclude_uuid.contains(&g.uuid)
        })
        .collect()
}

/// GPUtil's `getAvailable` on the given GPUs: the ids of the available ones, ranked by
/// `opts.order`, at most `opts.limit`.
pub fn available_ids(gpus: &[Gpu], opts: &GetAvailableOptions) -> Vec<usize> {
    let avail = availability(gpus, opts);
    let mut list: Vec<&Gpu> = gpus.iter().zip(avail).filter(|(_, a)| *a).map(|(g, _)| g).collect();
    // Python's sort is stable, and so is `sort_by`; NaN keys go last as GPUtil maps them to inf.
    let nan_last = |x: f64| if x.is_nan() { f64::INFINITY } else { x };
    match opts.order {
        Order::First => list.sort_by_key(|g| g.id),
        Order::Last => list.sort_by_key(|g| std::cmp::Reverse(g.id)),
        Order::Random => shuffle(&mut list),
        Order::Load => list.sort_by(|a, b| nan_last(a.load).total_cmp(&nan_last(b.load))),
        Order::Memory => list.sort_by(|a, b| nan_last(a.memory_util).total_cmp(&nan_last(b.memory_util))),
    }
    list.truncate(opts.limit);
    list.iter().map(|g| g.id).collect()
}

/// A Fisher-Yates shuffle from a clock-seeded xorshift (GPUtil's `random.sample`; no crate for it).
fn shuffle<T>(v: &mut [T]) {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0),
    );
    let mut s = h.finish() | 1;
    for i in (1..v.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.swap(i, (s % (i as u64 + 1)) as usize);
    }
}

/// GPUtil's `getAvailable` with GPUs from `source`.
pub fn get_available_from<S: GpuSource + ?Sized>(
    source: &S,
    opts: &GetAvailableOptions,
) -> Result<Vec<usize>> {
    Ok(available_ids(&source.gpus()?, opts))
}

/// GPUtil's `getFirstAvailable` with GPUs from `source`: looks up to `attempts` times,
/// `interval` apart, for one available GPU (`limit=1`, `memoryFree=0`, as GPUtil) and returns
/// its id. GPUtil returns a one-element list; here it is the id itself. None after all
/// attempts is an error, with GPUtil's message.
pub fn get_first_available_from<S: GpuSource + ?Sized>(
    source: &S,
    opts: &GetFirstAvailableOptions,
) -> Result<usize> {
    let avail_opts = GetAvailableOptions {
        order: opts.order,
        limit: 1,
        max_load: opts.max_load,
        max_memory: opts.max_memory,
        memory_free: 0.0,
        include_nan: opts.include_nan,
        exclude_id: opts.exclude_id.clone(),
        exclude_uuid: opts.exclude_uuid.clone(),
    };
    for i in 0..opts.attempts {
        if opts.verbose {
            println!("Attempting ({}/{}) to locate available GPU.", i + 1, opts.attempts);
        }
        let available = get_available_from(source, &avail_opts)?;
        if let Some(&id) = available.first() {
            if opts.verbose {
                println!("GPU [{id}] located!");
            }
            return Ok(id);
        }
        if i + 1 != opts.attempts {
            std::thread::sleep(opts.interval);
        }
    }
    Err(Error::new(
        ErrorKind::Device,
        format!(
            "Could not find an available GPU after {} attempts with {} seconds interval.",
            opts.attempts,
            opts.interval.as_secs()
        ),
    ))
}

/// A [`Gpu`] field, for a [`Column`] of the utilization table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attr {
    /// `id` (an integer).
    Id,
    /// `uuid`.
    Uuid,
    /// `name`.
    Name,
    /// `load`.
    Load,
    /// `memoryTotal`.
    MemoryTotal,
    /// `memoryUsed`.
    MemoryUsed,
    /// `memoryFree`.
    MemoryFree,
    /// `memoryUtil`.
    MemoryUtil,
    /// `temperature`.
    Temperature,
    /// `driver`.
    Driver,
    /// `serial`.
    Serial,
    /// `display_mode`.
    DisplayMode,
    /// `display_active`.
    DisplayActive,
}

enum Value<'a> {
    Int(usize),
    Float(f64),
    Str(&'a str),
}

impl Gpu {
    fn value(&self, attr: Attr) -> Value<'_> {
        match attr {
            Attr::Id => Value::Int(self.id),
            Attr::Uuid => Value::Str(&self.uuid),
            Attr::Name => Value::Str(&self.name),
            Attr::Load => Value::Float(self.load),
            Attr::MemoryTotal => Value::Float(self.memory_total),
            Attr::MemoryUsed => Value::Float(self.memory_used),
            Attr::MemoryFree => Value::Float(self.memory_free),
            Attr::MemoryUtil => Value::Float(self.memory_util),
            Attr::Temperature => Value::Float(self.temperature),
            Attr::Driver => Value::Str(&self.driver),
            Attr::Serial => Value::Str(&self.serial),
            Attr::DisplayMode => Value::Str(&self.display_mode),
            Attr::DisplayActive => Value::Str(&self.display_active),
        }
    }
}

/// One column of the utilization table: an entry of GPUtil's `attrList`.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// Which field (`'attr'`).
    pub attr: Attr,
    /// The header (`'name'`).
    pub name: &'static str,
    /// Appended to each value (`'suffix'`): `%`, `MB`, `C`.
    pub suffix: &'static str,
    /// Multiplies numbers (`'transform'`: GPUtil's `lambda x: x*100` is `100.0`).
    pub scale: f64,
    /// Decimals of a float (`'precision'`); `None` is Python's `{:f}`, 6 decimals.
    pub precision: Option<usize>,
}

impl Column {
    /// A column showing `attr` as is.
    pub const fn new(attr: Attr, name: &'static str) -> Column {
        Column { attr, name, suffix: "", scale: 1.0, precision: None }
    }

    /// A number with `suffix`, scaled by `scale`, with `precision` decimals.
    pub const fn number(
        attr: Attr,
        name: &'static str,
        suffix: &'static str,
        scale: f64,
        precision: usize,
    ) -> Column {
        Column { attr, name, suffix, scale, precision: Some(precision) }
    }
}

/// `showUtilization()`'s columns: `ID`, `GPU` (load %), `MEM` (memory utilization %).
pub fn default_columns() -> Vec<Vec<Column>> {
    vec![vec![
        Column::new(Attr::Id, "ID"),
        Column::number(Attr::Load, "GPU", "%", 100.0, 0),
        Column::number(Attr::MemoryUtil, "MEM", "%", 100.0, 0),
    ]]
}

/// `showUtilization(all=True)`'s columns, in its four groups.
pub fn all_columns() -> Vec<Vec<Column>> {
    vec![
        vec![
            Column::new(Attr::Id, "ID"),
            Column::new(Attr::Name, "Name"),
            Column::new(Attr::Serial, "Serial"),
            Column::new(Attr::Uuid, "UUID"),
        ],
        vec![
            Column::number(Attr::Temperature, "GPU temp.", "C", 1.0, 0),
            Column::number(Attr::Load, "GPU util.", "%", 100.0, 0),
            Column::number(Attr::MemoryUtil, "Memory util.", "%", 100.0, 0),
        ],
        vec![
            Column::number(Attr::MemoryTotal, "Memory total", "MB", 1.0, 0),
            Column::number(Attr::MemoryUsed, "Memory used", "MB", 1.0, 0),
            Column::number(Attr::MemoryFree, "Memory free", "MB", 1.0, 0),
        ],
        vec![
            Column::new(Attr::DisplayMode, "Display mode"),
            Column::new(Attr::DisplayActive, "Display active"),
        ],
    ]
}

/// Python's `'{:W.Pf}'.format(x)`: like Rust's, except `nan` / `inf` spelled Python's way.
fn fmt_float(x: f64, width: usize, precision: usize) -> String {
    if x.is_finite() {
        format!("{x:>width$.precision$}")
    } else {
        let s = if x.is_nan() {
            "nan"
        } else if x > 0.0 {
            "inf"
        } else {
            "-inf"
        };
        format!("{s:>width$}")
    }
}

fn fmt_value(v: &Value<'_>, col: &Column, width: usize) -> String {
    match *v {
        // Python's `lambda x: x*100` on an int gives an int; only `id` is an int here.
        Value::Int(i) => format!("{:>width$}", (i as f64 * col.scale) as i64),
        Value::Float(x) => fmt_float(x * col.scale, width, col.precision.unwrap_or(6)),
        Value::Str(s) => format!("{s:<width$}"),
    }
}

/// GPUtil's `showUtilization` table for `gpus` with the given column groups (GPUtil's
/// `attrList`), as text: the header, a line of dashes, one line per GPU, each ending in `\n`.
///
/// Each column is as wide as the widest of its header and its values; numbers are right- and
/// text left-aligned, and groups are closed by `|`, character for character as GPUtil prints.
pub fn utilization_table(gpus: &[Gpu], groups: &[Vec<Column>]) -> String {
    let mut header = String::new();
    let mut rows = vec![String::new(); gpus.len()];
    for group in groups {
        for col in group {
            let name_w = col.name.chars().count();
            let suffix_w = col.suffix.chars().count();
            let min_w = gpus
                .iter()
                .map(|g| fmt_value(&g.value(col.attr), col, 0).chars().count() + suffix_w)
                .fold(name_w, usize::max);
            let _ = write!(header, "| {} {}", col.name, " ".repeat(min_w - name_w));
            for (row, g) in rows.iter_mut().zip(gpus) {
                let _ =
                    write!(row, "| {}{} ", fmt_value(&g.value(col.attr), col, min_w - suffix_w), col.suffix);
            }
        }
        header.push('|');
        for row in &mut rows {
            row.push('|');
        }
    }
    let mut out = String::new();
    let dashes = "-".repeat(header.chars().count());
    for line in [header, dashes].into_iter().chain(rows) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// GPUtil's `showUtilization(all)` with GPUs from `source`: prints the table and returns it.
pub fn show_utilization_from<S: GpuSource + ?Sized>(source: &S, all: bool) -> Result<String> {
    let cols = if all { all_columns() } else { default_columns() };
    let table = utilization_table(&source.gpus()?, &cols);
    print!("{table}");
    Ok(table)
}

/// `pyrite-smi`'s columns: [`default_columns`] plus temperature, memory total / used / free and
/// the driver; with `all`, [`all_columns`] plus the driver.
pub fn smi_columns(all: bool) -> Vec<Vec<Column>> {
    if all {
        let mut cols = all_columns();
        cols.push(vec![Column::new(Attr::Driver, "Driver")]);
        return cols;
    }
    let mut cols = default_columns();
    cols.push(vec![Column::number(Attr::Temperature, "GPU temp.", "C", 1.0, 0)]);
    cols.push(vec![
        Column::number(Attr::MemoryTotal, "Memory total", "MB", 1.0, 0),
        Column::number(Attr::MemoryUsed, "Memory used", "MB", 1.0, 0),
        Column::number(Attr::MemoryFree, "Memory free", "MB", 1.0, 0),
    ]);
    cols.push(vec![Column::new(Attr::Driver, "Driver")]);
    cols
}
