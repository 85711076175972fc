//! GPUtil's rules on synthetic GPUs. The expected ids and tables were produced by GPUtil 1.4.0
//! itself (`getGPUs` replaced by these three GPUs; see the comment on `three`).

use pyrite_cuda::*;

const NAN: f64 = f64::NAN;

#[allow(clippy::too_many_arguments)]
fn gpu(
    id: usize,
    uuid: &str,
    load: f64,
    total: f64,
    used: f64,
    free: f64,
    name: &str,
    serial: &str,
    mode: &str,
    active: &str,
    temp: f64,
) -> Gpu {
    Gpu::from(GpuRecord {
        id,
        uuid: uuid.into(),
        name: name.into(),
        load,
        memory_total: total,
        memory_used: used,
        memory_free: free,
        temperature: temp,
        driver: "550.54.15".into(),
        serial: serial.into(),
        display_mode: mode.into(),
        display_active: active.into(),
    })
}

/// In GPUtil:
/// `GPU(0,'GPU-aaaa',0.9,81559.0,8155.0,73404.0,'550.54.15','NVIDIA H100 80GB HBM3','1650923000001','Enabled','Disabled',41.0)`,
/// `GPU(1,'GPU-bbbb',0.0,81559.0,0.0,81559.0,...,'1650923000002','Disabled','Disabled',nan)`,
/// `GPU(10,'GPU-cccc',nan,24576.0,20000.0,4576.0,...,'NVIDIA GeForce RTX 4090','[N/A]','Disabled','Enabled',67.0)`.
fn three() -> Vec<Gpu> {
    vec![
        gpu(
            0,
            "GPU-aaaa",
            0.9,
            81559.0,
            8155.0,
            73404.0,
            "NVIDIA H100 80GB HBM3",
            "1650923000001",
            "Enabled",
            "Disabled",
            41.0,
        ),
        gpu(
            1,
            "GPU-bbbb",
            0.0,
            81559.0,
            0.0,
            81559.0,
            "NVIDIA H100 80GB HBM3",
            "1650923000002",
            "Disabled",
            "Disabled",
            NAN,
        ),
        gpu(
            10,
            "GPU-cccc",
            NAN,
            24576.0,
            20000.0,
            4576.0,
            "NVIDIA GeForce RTX 4090",
            "[N/A]",
            "Disabled",
            "Enabled",
            67.0,
        ),
    ]
}

fn opts(order: Order, limit: usize) -> GetAvailableOptions {
    GetAvailableOptions { order, limit, ..Default::default() }
}

/// Everything passes the thresholds; unknown values count as available.
fn loose(order: Order, limit: usize) -> GetAvailableOptions {
    GetAvailableOptions { max_load: 1.0, max_memory: 1.0, include_nan: true, ..opts(order, limit) }
}

#[test]
fn defaults_are_gputils() {
    let o = GetAvailableOptions::default();
    assert_eq!((o.order, o.limit, o.max_load, o.max_memory, o.memory_free), (Order::First, 1, 0.5, 0.5, 0.0));
    assert!(!o.include_nan && o.exclude_id.is_empty() && o.exclude_uuid.is_empty());
    let f = GetFirstAvailableOptions::default();
    assert_eq!((f.attempts, f.interval.as_secs(), f.verbose), (1, 900, false));
}

#[test]
fn memory_util_is_used_over_total() {
    let g = three();
    assert_eq!(g[0].memory_util, 8155.0 / 81559.0);
    assert_eq!(g[1].memory_util, 0.0);
    assert!(gpu(0, "", 0.0, 0.0, 0.0, 0.0, "", "", "", "", 0.0).memory_util.is_nan());
}

#[test]
fn thresholds_and_nan() {
    let g = three();
    // getAvailable(limit=5): GPU 0 is too busy, GPU 10's load is unknown.
    assert_eq!(get_available_from(&g, &opts(Order::First, 5)).unwrap(), vec![1]);
    // includeNan=True: GPU 10's NaN load passes, its memory (81%) does not.
    let o = GetAvailableOptions { include_nan: true, ..opts(Order::First, 5) };
    assert_eq!(get_available_from(&g, &o).unwrap(), vec![1]);
    assert_eq!(availability(&g, &o), vec![false, true, false]);
    // Strictly less than: a load of exactly max_load is busy.
    let o = GetAvailableOptions { max_load: 0.9, max_memory: 1.0, ..opts(Order::First, 5) };
    assert_eq!(available_ids(&g, &o), vec![1]);
    let o = GetAvailableOptions { max_load: 0.91, max_memory: 1.0, ..opts(Order::First, 5) };
    assert_eq!(available_ids(&g, &o), vec![0, 1]);
    // memoryFree=5000 drops GPU 10 (4576 MB free), NaN or not.
    let o = GetAvailableOptions { memory_free: 5000.0, ..loose(Order::Memory, 2) };
    assert_eq!(available_ids(&g, &o), vec![1, 0]);
    // A NaN free memory never passes memoryFree, even with includeNan.
    let unknown = vec![gpu(3, "u", NAN, NAN, NAN, NAN, "", "", "", "", NAN)];
    assert_eq!(available_ids(&unknown, &loose(Order::First, 5)), Vec::<usize>::new());
    let mut no_free = loose(Order::First, 5);
    no_free.memory_free = f64::NEG_INFINITY;
    assert_eq!(available_ids(&unknown, &no_free), Vec::<usize>::new());
}

#[test]
fn order_modes() {
    let g = three();
    assert_eq!(available_ids(&g, &loose(Order::First, 5)), vec![0, 1, 10]);
    assert_eq!(available_ids(&g, &loose(Order::Last, 5)), vec![10, 1, 0]);
    // NaN load last.
    assert_eq!(available_ids(&g, &loose(Order::Load, 5)), vec![1, 0, 10]);
    // Lowest memory utilization first: 0%, 10%, 81%.
    assert_eq!(available_ids(&g, &loose(Order::Memory, 5)), vec![1, 0, 10]);
    // Ties keep device order (Python's sort is stable).
    let same: Vec<Gpu> =
        [4, 2, 7].iter().map(|&i| gpu(i, "", 0.1, 100.0, 10.0, 90.0, "", "", "", "", 0.0)).collect();
    assert_eq!(available_ids(&same, &loose(Order::Load, 5)), vec![4, 2, 7]);
    assert_eq!(available_ids(&same, &loose(Order::First, 5)), vec![2, 4, 7]);
    // Random: a permutation of the available ones.
    for _ in 0..20 {
        let mut r = available_ids(&g, &loose(Order::Random, 5));
        r.sort();
        assert_eq!(r, vec![0, 1, 10]);
    }
    assert_eq!("memory".parse::<Order>().unwrap(), Order::Memory);
    assert!("fastest".parse::<Order>().is_err());
}

#[test]
fn limits() {
    let g = three();
    assert_eq!(available_ids(&g, &loose(Order::Last, 1)), vec![10]);
    assert_eq!(available_ids(&g, &loose(Order::Last, 2)), vec![10, 1]);
    assert_eq!(available_ids(&g, &loose(Order::Last, 0)), Vec::<usize>::new());
    assert_eq!(available_ids(&g, &loose(Order::Last, usize::MAX)), vec![10, 1, 0]);
    assert_eq!(available_ids(&[], &loose(Order::First, 3)), Vec::<usize>::new());
}

#[test]
fn exclusions() {
    let g = three();
    let o = GetAvailableOptions {
        exclude_id: vec![0],
        exclude_uuid: vec!["GPU-cccc".into()],
        ..loose(Order::First, 5)
    };
    assert_eq!(available_ids(&g, &o), vec![1]);
    let o = GetAvailableOptions { exclude_uuid: vec!["GPU-bbbb".into()], ..loose(Order::Load, 5) };
    assert_eq!(available_ids(&g, &o), vec![0, 10]);
}

#[test]
fn first_available() {
    let g = three();
    assert_eq!(get_first_available_from(&g, &GetFirstAvailableOptions::default()).unwrap(), 1);
    let o = GetFirstAvailableOptions {
        exclude_id: vec![1],
        attempts: 2,
        interval: std::time::Duration::ZERO,
        ..Default::default()
    };
    let e = get_first_available_from(&g, &o).unwrap_err();
    assert_eq!(e.message(), "Could not find an available GPU after 2 attempts with 0 seconds interval.");
    assert!(get_first_available_from(&Vec::<Gpu>::new(), &GetFirstAvailableOptions::default()).is_err());
}

#[test]
fn table_as_gputil_prints_it() {
    let g = three();
    assert_eq!(
        utilization_table(&g, &default_columns()),
        "| ID | GPU  | MEM |\n-------------------\n|  0 |  90% | 10% |\n|  1 |   0% |  0% |\n| 10 | nan% | 81% |\n"
    );
    let all = "| ID | Name                    | Serial        | UUID     || GPU temp. | GPU util. | Memory util. || Memory total | Memory used | Memory free || Display mode | Display active |\n\
--------------------------------------------------------------------------------------------------------------------------------------------------------------------------------\n\
|  0 | NVIDIA H100 80GB HBM3   | 1650923000001 | GPU-aaaa ||       41C |       90% |          10% ||      81559MB |      8155MB |     73404MB || Enabled      | Disabled       |\n\
|  1 | NVIDIA H100 80GB HBM3   | 1650923000002 | GPU-bbbb ||      nanC |        0% |           0% ||      81559MB |         0MB |     81559MB || Disabled     | Disabled       |\n\
| 10 | NVIDIA GeForce RTX 4090 | [N/A]         | GPU-cccc ||       67C |      nan% |          81% ||      24576MB |     20000MB |      4576MB || Disabled     | Enabled        |\n";
    assert_eq!(utilization_table(&g, &all_columns()), all);
    assert_eq!(show_utilization_from(&g, true).unwrap(), all);
    // No GPU: the header and the dashes, as GPUtil.
    assert_eq!(utilization_table(&[], &default_columns()), "| ID | GPU | MEM |\n------------------\n");
}

#[test]
fn table_formats_floats_like_python() {
    // Python's `{:f}` without a precision is 6 decimals; ties round to even, as Python.
    let g = vec![gpu(0, "", 0.125, 2.0, 1.0, 1.0, "", "", "", "", 2.5)];
    let cols = vec![vec![
        Column::new(Attr::Load, "L"),
        Column::number(Attr::Temperature, "T", "C", 1.0, 0),
        Column::number(Attr::Load, "P", "%", 100.0, 1),
    ]];
    assert_eq!(
        utilization_table(&g, &cols),
        "| L        | T  | P     |\n-------------------------\n| 0.125000 | 2C | 12.5% |\n"
    );
}

#[test]
fn smi_columns_add_memory_temperature_driver() {
    let g = three();
    let t = utilization_table(&g[..1], &smi_columns(false));
    assert_eq!(
        t,
        "| ID | GPU | MEM || GPU temp. || Memory total | Memory used | Memory free || Driver    |\n\
         ----------------------------------------------------------------------------------------\n\
         |  0 | 90% | 10% ||       41C ||      81559MB |      8155MB |     73404MB || 550.54.15 |\n"
    );
    let t = utilization_table(&g, &smi_columns(true));
    assert!(t.starts_with("| ID | Name ") && t.contains("|| Driver    |") && t.contains("| 550.54.15 |"));
}
