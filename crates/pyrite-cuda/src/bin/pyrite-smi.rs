//! `pyrite-smi`: the GPUs as GPUtil's `showUtilization` shows them (plus temperature, memory in
//! MB and the driver) and Pyrite's own CPU allocator figures. Without an NVIDIA driver it says
//! so in one line and still exits 0.

use clap::{Arg, ArgAction, Command};
use pyrite_core::Device;

fn main() {
    let matches = Command::new("pyrite-smi")
        .about("GPU status (as GPUtil shows it, through NVML) and Pyrite's allocator figures")
        .arg(Arg::new("all").long("all").action(ArgAction::SetTrue).help("Show all columns"))
        .get_matches();
    let all = matches.get_flag("all");

    match pyrite_cuda::gpus() {
        Ok(gpus) if gpus.is_empty() => {
            let why = pyrite_cuda::no_gpu_reason().unwrap_or_else(|| "no NVIDIA GPU".into());
            println!("pyrite-smi: {why}");
        }
        Ok(gpus) => {
            println!("{}", pyrite_cuda::nvml_status());
            print!("{}", pyrite_cuda::utilization_table(&gpus, &pyrite_cuda::smi_columns(all)));
        }
        Err(e) => println!("pyrite-smi: cannot read the GPUs: {e}"),
    }
    match pyrite_cuda::allocator_line(Device::Cpu) {
        Ok(line) => println!("{line}"),
        Err(e) => println!("pyrite-smi: cannot read the allocator: {e}"),
    }
}
