//! Collectives on small Rust values (`broadcast_object_list`, `all_gather_object`): each
//! value goes through JSON (serde) into a byte tensor, where PyTorch pickles.

use crate::process_group::{u8_tensor, ProcessGroup};
use pyrite_core::{err, DType, Result, Tensor};
use serde::{de::DeserializeOwned, Serialize};

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| err!(Value, "could not serialize an object for a collective: {e}"))
}

fn decode<T: DeserializeOwned>(b: &[u8]) -> Result<T> {
    serde_json::from_slice(b)
        .map_err(|e| err!(Value, "could not deserialize an object from a collective: {e}"))
}

impl ProcessGroup {
    /// `broadcast_object_list(object_list, src)`: every rank's `objects` become rank `src`'s
    /// (the lists must have the same length; the other ranks' values are replaced).
    pub fn broadcast_object_list<T: Serialize + DeserializeOwned>(
        &self,
        objects: &mut [T],
        src: usize,
    ) -> Result<()> {
        let me = self.rank();
        let root = self.group_rank(src)?;
        let n = objects.len();
        let sizes = Tensor::zeros([n], DType::I64)?;
        let mut payload = Vec::new();
        if me == Some(root) {
            let mut s = Vec::with_capacity(n);
            for o in objects.iter() {
                let b = encode(o)?;
                s.push(b.len() as i64);
                payload.extend_from_slice(&b);
            }
            sizes.detach().copy_(&Tensor::from_vec(s, [n])?)?;
        }
        self.broadcast(&sizes, src)?.wait()?;
        let sizes: Vec<i64> = sizes.to_vec()?;
        let total: i64 = sizes.iter().sum();
        let data =
            if me == Some(root) { u8_tensor(&payload)? } else { Tensor::zeros([total as usize], DType::U8)? };
        self.broadcast(&data, src)?.wait()?;
        if me != Some(root) {
            let bytes: Vec<u8> = data.to_vec()?;
            let mut off = 0usize;
            for (o, &len) in objects.iter_mut().zip(&sizes) {
                *o = decode(&bytes[off..off + len as usize])?;
                off += len as usize;
            }
        }
        Ok(())
    }

    /// `all_gather_object(object_list, obj)`: every rank's value, in rank order.
    pub fn all_gather_object<T: Serialize + DeserializeOwned>(&self, object: &T) -> Result<Vec<T>> {
        let n = self.size();
        let mine = encode(object)?;
        let size = Tensor::from_vec(vec![mine.len() as i64], [1])?;
        let sizes = Tensor::zeros([n], DType::I64)?;
        self.all_gather_into_tensor(&sizes, &size)?.wait()?;
        let sizes: Vec<i64> = sizes.to_vec()?;
        let max = *sizes.iter().max().unwrap_or(&0) as usize;
        let mut padded = mine;
        padded.resize(max, 0);
        let all = Tensor::zeros([n * max], DType::U8)?;
        self.all_gather_into_tensor(&all, &u8_tensor(&padded)?)?.wait()?;
        let bytes: Vec<u8> = all.to_vec()?;
        (0..n).map(|r| decode(&bytes[r * max..r * max + sizes[r] as usize])).collect()
    }
}

/// `broadcast_object_list(object_list, src)` on the default group.
///
/// ```no_run
/// use pyrite_distributed as dist;
/// dist::init_process_group("mpi", Default::default())?;
/// let mut config = vec![("lr".to_string(), 0.0f64)];
/// if dist::get_rank()? == 0 {
///     config[0].1 = 0.01;
/// }
/// dist::broadcast_object_list(&mut config, 0)?;
/// assert_eq!(config[0].1, 0.01);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn broadcast_object_list<T: Serialize + DeserializeOwned>(objects: &mut [T], src: usize) -> Result<()> {
    crate::default_group()?.broadcast_object_list(objects, src)
}

/// `all_gather_object(object_list, obj)` on the default group: every rank's `object`.
pub fn all_gather_object<T: Serialize + DeserializeOwned>(object: &T) -> Result<Vec<T>> {
    crate::default_group()?.all_gather_object(object)
}
