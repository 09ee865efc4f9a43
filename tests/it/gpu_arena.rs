//! The TensorRT scratch arena on a real device, without TensorRT: the arena only allocates device
//! memory and hands out its address, so its sharing and its growth rules can be checked where no
//! libnvinfer exists. Free memory is read with `cuMemGetInfo`, so the figures are only meaningful
//! with nothing else allocating at the same time: run with `--test-threads=1`, as the other GPU
//! tests. They run only with `JETSON_DETECTD_GPU_TESTS=1 cargo test --features cuda,tensorrt`.

use std::io::Write;
use std::sync::{Arc, Barrier};

use jetson_detectd::backend::trt::arena::{arena_report, ArenaLease};
use jetson_detectd::backend::trt::arena_plan::ArenaPlan;

use super::gpu::gpu_or_skip;

const MIB: u64 = 1 << 20;
/// The scratch requirements of four cameras' contexts (different models or input sizes).
const REQUIREMENTS: [u64; 4] = [48 * MIB, 160 * MIB, 96 * MIB, 128 * MIB];
/// What the driver may add to an allocation (its granularity) or keep for its own bookkeeping.
const SLACK: u64 = 16 * MIB;

fn free_bytes() -> u64 {
    cudarc::driver::result::mem_get_info().expect("cuMemGetInfo").0 as u64
}

#[test]
fn the_contexts_of_one_worker_lease_one_buffer_and_separate_workers_one_each() {
    let Some(device) = gpu_or_skip("the_contexts_of_one_worker_lease_one_buffer_and_separate_workers_one_each") else {
        return;
    };
    let largest = *REQUIREMENTS.iter().max().unwrap_or(&0);
    let total: u64 = REQUIREMENTS.iter().sum();

    device.bind_to_thread().expect("bind the context");
    let before = free_bytes();
    let leases: Vec<ArenaLease> = REQUIREMENTS
        .iter()
        .map(|bytes| ArenaLease::acquire(0, device.context(), *bytes).expect("lease scratch"))
        .collect();
    let shared_used = before.saturating_sub(free_bytes());
    let first = leases[0].memory();
    assert!(leases.iter().all(|lease| lease.memory() == first), "every lease points into one buffer");
    assert_eq!(first.1, largest, "the buffer is as large as the largest requirement");
    assert_eq!(arena_report(), ArenaPlan { arena_bytes: largest, separate_bytes: total, saved_bytes: total - largest });
    drop(leases);
    assert!(
        (largest..largest + SLACK).contains(&shared_used),
        "one worker's 4 contexts took {shared_used} bytes, expected about {largest}"
    );
    assert_eq!(arena_report(), ArenaPlan::default(), "the last lease frees the arena");

    // One worker per camera: each thread has its own arena, as each per-camera GPU thread had.
    let before = free_bytes();
    let leased = Arc::new(Barrier::new(REQUIREMENTS.len() + 1));
    let measured = Arc::new(Barrier::new(REQUIREMENTS.len() + 1));
    let workers: Vec<_> = REQUIREMENTS
        .iter()
        .map(|bytes| {
            let (device, bytes) = (device.clone(), *bytes);
            let (leased, measured) = (Arc::clone(&leased), Arc::clone(&measured));
            std::thread::spawn(move || {
                device.bind_to_thread().expect("bind the context");
                let lease = ArenaLease::acquire(0, device.context(), bytes).expect("lease scratch");
                leased.wait();
                measured.wait();
                drop(lease);
            })
        })
        .collect();
    leased.wait();
    let separate_used = before.saturating_sub(free_bytes());
    assert_eq!(arena_report(), ArenaPlan { arena_bytes: total, separate_bytes: total, saved_bytes: 0 });
    measured.wait();
    for worker in workers {
        worker.join().expect("worker thread");
    }
    assert!(
        (total..total + 4 * SLACK).contains(&separate_used),
        "4 workers took {separate_used} bytes, expected about {total}"
    );
    let _ = writeln!(
        std::io::stderr(),
        "scratch of 4 contexts ({} MiB needed in all, {} MiB the largest): one worker, one arena: {} MiB of \
         device memory used; one worker per camera, 4 arenas: {} MiB (cuMemGetInfo before/after)",
        total / MIB,
        largest / MIB,
        shared_used / MIB,
        separate_used / MIB
    );
}

#[test]
fn a_growth_that_cannot_be_allocated_leaves_every_lease_as_it_was() {
    let Some(device) = gpu_or_skip("a_growth_that_cannot_be_allocated_leaves_every_lease_as_it_was") else { return };
    device.bind_to_thread().expect("bind the context");
    let first = ArenaLease::acquire(0, device.context(), 64 * MIB).expect("lease scratch");
    let (memory, report, free) = (first.memory(), arena_report(), free_bytes());

    let error =
        ArenaLease::acquire(0, device.context(), 1 << 50).err().expect("a petabyte of scratch cannot be allocated");
    assert!(error.to_string().contains("cannot allocate"), "{error}");
    assert_eq!(first.memory(), memory, "the existing lease still points at its buffer");
    assert_eq!(arena_report(), report, "the failed lease is not counted");
    assert!(free_bytes().abs_diff(free) < SLACK, "the old buffer was neither freed nor duplicated");

    let second = ArenaLease::acquire(0, device.context(), 128 * MIB).expect("a growth that fits");
    assert_eq!(first.memory(), second.memory(), "after a growth both leases see the new buffer");
    assert_eq!(second.memory().1, 128 * MIB);
}

/// Stand-in scratch sizes of the contexts one worker holds when it serves two detectors and a
/// classifier (issue 32): a YOLO-size detector batched for 4 cameras, an SSD, a small classifier
/// batched for 16 crops. Added one model at a time, as a worker creates its sessions.
const MODELS: [(&str, u64); 3] = [("detector A", 210 * MIB), ("detector B", 72 * MIB), ("classifier", 36 * MIB)];

#[test]
fn the_contexts_of_every_model_a_worker_serves_take_the_largest_scratch_not_the_sum() {
    let Some(device) = gpu_or_skip("the_contexts_of_every_model_a_worker_serves_take_the_largest_scratch_not_the_sum")
    else {
        return;
    };
    device.bind_to_thread().expect("bind the context");
    let before = free_bytes();
    let mut leases = Vec::new();
    let mut lines = Vec::new();
    for (count, (model, bytes)) in MODELS.iter().enumerate() {
        leases.push(ArenaLease::acquire(0, device.context(), *bytes).expect("lease scratch"));
        let used = before.saturating_sub(free_bytes());
        let report = arena_report();
        let largest = MODELS[..=count].iter().map(|(_, bytes)| *bytes).max().unwrap_or(0);
        let sum: u64 = MODELS[..=count].iter().map(|(_, bytes)| *bytes).sum();
        assert_eq!(report, ArenaPlan { arena_bytes: largest, separate_bytes: sum, saved_bytes: sum - largest });
        assert!((largest..largest + SLACK).contains(&used), "{used} bytes used for {largest} of scratch");
        lines.push(format!(
            "+ {model} ({} MiB): arena {} MiB, one allocation per context {} MiB, saved {} MiB, device memory used {} MiB",
            bytes / MIB,
            report.arena_bytes / MIB,
            report.separate_bytes / MIB,
            report.saved_bytes / MIB,
            used / MIB
        ));
    }
    let buffer = leases[0].memory();
    assert!(leases.iter().all(|lease| lease.memory() == buffer), "every model's context points into one buffer");
    drop(leases);
    assert_eq!(arena_report(), ArenaPlan::default());
    let _ = writeln!(std::io::stderr(), "scratch of the models of one worker:\n{}", lines.join("\n"));
}
