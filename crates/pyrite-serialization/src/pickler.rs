//! Writes an [`Object`] as a protocol-2 pickle the way `torch.save` does: tensors become calls
//! of `torch._utils._rebuild_tensor_v2` on a persistent storage reference, and each storage is
//! listed once however many tensors view it. A tensor that appears more than once (the same
//! handle, [`Tensor::is_same`]) is written once and then referenced through the memo, as
//! Python's pickler does for any object, so it loads as one tensor again (`l[0] is l[1]`);
//! distinct tensors that view one storage stay distinct tensors sharing it.

use crate::allowlist::storage_class;
use crate::object::{Dict, Object};
use crate::unpickler::MAX_DEPTH;
use pyrite_core::{bail, DType, Result, Tensor, UntypedStorage};
use std::collections::HashMap;

/// A storage to write as `data/<index>`, with the dtype its tensors view it as.
pub(crate) struct SavedStorage {
    pub storage: UntypedStorage,
    pub dtype: DType,
}

/// The pickle bytes of `obj` and the storages they reference, in key order (`data/0`, ...).
pub(crate) fn pickle(obj: &Object) -> Result<(Vec<u8>, Vec<SavedStorage>)> {
    let mut p =
        Pickler { out: vec![0x80, 2], memo: HashMap::new(), storages: Vec::new(), by_id: HashMap::new() };
    p.save(obj, 0)?;
    p.out.push(b'.');
    Ok((p.out, p.storages))
}

struct Pickler {
    out: Vec<u8>,
    /// Globals, the storage-id strings and tensors already written (a tensor by its handle
    /// id, which the object being pickled keeps alive), by their memo index.
    memo: HashMap<String, u32>,
    storages: Vec<SavedStorage>,
    /// Storage identity -> index in `storages`.
    by_id: HashMap<usize, usize>,
}

/// Python's batch size for APPENDS / SETITEMS.
const BATCH: usize = 1000;

impl Pickler {
    fn op(&mut self, op: u8) {
        self.out.push(op);
    }

    /// Writes `s`, or a memo reference to it when `memoize` and written before.
    fn memoized(&mut self, key: String, write: impl FnOnce(&mut Self)) {
        if let Some(&i) = self.memo.get(&key) {
            self.get(i);
            return;
        }
        write(self);
        self.put(key);
    }
    /// Stores the value just written (top of the stack) in the memo under `key`.
    fn put(&mut self, key: String) {
        let i = self.memo.len() as u32;
        if i < 256 {
            self.out.extend_from_slice(&[b'q', i as u8]);
        } else {
            self.op(b'r');
            self.out.extend_from_slice(&i.to_le_bytes());
        }
        self.memo.insert(key, i);
    }
    fn get(&mut self, i: u32) {
        if i < 256 {
            self.out.extend_from_slice(&[b'h', i as u8]);
        } else {
            self.op(b'j');
            self.out.extend_from_slice(&i.to_le_bytes());
        }
    }

    fn global(&mut self, module: &str, name: &str) {
        let key = format!("global {module} {name}");
        self.memoized(key, |p| {
            p.op(b'c');
            p.out.extend_from_slice(module.as_bytes());
            p.op(b'\n');
            p.out.extend_from_slice(name.as_bytes());
            p.op(b'\n');
        });
    }

    fn str(&mut self, s: &str) {
        self.op(b'X');
        self.out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.out.extend_from_slice(s.as_bytes());
    }

    fn memo_str(&mut self, s: &str) {
        self.memoized(format!("str {s}"), |p| p.str(s));
    }

    fn int(&mut self, i: i64) {
        if (0..256).contains(&i) {
            self.out.extend_from_slice(&[b'K', i as u8]);
        } else if (0..65536).contains(&i) {
            self.op(b'M');
            self.out.extend_from_slice(&(i as u16).to_le_bytes());
        } else if let Ok(v) = i32::try_from(i) {
            self.op(b'J');
            self.out.extend_from_slice(&v.to_le_bytes());
        } else {
            // LONG1: the shortest little-endian two's complement.
            let b = i.to_le_bytes();
            let mut n = 8;
            while n > 1 {
                let (last, prev) = (b[n - 1], b[n - 2]);
                if (last == 0 && prev & 0x80 == 0) || (last == 0xFF && prev & 0x80 != 0) {
                    n -= 1;
                } else {
                    break;
                }
            }
            self.out.extend_from_slice(&[0x8a, n as u8]);
            self.out.extend_from_slice(&b[..n]);
        }
    }

    fn float(&mut self, x: f64) {
        self.op(b'G');
        self.out.extend_from_slice(&x.to_be_bytes());
    }

    fn tuple(&mut self, items: &[Object], depth: usize) -> Result<()> {
        match items.len() {
            0 => self.op(b')'),
            n @ 1..=3 => {
                for x in items {
                    self.save(x, depth + 1)?;
                }
                self.op(0x84 + n as u8);
            }
            _ => {
                self.op(b'(');
                for x in items {
                    self.save(x, depth + 1)?;
                }
                self.op(b't');
            }
        }
        Ok(())
    }

    fn appends(&mut self, items: &[Object], depth: usize) -> Result<()> {
        for chunk in items.chunks(BATCH) {
            self.op(b'(');
            for x in chunk {
                self.save(x, depth + 1)?;
            }
            self.op(b'e');
        }
        Ok(())
    }

    fn setitems(&mut self, d: &Dict, depth: usize) -> Result<()> {
        let entries: Vec<_> = d.iter().collect();
        for chunk in entries.chunks(BATCH) {
            self.op(b'(');
            for (k, v) in chunk {
                self.save(k, depth + 1)?;
                self.save(v, depth + 1)?;
            }
            self.op(b'u');
        }
        Ok(())
    }

    fn save(&mut self, obj: &Object, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            bail!(Value, "torch.save: the object nests containers more than {MAX_DEPTH} deep");
        }
        match obj {
            Object::None => self.op(b'N'),
            Object::Bool(b) => self.op(if *b { 0x88 } else { 0x89 }),
            Object::Int(i) => self.int(*i),
            Object::Float(x) => self.float(*x),
            Object::Complex(re, im) => {
                self.global("__builtin__", "complex");
                self.float(*re);
                self.float(*im);
                self.op(0x86);
                self.op(b'R');
            }
            Object::Str(s) => self.str(s),
            Object::Bytes(b) => {
                // Protocol 2 has no bytes opcode: `_codecs.encode(latin1_text, "latin1")`.
                self.global("_codecs", "encode");
                let text: String = b.iter().map(|&c| c as char).collect();
                self.str(&text);
                self.memo_str("latin1");
                self.op(0x86);
                self.op(b'R');
            }
            Object::Tensor(t) => self.tensor(t)?,
            Object::DType(d) => self.global("torch", d.as_str()),
            Object::Device(d) => {
                self.global("torch", "device");
                self.str(&d.to_string());
                self.op(0x85);
                self.op(b'R');
            }
            Object::Tuple(items) => self.tuple(items, depth)?,
            Object::List(items) => {
                self.op(b']');
                self.appends(items, depth)?;
            }
            Object::Set(items) => {
                self.global("__builtin__", "set");
                self.op(b']');
                self.appends(items, depth)?;
                self.op(0x85);
                self.op(b'R');
            }
            Object::Dict(d) => {
                self.op(b'}');
                self.setitems(d, depth)?;
            }
            Object::Unsupported { global } => {
                bail!(Value, "torch.save: cannot save the placeholder for an unsupported {global} object (it was loaded without its content)")
            }
            Object::Counter(d) => {
                // Counter.__reduce__: (Counter, (dict(self),))
                self.global("collections", "Counter");
                self.op(b'}');
                self.setitems(d, depth)?;
                self.op(0x85);
                self.op(b'R');
            }
            Object::OrderedDict(d) => {
                self.global("collections", "OrderedDict");
                self.op(b')');
                self.op(b'R');
                self.setitems(d, depth)?;
                if let Some(meta) = &d.metadata {
                    // The instance __dict__, set by BUILD after the items, as pickle does.
                    self.op(b'}');
                    self.str("_metadata");
                    self.save(meta, depth + 1)?;
                    self.op(b's');
                    self.op(b'b');
                }
            }
        }
        Ok(())
    }

    /// `_rebuild_tensor_v2(('storage', Class, key, 'cpu', numel), offset, size, stride,
    /// requires_grad, OrderedDict())`.
    fn tensor(&mut self, t: &Tensor) -> Result<()> {
        let memo_key = format!("tensor {}", t.handle_id());
        if let Some(&i) = self.memo.get(&memo_key) {
            self.get(i);
            return Ok(());
        }
        t.device().check_available().map_err(|e| pyrite_core::err!(Device, "torch.save: {e}"))?;
        let storage = t.untyped_storage();
        let dtype = t.dtype();
        let key = match self.by_id.get(&storage.id()) {
            Some(&k) => {
                let seen = self.storages[k].dtype;
                if seen != dtype {
                    bail!(
                        DType,
                        "torch.save: Cannot save multiple tensors or storages that view the same data as different types ({seen} and {dtype})"
                    );
                }
                k
            }
            None => {
                if !storage.nbytes().is_multiple_of(dtype.size_in_bytes()) {
                    bail!(
                        Value,
                        "torch.save: a storage of {} bytes is not a whole number of {dtype} elements",
                        storage.nbytes()
                    );
                }
                self.storages.push(SavedStorage { storage: storage.clone(), dtype });
                self.by_id.insert(storage.id(), self.storages.len() - 1);
                self.storages.len() - 1
            }
        };
        let numel = storage.nbytes() / dtype.size_in_bytes();
        self.global("torch._utils", "_rebuild_tensor_v2");
        self.op(b'(');
        self.op(b'(');
        self.memo_str("storage");
        self.global("torch", storage_class(dtype));
        self.str(&key.to_string());
        // The location torch.load restores it to, as PyTorch writes it.
        let location = match storage.device() {
            pyrite_core::Device::Cpu => "cpu".to_string(),
            pyrite_core::Device::Cuda(i) => format!("cuda:{i}"),
        };
        self.memo_str(&location);
        self.int(numel as i64);
        self.op(b't');
        self.op(b'Q');
        self.int(t.storage_offset() as i64);
        let dims: Vec<Object> = t.dims().iter().map(|&d| Object::Int(d as i64)).collect();
        let strides: Vec<Object> = t.stride().iter().map(|&s| Object::Int(s as i64)).collect();
        self.tuple(&dims, 0)?;
        self.tuple(&strides, 0)?;
        self.op(if t.requires_grad() { 0x88 } else { 0x89 });
        self.global("collections", "OrderedDict");
        self.op(b')');
        self.op(b'R');
        self.op(b't');
        self.op(b'R');
        self.put(memo_key);
        Ok(())
    }
}
