//! The random-number generator: Philox4x32-10 [`Generator`] objects and the global generator
//! ([`manual_seed`], [`seed`], [`initial_seed`], [`get_rng_state`], [`set_rng_state`]).
//!
//! This is the ground floor: it imports neither autograd nor the ops. The sampling ops that
//! draw from a generator (`rand`, `randn`, `randint`, `normal`, `bernoulli`, `multinomial`,
//! `randperm`, the in-place `uniform_`, `normal_`, `bernoulli_`, `random_`) live in
//! [`crate::ops::random`].
//!
//! # The generator
//!
//! Every generator is a counter-based [Philox4x32-10](https://www.thesalmons.org/john/random123/)
//! stream, the generator PyTorch uses on CUDA: its state is a 64-bit key (the seed) and a 64-bit
//! counter (the *offset*). One Philox evaluation turns `(key, counter)` into four 32-bit words. An
//! op that draws `n` elements reserves a run of counters, and element
//! `i` depends only on the key and its own counter; so results are the same on every run **and
//! for every thread count**, however a large fill is split across threads. Bitwise equality with
//! PyTorch's CPU generator (a Mersenne Twister) is not a goal.
//!
//! ```
//! use pyrite_core::{manual_seed, DType, Generator, Tensor};
//! manual_seed(42);
//! let a = Tensor::rand([2, 3], DType::F32)?;
//! manual_seed(42);
//! let b = Tensor::rand([2, 3], DType::F32)?;
//! assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
//!
//! let g = Generator::new(7);
//! let z = Tensor::randn_with([1000], DType::F64, Some(&g))?;
//! assert_eq!(z.dims(), &[1000]);
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use crate::{bail, DType, Result, Tensor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

// ------------------------------------------------------------------------------------ Philox

const PHILOX_M0: u32 = 0xD251_1F53;
const PHILOX_M1: u32 = 0xCD9E_8D57;
const PHILOX_W0: u32 = 0x9E37_79B9;
const PHILOX_W1: u32 = 0xBB67_AE85;

#[inline(always)]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = a as u64 * b as u64;
    ((p >> 32) as u32, p as u32)
}

/// One Philox4x32-10 evaluation: the four 32-bit words for counter `ctr` under key `key`
/// (Random123's `philox4x32(ctr, key)`, ten rounds).
///
/// ```
/// use pyrite_core::random::philox4x32_10;
/// assert_eq!(philox4x32_10([0; 4], [0; 2]), [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]);
/// ```
#[inline(always)]
pub fn philox4x32_10(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = ctr;
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(PHILOX_W0);
            k[1] = k[1].wrapping_add(PHILOX_W1);
        }
        let (hi0, lo0) = mulhilo(PHILOX_M0, c[0]);
        let (hi1, lo1) = mulhilo(PHILOX_M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The four words of counter block `block` of the stream with key `seed`.
#[inline(always)]
pub(crate) fn block_words(seed: u64, block: u64) -> [u32; 4] {
    philox4x32_10([block as u32, (block >> 32) as u32, 0, 0], [seed as u32, (seed >> 32) as u32])
}

// --------------------------------------------------------------------------------- Generator

/// PyTorch's default seed (`torch.Generator().initial_seed()`).
pub const DEFAULT_SEED: u64 = 67280421310721;

/// Magic prefix of a serialized generator state.
const STATE_MAGIC: &[u8; 8] = b"PYRPHILX";
/// Length in bytes of [`Generator::get_state_bytes`]: magic, seed, offset.
pub const STATE_LEN: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    seed: u64,
    offset: u64,
}

/// A random-number generator (`torch.Generator`): a Philox4x32-10 stream with a seed and an
/// offset. Thread-safe: every method takes `&self`, and concurrent draws reserve disjoint
/// counter ranges.
///
/// `Clone` makes an *independent* generator with the same state (like
/// `g2.set_state(g1.get_state())`): both then produce the same numbers, and drawing from one
/// does not advance the other. Share one generator by reference (or `Arc`) instead.
///
/// ```
/// use pyrite_core::{DType, Generator, Tensor};
/// let g = Generator::new(3);
/// let saved = g.get_state();
/// let a = Tensor::rand_with([4], DType::F32, Some(&g))?;
/// g.set_state(&saved)?;
/// let b = Tensor::rand_with([4], DType::F32, Some(&g))?;
/// assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub struct Generator {
    state: Mutex<State>,
}

impl Generator {
    /// A generator seeded with `seed` (`torch.Generator().manual_seed(seed)`).
    pub fn new(seed: u64) -> Generator {
        Generator { state: Mutex::new(State { seed, offset: 0 }) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reseeds: sets the seed and rewinds the offset to 0 (`g.manual_seed(seed)`).
    pub fn manual_seed(&self, seed: u64) -> &Generator {
        *self.lock() = State { seed, offset: 0 };
        self
    }

    /// Reseeds from a non-deterministic source (time, process, a counter) and returns the new
    /// seed (`g.seed()`).
    pub fn seed(&self) -> u64 {
        let s = fresh_seed();
        self.manual_seed(s);
        s
    }

    /// The seed this generator was last seeded with (`g.initial_seed()`).
    pub fn initial_seed(&self) -> u64 {
        self.lock().seed
    }

    /// The Philox counter offset: how many four-word blocks have been drawn since seeding
    /// (`g.get_offset()`).
    pub fn get_offset(&self) -> u64 {
        self.lock().offset
    }

    /// Sets the Philox counter offset (`g.set_offset(offset)`).
    pub fn set_offset(&self, offset: u64) -> &Generator {
        self.lock().offset = offset;
        self
    }

    /// The state as bytes: an 8-byte magic `PYRPHILX`, then the seed and the offset as
    /// little-endian u64 ([`STATE_LEN`] bytes in all). Save it in a checkpoint and restore it
    /// with [`Generator::set_state_bytes`].
    pub fn get_state_bytes(&self) -> Vec<u8> {
        let s = *self.lock();
        let mut v = Vec::with_capacity(STATE_LEN);
        v.extend_from_slice(STATE_MAGIC);
        v.extend_from_slice(&s.seed.to_le_bytes());
        v.extend_from_slice(&s.offset.to_le_bytes());
        v
    }

    /// Restores a state made by [`Generator::get_state_bytes`]; errors if `bytes` is not one.
    pub fn set_state_bytes(&self, bytes: &[u8]) -> Result<&Generator> {
        if bytes.len() != STATE_LEN || &bytes[..8] != STATE_MAGIC {
            bail!(
                Value,
                "set_state: expected a {STATE_LEN}-byte Philox generator state (as made by get_state), got {} bytes{}",
                bytes.len(),
                if bytes.len() == STATE_LEN { " with a wrong header" } else { "" }
            );
        }
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(b)
        };
        *self.lock() = State { seed: word(8), offset: word(16) };
        Ok(self)
    }

    /// The state as a 1-d uint8 tensor (`g.get_state()`), see [`Generator::get_state_bytes`].
    pub fn get_state(&self) -> Tensor {
        let b = self.get_state_bytes();
        Tensor::from_slice(&b, b.len()).expect("a 24-byte state tensor")
    }

    /// Restores a state made by [`Generator::get_state`] (`g.set_state(state)`): a 1-d uint8
    /// tensor of [`STATE_LEN`] bytes.
    pub fn set_state(&self, state: &Tensor) -> Result<&Generator> {
        if state.dtype() != DType::U8 || state.rank() != 1 {
            bail!(
                DType,
                "set_state: RNG state must be a 1-d torch.uint8 tensor, got a {}-d {} tensor",
                state.rank(),
                state.dtype()
            );
        }
        self.set_state_bytes(&state.to_vec::<u8>()?)
    }

    /// Reserves `blocks` counter blocks: returns the key and the first block index.
    pub(crate) fn reserve(&self, blocks: u64) -> (u64, u64) {
        let mut s = self.lock();
        let base = s.offset;
        s.offset = s.offset.wrapping_add(blocks);
        (s.seed, base)
    }
}

impl Clone for Generator {
    fn clone(&self) -> Self {
        Generator { state: Mutex::new(*self.lock()) }
    }
}

impl Default for Generator {
    /// A generator with PyTorch's default seed, [`DEFAULT_SEED`].
    fn default() -> Self {
        Generator::new(DEFAULT_SEED)
    }
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = *self.lock();
        write!(f, "Generator(philox4x32_10, seed={}, offset={})", s.seed, s.offset)
    }
}

/// SplitMix64's output function: a good 64-bit mixer.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fresh_seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let c = COUNTER.fetch_add(1, Ordering::Relaxed);
    let local = &c as *const u64 as u64;
    splitmix64(t ^ splitmix64(c ^ splitmix64(local ^ std::process::id() as u64)))
}

/// The global generator that ops use when no generator is given
/// (`torch.default_generator`), seeded with [`DEFAULT_SEED`] at start.
pub fn default_generator() -> &'static Generator {
    static G: OnceLock<Generator> = OnceLock::new();
    G.get_or_init(Generator::default)
}

/// Seeds the global generator (`torch.manual_seed`); returns it.
///
/// ```
/// use pyrite_core::{manual_seed, DType, Tensor};
/// manual_seed(0);
/// let a = Tensor::randn([3], DType::F32)?.to_vec::<f32>()?;
/// manual_seed(0);
/// assert_eq!(a, Tensor::randn([3], DType::F32)?.to_vec::<f32>()?);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn manual_seed(seed: u64) -> &'static Generator {
    default_generator().manual_seed(seed)
}

/// Seeds the global generator non-deterministically and returns the seed (`torch.seed`).
pub fn seed() -> u64 {
    default_generator().seed()
}

/// The seed of the global generator (`torch.initial_seed`).
pub fn initial_seed() -> u64 {
    default_generator().initial_seed()
}

/// The global generator's state as a uint8 tensor (`torch.get_rng_state`).
pub fn get_rng_state() -> Tensor {
    default_generator().get_state()
}

/// Restores the global generator's state (`torch.set_rng_state`).
pub fn set_rng_state(state: &Tensor) -> Result<()> {
    default_generator().set_state(state).map(|_| ())
}
