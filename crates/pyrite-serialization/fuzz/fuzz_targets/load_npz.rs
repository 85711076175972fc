//! Feeds arbitrary bytes to the `.npz` reader (zip container, deflate, `.npy` headers): it
//! must return `Ok` or `Err`, never panic, hang or exhaust memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pyrite_serialization::npz::load_from_bytes(data);
});
