//! The process's resource limits, as far as the daemon sizes its own use by them.
//!
//! Owns: reading `RLIMIT_NOFILE`. Must not: change a limit (systemd's `LimitNOFILE=` sets it).

/// The soft limit on open file descriptors; `None` when it cannot be read or is unlimited.
pub fn open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one `rlimit` through the valid, exclusive pointer it is given.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (status == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_open_files_limit_is_read() {
        let limit = super::open_files_limit().expect("RLIMIT_NOFILE");
        assert!(limit >= 3, "{limit}: stdin, stdout and stderr at least");
    }
}
