//! Feeds arbitrary bytes to the safetensors reader: it must return `Ok` or `Err`, never panic,
//! hang or exhaust memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pyrite_serialization::safetensors::load_with_metadata(data);
});
