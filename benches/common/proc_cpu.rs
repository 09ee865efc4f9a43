//! CPU time as Linux counts it in /proc, for the benches that report CPU time per frame
//! (`gst_capture`, `record`); each includes this file with `#[path]`.
//!
//! Bench code: a /proc file that is missing or malformed panics (the bench cannot measure without
//! it). It only reads counters; timing and reporting stay with each bench.

use std::time::Duration;

/// CPU time of the calling thread (the scheduler's own count, in nanoseconds).
pub fn thread_cpu_time() -> Duration {
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("/proc/thread-self/schedstat");
    Duration::from_nanos(schedstat.split_whitespace().next().and_then(|ns| ns.parse().ok()).expect("run time"))
}

/// CPU time of the whole process, every thread (utime + stime, in clock ticks of 10 ms).
pub fn process_cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command name, which is in parentheses and may contain spaces.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    Duration::from_millis(fields.iter().sum::<u64>() * 10)
}
