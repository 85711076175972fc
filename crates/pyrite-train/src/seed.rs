//! [`seed_everything`]: Lightning's one call to seed every generator.

/// Seeds the global generator (which DataLoaders without their own generator, dropout and
/// initialisation draw from), as Lightning's `seed_everything`; returns the seed.
///
/// Lightning also exports the seed as `PL_GLOBAL_SEED` for the processes it starts. Pyrite
/// does not touch its own environment: changing it while other threads may read it is
/// undefined behaviour (`std::env::set_var` is `unsafe` for that reason). Pass the seed to the
/// processes you start instead.
///
/// ```
/// let a = { pyrite::train::seed_everything(7); pyrite::Tensor::rand([3], pyrite::DType::F32)? };
/// let b = { pyrite::train::seed_everything(7); pyrite::Tensor::rand([3], pyrite::DType::F32)? };
/// assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn seed_everything(seed: u64) -> u64 {
    pyrite_core::manual_seed(seed);
    seed
}
