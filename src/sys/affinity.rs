//! Which CPUs a thread may run on (`sched_getaffinity`, `sched_setaffinity`), for the CPU
//! backend's workers, each kept to its own share of the cores.
//!
//! Owns: the two calls and their safety. Must not: decide which CPUs a thread gets (the caller's
//! budget does) or touch any thread but the calling one.

use std::io;

/// The CPUs the calling thread may run on, in increasing order: the process's set (`taskset`,
/// systemd's `CPUAffinity=`, a cgroup's cpuset) unless this thread was narrowed since.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = current_set()?;
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads bit `cpu` of `set`, which holds CPU_SETSIZE bits.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Keeps the calling thread (and every thread it creates from now on, which inherit the set) to
/// `cpus`. An empty list, or CPUs this process may not use, is an error and changes nothing.
pub fn keep_current_thread_to(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() || cpus.iter().any(|&cpu| cpu >= libc::CPU_SETSIZE as usize) {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut set = empty_set();
    for &cpu in cpus {
        // SAFETY: CPU_SET writes bit `cpu` of `set`, and `cpu` is below CPU_SETSIZE (checked).
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of the size passed.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn current_set() -> io::Result<libc::cpu_set_t> {
    let mut set = empty_set();
    // SAFETY: pid 0 is the calling thread; the kernel writes at most the size passed into `set`.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(set)
}

fn empty_set() -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set (what CPU_ZERO writes).
    unsafe { std::mem::zeroed() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_kept_to_one_cpu_runs_on_it_alone_and_its_children_inherit_the_set() {
        std::thread::spawn(|| {
            let allowed = allowed_cpus().expect("sched_getaffinity");
            assert!(!allowed.is_empty());
            let last = *allowed.last().expect("a CPU");
            keep_current_thread_to(&[last]).expect("sched_setaffinity");
            assert_eq!(allowed_cpus().expect("again"), [last]);
            let child = std::thread::spawn(|| allowed_cpus().expect("child")).join().expect("join");
            assert_eq!(child, [last], "a thread started by a kept thread is kept alike");
        })
        .join()
        .expect("the test thread");
    }

    #[test]
    fn no_cpus_or_an_impossible_cpu_is_refused_and_changes_nothing() {
        std::thread::spawn(|| {
            let before = allowed_cpus().expect("sched_getaffinity");
            assert!(keep_current_thread_to(&[]).is_err());
            assert!(keep_current_thread_to(&[libc::CPU_SETSIZE as usize]).is_err());
            assert_eq!(allowed_cpus().expect("after"), before);
        })
        .join()
        .expect("the test thread");
    }
}
