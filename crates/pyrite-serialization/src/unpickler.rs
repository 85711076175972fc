//! A weights-only pickle machine: reads `data.pkl` into an [`Object`] without running code.
//!
//! It executes the pickle opcodes PyTorch's weights-only unpickler executes (protocol 2, plus
//! the few protocol 3-4 ones a `pickle_protocol=4` save adds), keeps containers in an arena so
//! that memo references see later mutations as in Python, and only ever "calls" the globals of
//! [`crate::allowlist`], by building the value each one would return.
//!
//! Hostile input cannot make it panic, recurse without bound or allocate more than the input
//! justifies: every read is bounds-checked, the stack and memo grow at most one entry per
//! input byte, nesting deeper than [`MAX_DEPTH`] is an error, and turning the arena into the
//! result tree is charged against a budget proportional to the input size (a file that shares
//! one container many times cannot blow up into an exponentially large tree), and so is the
//! hashing and comparing of dict keys (keys hash by content, sets and frozensets included,
//! and keys holding a NaN, which equal nothing, are never compared, so building a dict is
//! linear in its size).

use crate::allowlist::{self, Global};
use crate::object::{Dict, Object, Work};
use pyrite_core::{bail, err, DType, Device, Result, Tensor, UntypedStorage};
use std::collections::HashMap;
use std::rc::Rc;

/// The deepest nesting of containers a checkpoint may have (Python's default recursion limit
/// is about the same).
pub(crate) const MAX_DEPTH: usize = 1000;

/// What a `BINPERSID` storage reference asks for: `('storage', class, key, location, numel)`.
pub(crate) struct StorageRef<'a> {
    /// The record name under `data/`.
    pub key: &'a str,
    /// The element type, or `None` for `torch.storage.UntypedStorage` (bytes).
    pub dtype: Option<DType>,
    /// Number of elements (bytes for untyped storages).
    pub numel: u64,
    /// Where it was saved from (`"cpu"`, `"cuda:0"`).
    pub location: &'a str,
}

/// A value on the machine's stack. Containers live in the arena and are referred to by index,
/// so that a memo entry and the stack share them the way Python objects are shared.
#[derive(Clone)]
enum V {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Complex(f64, f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    Tensor(Tensor),
    DType(DType),
    Device(Device),
    Global(Global),
    /// A global outside the allowlist, kept as a name when loading leniently.
    Unsupported(Rc<str>),
    Storage(usize),
    Node(usize),
}

enum Node {
    Tuple(Vec<V>),
    List(Vec<V>),
    Set(Vec<V>),
    Dict {
        items: Vec<(V, V)>,
        ordered: bool,
        metadata: Option<V>,
        counter: bool,
    },
    /// An object made by an [`V::Unsupported`] global (lenient loading): its arguments, items
    /// and state are dropped unread.
    Opaque(Rc<str>),
}

impl V {
    fn type_name(&self, m: &Machine) -> String {
        match self {
            V::None => "NoneType".into(),
            V::Bool(_) => "bool".into(),
            V::Int(_) => "int".into(),
            V::Float(_) => "float".into(),
            V::Complex(..) => "complex".into(),
            V::Str(_) => "str".into(),
            V::Bytes(_) => "bytes".into(),
            V::Tensor(_) => "Tensor".into(),
            V::DType(_) => "torch.dtype".into(),
            V::Device(_) => "torch.device".into(),
            V::Global(g) => g.name(),
            V::Unsupported(g) => g.to_string(),
            V::Storage(_) => "storage".into(),
            V::Node(i) => match &m.arena[*i] {
                Node::Tuple(_) => "tuple".into(),
                Node::List(_) => "list".into(),
                Node::Set(_) => "set".into(),
                Node::Dict { ordered: true, .. } => "OrderedDict".into(),
                Node::Dict { counter: true, .. } => "Counter".into(),
                Node::Dict { .. } => "dict".into(),
                Node::Opaque(g) => g.to_string(),
            },
        }
    }
}

struct Machine<'a> {
    data: &'a [u8],
    pos: usize,
    stack: Vec<V>,
    marks: Vec<usize>,
    memo: HashMap<u32, V>,
    arena: Vec<Node>,
    storages: Vec<(UntypedStorage, Option<DType>)>,
    load_storage: &'a mut dyn FnMut(&StorageRef) -> Result<UntypedStorage>,
    /// Items the machine may still copy between containers (calls copy their arguments), so
    /// that a small file cannot make it do quadratic work.
    work: u64,
    /// Lenient loading: a global outside the allowlist becomes a placeholder instead of an error.
    lenient: bool,
}

fn corrupt(msg: impl std::fmt::Display) -> pyrite_core::Error {
    err!(Io, "torch.load: corrupt data.pkl: {msg}")
}

/// Unpickles `data` (the bytes of `data.pkl`); `load_storage` supplies the storage records
/// that `BINPERSID` references name.
///
/// With `lenient`, a global outside the allowlist does not fail the load: it, and any object
/// it would make, become [`Object::Unsupported`] placeholders naming it (nothing is called).
pub(crate) fn unpickle(
    data: &[u8],
    lenient: bool,
    load_storage: &mut dyn FnMut(&StorageRef) -> Result<UntypedStorage>,
) -> Result<Object> {
    let mut m = Machine {
        data,
        pos: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        arena: Vec::new(),
        storages: Vec::new(),
        load_storage,
        work: budget_for(data.len()),
        lenient,
    };
    let top = m.run()?;
    let mut budget = budget_for(data.len());
    m.to_object(&top, 0, &mut budget)
}

/// Units of work a pickle of `len` bytes may spend: one per output node, byte or copied item.
/// A legitimate file spends a few per input byte.
fn budget_for(len: usize) -> u64 {
    64u64.saturating_mul(len as u64).saturating_add(1 << 20)
}

impl Machine<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.data.len() - self.pos < n {
            return Err(corrupt(format!("unexpected end of data at byte {} (needs {n} more)", self.pos)));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    /// A length that must fit in the remaining data (checked by `take`).
    fn len_u64(&mut self) -> Result<usize> {
        let n = self.u64()?;
        usize::try_from(n).map_err(|_| corrupt(format!("length {n} is too large")))
    }
    fn line(&mut self) -> Result<&str> {
        let rest = &self.data[self.pos..];
        let Some(n) = rest.iter().position(|&b| b == b'\n') else {
            return Err(corrupt("unterminated GLOBAL name"));
        };
        self.pos += n + 1;
        std::str::from_utf8(&rest[..n]).map_err(|_| corrupt("GLOBAL name is not UTF-8"))
    }
    fn text(&mut self, n: usize) -> Result<V> {
        let b = self.take(n)?;
        let s = std::str::from_utf8(b).map_err(|_| corrupt("string is not valid UTF-8"))?;
        Ok(V::Str(Rc::from(s)))
    }
    fn bytes(&mut self, n: usize) -> Result<V> {
        Ok(V::Bytes(Rc::from(self.take(n)?)))
    }

    fn pop(&mut self) -> Result<V> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(corrupt(format!("stack underflow at byte {}", self.pos)));
        }
        Ok(self.stack.pop().expect("checked above"))
    }
    fn top(&self) -> Result<&V> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(corrupt(format!("stack underflow at byte {}", self.pos)));
        }
        Ok(self.stack.last().expect("checked above"))
    }
    fn pop_mark(&mut self) -> Result<Vec<V>> {
        let Some(m) = self.marks.pop() else {
            return Err(corrupt(format!("no MARK for the opcode at byte {}", self.pos)));
        };
        Ok(self.stack.split_off(m))
    }
    fn charge(&mut self, n: usize) -> Result<()> {
        self.work = self.work.checked_sub(n as u64).ok_or_else(|| {
            err!(Io, "torch.load: the checkpoint makes far more work than its size justifies")
        })?;
        Ok(())
    }
    /// The items of `v` when it is a tuple (or, with `any_seq`, a list or set).
    fn items_of(&self, v: &V, any_seq: bool) -> Option<&Vec<V>> {
        match v {
            V::Node(i) => match &self.arena[*i] {
                Node::Tuple(x) => Some(x),
                Node::List(x) | Node::Set(x) if any_seq => Some(x),
                _ => None,
            },
            _ => None,
        }
    }
    /// A copy of the items of the tuple `v` (charged), or `None` when `v` is not a tuple.
    fn tuple_items(&mut self, v: &V) -> Result<Option<Vec<V>>> {
        let n = self.items_of(v, false).map_or(0, Vec::len);
        self.charge(n)?;
        Ok(self.items_of(v, false).cloned())
    }
    fn node(&mut self, n: Node) -> V {
        self.arena.push(n);
        V::Node(self.arena.len() - 1)
    }
    fn memo_get(&self, i: u32) -> Result<V> {
        self.memo.get(&i).cloned().ok_or_else(|| corrupt(format!("memo key {i} was never stored")))
    }
    fn memo_put(&mut self, i: u32) -> Result<()> {
        let v = self.top()?.clone();
        self.memo.insert(i, v);
        Ok(())
    }

    /// The arena index of the container on top of the stack, which must be of `kind`.
    fn target(&self, op: &str) -> Result<usize> {
        match self.top()? {
            V::Node(i) => Ok(*i),
            other => bail!(Io, "torch.load: {op} on a {}, which it cannot modify", other.type_name(self)),
        }
    }
    fn append(&mut self, items: Vec<V>, op: &str) -> Result<()> {
        let i = self.target(op)?;
        match &mut self.arena[i] {
            Node::Opaque(_) => {}
            Node::List(v) => v.extend(items),
            Node::Set(v) if op == "ADDITEMS" => v.extend(items),
            _ => bail!(Io, "torch.load: {op} needs a list, got a {}", V::Node(i).type_name(self)),
        }
        Ok(())
    }
    fn set_items(&mut self, items: Vec<V>, op: &str) -> Result<()> {
        if !items.len().is_multiple_of(2) {
            return Err(corrupt(format!("{op} with an odd number of items")));
        }
        let i = self.target(op)?;
        if matches!(self.arena[i], Node::Opaque(_)) {
            return Ok(());
        }
        let Node::Dict { items: d, .. } = &mut self.arena[i] else {
            bail!(Io, "torch.load: {op} needs a dict, got a {}", V::Node(i).type_name(self));
        };
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            d.push((k, v));
        }
        Ok(())
    }

    fn run(&mut self) -> Result<V> {
        loop {
            let at = self.pos;
            let op = self.u8()?;
            match op {
                // ----------------------------------------------------------- framing
                0x80 => {
                    let proto = self.u8()?;
                    if proto > 5 {
                        return Err(corrupt(format!("unsupported pickle protocol {proto}")));
                    }
                }
                0x95 => {
                    self.u64()?; // FRAME: a length hint only
                }
                b'.' => {
                    return self.pop();
                }
                // ----------------------------------------------------------- constants
                b'N' => self.stack.push(V::None),
                0x88 => self.stack.push(V::Bool(true)),
                0x89 => self.stack.push(V::Bool(false)),
                b'K' => {
                    let v = self.u8()?;
                    self.stack.push(V::Int(v as i64))
                }
                b'M' => {
                    let v = self.u16()?;
                    self.stack.push(V::Int(v as i64))
                }
                b'J' => {
                    let v = self.u32()? as i32;
                    self.stack.push(V::Int(v as i64))
                }
                0x8a => {
                    let n = self.u8()? as usize;
                    let v = self.long(n)?;
                    self.stack.push(v)
                }
                0x8b => {
                    let n = self.u32()? as usize;
                    let v = self.long(n)?;
                    self.stack.push(v)
                }
                b'G' => {
                    let b = self.take(8)?;
                    let v = f64::from_be_bytes(b.try_into().expect("8 bytes"));
                    self.stack.push(V::Float(v))
                }
                // ----------------------------------------------------------- strings, bytes
                b'X' => {
                    let n = self.u32()? as usize;
                    let v = self.text(n)?;
                    self.stack.push(v)
                }
                0x8c | b'U' => {
                    let n = self.u8()? as usize;
                    let v = self.text(n)?;
                    self.stack.push(v)
                }
                0x8d => {
                    let n = self.len_u64()?;
                    let v = self.text(n)?;
                    self.stack.push(v)
                }
                b'T' => {
                    let n = self.u32()? as usize;
                    let v = self.text(n)?;
                    self.stack.push(v)
                }
                b'C' => {
                    let n = self.u8()? as usize;
                    let v = self.bytes(n)?;
                    self.stack.push(v)
                }
                b'B' => {
                    let n = self.u32()? as usize;
                    let v = self.bytes(n)?;
                    self.stack.push(v)
                }
                0x8e => {
                    let n = self.len_u64()?;
                    let v = self.bytes(n)?;
                    self.stack.push(v)
                }
                // ----------------------------------------------------------- containers
                b')' => {
                    let v = self.node(Node::Tuple(Vec::new()));
                    self.stack.push(v)
                }
                b']' => {
                    let v = self.node(Node::List(Vec::new()));
                    self.stack.push(v)
                }
                b'}' => {
                    let v = self.node(Node::Dict {
                        items: Vec::new(),
                        ordered: false,
                        metadata: None,
                        counter: false,
                    });
                    self.stack.push(v)
                }
                0x8f => {
                    let v = self.node(Node::Set(Vec::new()));
                    self.stack.push(v)
                }
                b'(' => self.marks.push(self.stack.len()),
                b't' => {
                    let items = self.pop_mark()?;
                    let v = self.node(Node::Tuple(items));
                    self.stack.push(v)
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.pop()?);
                    }
                    items.reverse();
                    let v = self.node(Node::Tuple(items));
                    self.stack.push(v)
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    let v = self.node(Node::List(items));
                    self.stack.push(v)
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    let v = self.node(Node::Dict {
                        items: Vec::new(),
                        ordered: false,
                        metadata: None,
                        counter: false,
                    });
                    self.stack.push(v);
                    self.set_items(items, "DICT")?;
                }
                0x91 => {
                    let items = self.pop_mark()?;
                    let v = self.node(Node::Set(items));
                    self.stack.push(v)
                }
                b'a' => {
                    let v = self.pop()?;
                    self.append(vec![v], "APPEND")?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    self.append(items, "APPENDS")?;
                }
                0x90 => {
                    let items = self.pop_mark()?;
                    self.append(items, "ADDITEMS")?;
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    self.set_items(vec![k, v], "SETITEM")?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    self.set_items(items, "SETITEMS")?;
                }
                // ----------------------------------------------------------- stack, memo
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let v = self.top()?.clone();
                    self.stack.push(v)
                }
                b'h' => {
                    let i = self.u8()? as u32;
                    let v = self.memo_get(i)?;
                    self.stack.push(v)
                }
                b'j' => {
                    let i = self.u32()?;
                    let v = self.memo_get(i)?;
                    self.stack.push(v)
                }
                b'q' => {
                    let i = self.u8()? as u32;
                    self.memo_put(i)?;
                }
                b'r' => {
                    let i = self.u32()?;
                    self.memo_put(i)?;
                }
                0x94 => {
                    let i = u32::try_from(self.memo.len()).map_err(|_| corrupt("memo overflow"))?;
                    self.memo_put(i)?;
                }
                // ----------------------------------------------------------- globals, calls
                b'c' => {
                    let module = self.line()?.to_string();
                    let name = self.line()?.to_string();
                    let v = self.resolve(&module, &name)?;
                    self.stack.push(v);
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (V::Str(module), V::Str(name)) = (module, name) else {
                        return Err(corrupt("STACK_GLOBAL needs two strings"));
                    };
                    let v = self.resolve(&module, &name)?;
                    self.stack.push(v);
                }
                b'R' => {
                    let args = self.pop()?;
                    let func = self.pop()?;
                    let Some(args) = self.tuple_items(&args)? else {
                        return Err(corrupt("REDUCE arguments are not a tuple"));
                    };
                    if let Some(g) = self.unsupported_callable(&func) {
                        let v = self.node(Node::Opaque(g));
                        self.stack.push(v);
                        continue;
                    }
                    let V::Global(g) = func else {
                        bail!(
                            Io,
                            "Weights only load failed: REDUCE calls a {}, which is not an allowed function",
                            func.type_name(self)
                        );
                    };
                    let v = self.call(g, args)?;
                    self.stack.push(v);
                }
                b'b' => {
                    let state = self.pop()?;
                    self.build(state)?;
                }
                b'Q' => {
                    let pid = self.pop()?;
                    let v = self.persistent_load(pid)?;
                    self.stack.push(v);
                }
                0x81 | 0x92 => {
                    let what = if op == 0x81 { "NEWOBJ" } else { "NEWOBJ_EX" };
                    let n_args = if op == 0x81 { 1 } else { 2 };
                    let cls = self.stack.iter().rev().nth(n_args).cloned();
                    if let Some(g) = cls.as_ref().and_then(|c| self.unsupported_callable(c)) {
                        for _ in 0..=n_args {
                            self.pop()?;
                        }
                        let v = self.node(Node::Opaque(g));
                        self.stack.push(v);
                        continue;
                    }
                    let cls = cls.map_or("?".to_string(), |c| c.type_name(self));
                    bail!(Io, "Weights only load failed: {what} of {cls} is not supported");
                }
                _ => {
                    let shown =
                        if op.is_ascii_graphic() { format!(" ('{}')", op as char) } else { String::new() };
                    return Err(corrupt(format!("unsupported pickle opcode 0x{op:02x}{shown} at byte {at}")));
                }
            }
        }
    }

    /// LONG1 / LONG4: a little-endian two's-complement integer of `n` bytes.
    fn long(&mut self, n: usize) -> Result<V> {
        let b = self.take(n)?;
        if n == 0 {
            return Ok(V::Int(0));
        }
        let negative = b[n - 1] & 0x80 != 0;
        let fill = if negative { 0xFF } else { 0 };
        if n > 8 {
            // Wider encodings are fine if the extra bytes only repeat the sign.
            let sign_ok = b[8..].iter().all(|&x| x == fill) && ((b[7] & 0x80 != 0) == negative);
            if !sign_ok {
                bail!(NotImplemented, "torch.load: an integer in the checkpoint does not fit in 64 bits");
            }
        }
        let mut a = [fill; 8];
        let k = n.min(8);
        a[..k].copy_from_slice(&b[..k]);
        Ok(V::Int(i64::from_le_bytes(a)))
    }

    fn persistent_load(&mut self, pid: V) -> Result<V> {
        let fields = self.tuple_items(&pid)?.unwrap_or_default();
        let is_storage = matches!(fields.first(), Some(V::Str(s)) if &**s == "storage")
            || matches!(fields.first(), Some(V::Bytes(b)) if &**b == b"storage");
        if !is_storage {
            bail!(
                Io,
                "Weights only load failed: only persistent ids of storages are allowed, got a {}",
                pid.type_name(self)
            );
        }
        if fields.len() != 5 {
            return Err(corrupt(format!("a storage id has {} fields, expected 5", fields.len())));
        }
        let dtype = match &fields[1] {
            V::Global(Global::StorageClass(d)) => Some(*d),
            V::Global(Global::UntypedStorage) => None,
            other => {
                return Err(corrupt(format!("a storage id names a {} as its type", other.type_name(self))))
            }
        };
        let key = match &fields[2] {
            V::Str(s) => s.clone(),
            _ => return Err(corrupt("a storage key is not a string")),
        };
        let location = match &fields[3] {
            V::Str(s) => s.clone(),
            _ => return Err(corrupt("a storage location is not a string")),
        };
        let numel = match fields[4] {
            V::Int(n) if n >= 0 => n as u64,
            _ => return Err(corrupt("a storage size is not a non-negative int")),
        };
        let storage = (self.load_storage)(&StorageRef { key: &key, dtype, numel, location: &location })?;
        self.storages.push((storage, dtype));
        Ok(V::Storage(self.storages.len() - 1))
    }

    // ------------------------------------------------------------------ argument helpers

    fn int_arg(&self, v: &V, what: &str, f: &str) -> Result<i64> {
        match v {
            V::Int(i) => Ok(*i),
            V::Bool(b) => Ok(*b as i64),
            other => bail!(Io, "torch.load: {f}: {what} must be an int, got {}", other.type_name(self)),
        }
    }
    fn usize_arg(&self, v: &V, what: &str, f: &str) -> Result<usize> {
        let i = self.int_arg(v, what, f)?;
        usize::try_from(i).map_err(|_| err!(Io, "torch.load: {f}: {what} must not be negative, got {i}"))
    }
    fn dims_arg(&self, v: &V, what: &str, f: &str) -> Result<Vec<usize>> {
        let items = match v {
            V::Node(i) => match &self.arena[*i] {
                Node::Tuple(x) | Node::List(x) => x,
                _ => bail!(Io, "torch.load: {f}: {what} must be a tuple, got {}", v.type_name(self)),
            },
            _ => bail!(Io, "torch.load: {f}: {what} must be a tuple, got {}", v.type_name(self)),
        };
        items.iter().map(|x| self.usize_arg(x, what, f)).collect()
    }
    fn bool_arg(&self, v: &V, what: &str, f: &str) -> Result<bool> {
        match v {
            V::Bool(b) => Ok(*b),
            V::Int(i) => Ok(*i != 0),
            other => bail!(Io, "torch.load: {f}: {what} must be a bool, got {}", other.type_name(self)),
        }
    }
    fn str_arg<'v>(&self, v: &'v V, what: &str, f: &str) -> Result<&'v str> {
        match v {
            V::Str(s) => Ok(s),
            other => bail!(Io, "torch.load: {f}: {what} must be a str, got {}", other.type_name(self)),
        }
    }
    fn check_arity(g: Global, args: &[V], allowed: std::ops::RangeInclusive<usize>) -> Result<()> {
        if !allowed.contains(&args.len()) {
            return Err(corrupt(format!("{} called with {} arguments", g.name(), args.len())));
        }
        Ok(())
    }

    /// What calling the allowed global `g` with `args` returns.
    fn call(&mut self, g: Global, args: Vec<V>) -> Result<V> {
        let f = g.name();
        let f = f.as_str();
        Ok(match g {
            Global::OrderedDict => {
                Self::check_arity(g, &args, 0..=1)?;
                let v = self.node(Node::Dict {
                    items: Vec::new(),
                    ordered: true,
                    metadata: None,
                    counter: false,
                });
                if let Some(pairs) = args.first() {
                    let pairs = self.seq_items(pairs, f)?;
                    let mut kv = Vec::new();
                    for p in &pairs {
                        let pair = self.seq_items(p, f)?;
                        if pair.len() != 2 {
                            return Err(corrupt("OrderedDict items must be pairs"));
                        }
                        kv.extend(pair);
                    }
                    self.stack.push(v.clone());
                    let r = self.set_items(kv, "OrderedDict");
                    self.stack.pop();
                    r?;
                }
                v
            }
            Global::Counter => {
                Self::check_arity(g, &args, 0..=1)?;
                let mut items = Vec::new();
                if let Some(V::Node(i)) = args.first() {
                    match &self.arena[*i] {
                        Node::Dict { items: src, .. } => items = src.clone(),
                        _ => return Err(corrupt("Counter argument is not a dict")),
                    }
                } else if !args.is_empty() {
                    return Err(corrupt("Counter argument is not a dict"));
                }
                self.charge(items.len())?;
                self.node(Node::Dict { items, ordered: false, metadata: None, counter: true })
            }
            Global::RebuildTensorV2 | Global::RebuildTensorV3 => {
                let v3 = g == Global::RebuildTensorV3;
                Self::check_arity(g, &args, if v3 { 7..=8 } else { 6..=7 })?;
                let V::Storage(s) = args[0] else {
                    bail!(
                        Io,
                        "torch.load: {f}: the first argument must be a storage, got {}",
                        args[0].type_name(self)
                    );
                };
                let offset = self.usize_arg(&args[1], "storage_offset", f)?;
                let size = self.dims_arg(&args[2], "size", f)?;
                let stride = self.dims_arg(&args[3], "stride", f)?;
                let requires_grad = self.bool_arg(&args[4], "requires_grad", f)?;
                let (storage, storage_dtype) = self.storages[s].clone();
                let dtype = if v3 {
                    match args[6] {
                        V::DType(d) => d,
                        _ => bail!(
                            Io,
                            "torch.load: {f}: dtype must be a torch.dtype, got {}",
                            args[6].type_name(self)
                        ),
                    }
                } else {
                    match storage_dtype {
                        Some(d) => d,
                        None => bail!(
                            Io,
                            "torch.load: {f}: an untyped storage needs a dtype (use _rebuild_tensor_v3)"
                        ),
                    }
                };
                if let (true, Some(sd)) = (v3, storage_dtype)
                    && sd != dtype
                {
                    return Err(corrupt(format!("{f}: a {sd} storage viewed as {dtype}")));
                }
                if size.len() != stride.len() {
                    return Err(corrupt(format!("{f}: {} sizes but {} strides", size.len(), stride.len())));
                }
                let t = Tensor::from_untyped_storage(&storage, dtype, offset, size, &stride)
                    .map_err(|e| err!(Io, "torch.load: {f}: {e}"))?;
                V::Tensor(if requires_grad { t.requires_grad_(true)? } else { t })
            }
            Global::RebuildParameter => {
                Self::check_arity(g, &args, 3..=3)?;
                let V::Tensor(t) = &args[0] else {
                    bail!(Io, "torch.load: {f}: data must be a Tensor, got {}", args[0].type_name(self));
                };
                let requires_grad = self.bool_arg(&args[1], "requires_grad", f)?;
                let t = if requires_grad { t.requires_grad_(true)? } else { t.clone() };
                V::Tensor(t)
            }
            Global::Size => {
                Self::check_arity(g, &args, 0..=1)?;
                let dims = match args.first() {
                    Some(v) => self.seq_items(v, f)?,
                    None => Vec::new(),
                };
                for d in &dims {
                    self.int_arg(d, "a size", f)?;
                }
                self.node(Node::Tuple(dims))
            }
            Global::Device => {
                Self::check_arity(g, &args, 1..=2)?;
                let kind = self.str_arg(&args[0], "the device", f)?;
                let text = match args.get(1) {
                    Some(i) => format!("{kind}:{}", self.int_arg(i, "the device index", f)?),
                    None => kind.to_string(),
                };
                V::Device(
                    Device::parse(&text)
                        .map_err(|e| err!(NotImplemented, "torch.load: torch.device: {e}"))?,
                )
            }
            Global::DType(d) => bail!(Io, "torch.load: {} is not callable", Global::DType(d).name()),
            Global::StorageClass(_) | Global::UntypedStorage => {
                bail!(NotImplemented, "torch.load: constructing {f} directly is not supported")
            }
            Global::Encode => {
                Self::check_arity(g, &args, 1..=2)?;
                let s = self.str_arg(&args[0], "the text", f)?;
                let enc = match args.get(1) {
                    Some(e) => self.str_arg(e, "the encoding", f)?.to_ascii_lowercase(),
                    None => "utf-8".into(),
                };
                let bytes: Vec<u8> = match enc.as_str() {
                    "latin1" | "latin-1" | "iso-8859-1" | "iso8859-1" => s
                        .chars()
                        .map(|c| {
                            u8::try_from(c as u32)
                                .map_err(|_| corrupt("latin1 text with a character above U+00FF"))
                        })
                        .collect::<Result<_>>()?,
                    "utf-8" | "utf8" => s.as_bytes().to_vec(),
                    other => bail!(
                        NotImplemented,
                        "torch.load: _codecs.encode with encoding '{other}' is not supported"
                    ),
                };
                V::Bytes(Rc::from(bytes))
            }
            Global::Set | Global::FrozenSet => {
                Self::check_arity(g, &args, 0..=1)?;
                let items = match args.first() {
                    Some(v) => self.seq_items(v, f)?,
                    None => Vec::new(),
                };
                self.node(Node::Set(items))
            }
            Global::Complex => {
                Self::check_arity(g, &args, 0..=2)?;
                let part = |v: Option<&V>| match v {
                    None => Ok(0.0),
                    Some(V::Float(x)) => Ok(*x),
                    Some(V::Int(i)) => Ok(*i as f64),
                    Some(other) => Err(err!(
                        Io,
                        "torch.load: complex: parts must be numbers, got {}",
                        other.type_name(self)
                    )),
                };
                V::Complex(part(args.first())?, part(args.get(1))?)
            }
            Global::ByteArray => {
                Self::check_arity(g, &args, 0..=2)?;
                match args.as_slice() {
                    [] => V::Bytes(Rc::from(Vec::new())),
                    [V::Bytes(b)] => V::Bytes(b.clone()),
                    [_, _] => self.call(Global::Encode, args)?,
                    [other] => {
                        bail!(Io, "torch.load: bytearray of a {} is not supported", other.type_name(self))
                    }
                    _ => return Err(corrupt("bytearray called with too many arguments")),
                }
            }
        })
    }

    /// `GLOBAL module name`: the recognised global, or, loading leniently, a placeholder for
    /// a name outside the allowlist.
    fn resolve(&mut self, module: &str, name: &str) -> Result<V> {
        match allowlist::resolve(module, name) {
            Ok(g) => Ok(global_value(g)),
            Err(_) if self.lenient => Ok(V::Unsupported(Rc::from(format!("{module}.{name}")))),
            Err(e) => Err(e),
        }
    }

    /// The global name when `v` is something lenient loading turns into a placeholder when
    /// called: an unsupported global or an object it made.
    fn unsupported_callable(&self, v: &V) -> Option<Rc<str>> {
        match v {
            V::Unsupported(g) => Some(g.clone()),
            V::Node(i) => match &self.arena[*i] {
                Node::Opaque(g) => Some(g.clone()),
                _ => None,
            },
            _ => None,
        }
    }

    /// A copy of the items of a tuple, list or set value (charged).
    fn seq_items(&mut self, v: &V, f: &str) -> Result<Vec<V>> {
        let Some(n) = self.items_of(v, true).map(Vec::len) else {
            bail!(Io, "torch.load: {f}: expected a sequence, got {}", v.type_name(self));
        };
        self.charge(n)?;
        Ok(self.items_of(v, true).cloned().unwrap_or_default())
    }

    /// BUILD: sets an object's state. Only an OrderedDict's `__dict__` (a state_dict's
    /// `_metadata`) is accepted; other attributes are ignored.
    fn build(&mut self, state: V) -> Result<()> {
        if let V::Node(i) = self.top()?
            && matches!(self.arena[*i], Node::Opaque(_))
        {
            return Ok(()); // a placeholder's state is dropped
        }
        let i = match self.top()? {
            V::Node(i) if matches!(self.arena[*i], Node::Dict { ordered: true, .. }) => *i,
            other => {
                bail!(Io, "Weights only load failed: BUILD on a {} is not supported", other.type_name(self))
            }
        };
        let meta = match &state {
            V::Node(s) => match &self.arena[*s] {
                Node::Dict { items, ordered: false, .. } => {
                    items.iter().rev().find(|(k, _)| matches!(k, V::Str(s) if &**s == "_metadata")).cloned()
                }
                _ => return Err(corrupt("OrderedDict state is not a dict")),
            },
            V::None => None,
            _ => return Err(corrupt("OrderedDict state is not a dict")),
        };
        if let (Some((_, m)), Node::Dict { metadata, .. }) = (meta, &mut self.arena[i]) {
            *metadata = Some(m);
        }
        Ok(())
    }

    // ------------------------------------------------------------------ result

    fn to_object(&self, v: &V, depth: usize, budget: &mut u64) -> Result<Object> {
        if depth > MAX_DEPTH {
            bail!(
                Io,
                "torch.load: the checkpoint nests containers more than {MAX_DEPTH} deep (or contains itself)"
            );
        }
        let cost = match v {
            V::Str(s) => 1 + s.len() as u64,
            V::Bytes(b) => 1 + b.len() as u64,
            _ => 1,
        };
        if *budget < cost {
            bail!(Io, "torch.load: the checkpoint expands to far more objects than its size justifies");
        }
        *budget -= cost;
        let seq = |items: &[V], budget: &mut u64| -> Result<Vec<Object>> {
            items.iter().map(|x| self.to_object(x, depth + 1, budget)).collect()
        };
        Ok(match v {
            V::None => Object::None,
            V::Bool(b) => Object::Bool(*b),
            V::Int(i) => Object::Int(*i),
            V::Float(x) => Object::Float(*x),
            V::Complex(a, b) => Object::Complex(*a, *b),
            V::Str(s) => Object::Str(s.to_string()),
            V::Bytes(b) => Object::Bytes(b.to_vec()),
            V::Tensor(t) => Object::Tensor(t.clone()),
            V::DType(d) => Object::DType(*d),
            V::Device(d) => Object::Device(*d),
            V::Global(g) => {
                bail!(NotImplemented, "torch.load: a reference to {} cannot be loaded as a value", g.name())
            }
            V::Unsupported(g) => Object::Unsupported { global: g.to_string() },
            V::Storage(_) => bail!(
                NotImplemented,
                "torch.load: bare storages (torch.save(t.untyped_storage())) are not supported; save tensors"
            ),
            V::Node(i) => match &self.arena[*i] {
                Node::Tuple(x) => Object::Tuple(seq(x, budget)?),
                Node::List(x) => Object::List(seq(x, budget)?),
                Node::Set(x) => Object::Set(seq(x, budget)?),
                Node::Opaque(g) => Object::Unsupported { global: g.to_string() },
                Node::Dict { items, ordered, metadata, counter } => {
                    let mut d = Dict::new();
                    for (k, val) in items {
                        let k = self.to_object(k, depth + 1, budget)?;
                        let val = self.to_object(val, depth + 1, budget)?;
                        // Hashing and comparing the key are charged too.
                        let mut work = Work::new(*budget);
                        d.insert_within(k, val, &mut work);
                        if work.exhausted() {
                            bail!(
                                Io,
                                "torch.load: the checkpoint's dict keys take far more work to compare than its size justifies"
                            );
                        }
                        *budget = work.left();
                    }
                    if let Some(m) = metadata {
                        d.metadata = Some(Box::new(self.to_object(m, depth + 1, budget)?));
                    }
                    if *counter {
                        Object::Counter(d)
                    } else if *ordered {
                        Object::OrderedDict(d)
                    } else {
                        Object::Dict(d)
                    }
                }
            },
        })
    }
}

/// The stack value a recognised global pushes: dtypes are values in their own right.
fn global_value(g: Global) -> V {
    match g {
        Global::DType(d) => V::DType(d),
        g => V::Global(g),
    }
}
