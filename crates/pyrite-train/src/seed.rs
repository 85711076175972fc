//! [`seed_everything`]: Lightning's one call to seed every generator.

/// Seeds the global generator (which DataLoaders without their own generator, dropout and
/// initialisation draw from) and sets `PL_GLOBAL_SEED`, as Lightning's `seed_everything`;
/// returns the seed.
///
/// ```
/// let a = { pyrite::train::seed_everything(7); pyrite::Tensor::rand([3], pyrite::DType::F32)? };
/// let b = { pyrite::train::seed_everything(7); pyrite::Tensor::rand([3], pyrite::DType::F32)? };
/// assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn seed_everything(seed: u64) -> u64 {
    pyrite_core::manual_seed(seed);
    std::env::set_var("PL_GLOBAL_SEED", seed.to_string());
    seed
}
