//! Who may read a file: users and groups by name and id, and the permission bits along a path as a
//! reader who is neither root nor the file's owner sees them (the service's transient user).
//!
//! Owns: the name lookups (through the C library, so NSS sources count as they do for systemd) and
//! the permission-bit rule: a directory on the way must be searchable and the file readable by the
//! reader's group when the group matches, else by others. Must not: open or read a file (callers
//! do, bounded: [`super::files`]), or know which files are secrets.

use std::ffi::{c_char, CStr, CString};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The largest buffer a name lookup may use (a group with thousands of members needs more than
/// the first try's).
const MAX_LOOKUP_BUFFER: usize = 1 << 20;

/// Whether this process runs as root (effective user id 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// This process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Runs one re-entrant lookup (`getgrnam_r` and friends) with a growing buffer; `lookup` gets the
/// buffer and returns the call's status and whether it found an entry.
fn with_buffer<T>(mut lookup: impl FnMut(&mut [c_char]) -> (i32, Option<T>)) -> Option<T> {
    let mut size = 4096;
    loop {
        let mut buffer = vec![0 as c_char; size];
        match lookup(&mut buffer) {
            (libc::ERANGE, _) if size < MAX_LOOKUP_BUFFER => size *= 4,
            (0, found) => return found,
            _ => return None,
        }
    }
}

/// The id of group `name`, if this machine has one.
pub fn group_id(name: &str) -> Option<u32> {
    let name = CString::new(name).ok()?;
    with_buffer(|buffer| {
        // SAFETY: `group` is plain old data, for which all-zero bytes are a valid value.
        let mut group: libc::group = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: `name` is NUL-terminated; `group` and `found` are exclusive out-pointers and
        // `buffer` is writable for its length, all valid for the duration of the call.
        let status =
            unsafe { libc::getgrnam_r(name.as_ptr(), &mut group, buffer.as_mut_ptr(), buffer.len(), &mut found) };
        (status, (!found.is_null()).then_some(group.gr_gid))
    })
}

/// The name of group `gid`, or its number when it has none.
pub fn group_name(gid: u32) -> String {
    with_buffer(|buffer| {
        // SAFETY: `group` is plain old data, for which all-zero bytes are a valid value.
        let mut group: libc::group = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: `group` and `found` are exclusive out-pointers and `buffer` is writable for its
        // length, all valid for the duration of the call.
        let status = unsafe { libc::getgrgid_r(gid, &mut group, buffer.as_mut_ptr(), buffer.len(), &mut found) };
        let name = (!found.is_null() && !group.gr_name.is_null()).then(|| {
            // SAFETY: on success gr_name points at a NUL-terminated string inside `buffer`, which
            // lives until the end of this closure; it is copied out here.
            unsafe { CStr::from_ptr(group.gr_name) }.to_string_lossy().into_owned()
        });
        (status, name)
    })
    .unwrap_or_else(|| gid.to_string())
}

/// The name of user `uid`, or its number when it has none (a transient user outside its service).
pub fn user_name(uid: u32) -> String {
    with_buffer(|buffer| {
        // SAFETY: `passwd` is plain old data, for which all-zero bytes are a valid value.
        let mut user: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: `user` and `found` are exclusive out-pointers and `buffer` is writable for its
        // length, all valid for the duration of the call.
        let status = unsafe { libc::getpwuid_r(uid, &mut user, buffer.as_mut_ptr(), buffer.len(), &mut found) };
        let name = (!found.is_null() && !user.pw_name.is_null()).then(|| {
            // SAFETY: on success pw_name points at a NUL-terminated string inside `buffer`, which
            // lives until the end of this closure; it is copied out here.
            unsafe { CStr::from_ptr(user.pw_name) }.to_string_lossy().into_owned()
        });
        (status, name)
    })
    .unwrap_or_else(|| uid.to_string())
}

/// Owner, group and permission bits of a file, as `ls -l` would name them: `root:jetson-detectd 0640`.
pub fn describe(metadata: &std::fs::Metadata) -> String {
    format!("{}:{} {:04o}", user_name(metadata.uid()), group_name(metadata.gid()), metadata.mode() & 0o7777)
}

/// Why a reader that is neither root nor the owner of anything on the way, and whose groups are
/// `groups`, cannot read `path`; `None` when it can. Each directory on the way must grant search
/// (`x`) and the file read (`r`), to the reader's group when the entry's group is one of `groups`,
/// else to others: the kernel's rule, owner bits aside.
pub fn denied_to_group_reader(path: &Path, groups: &[u32]) -> Option<String> {
    let allows = |metadata: &std::fs::Metadata, group_bit: u32, other_bit: u32| {
        let bit = if groups.contains(&metadata.gid()) { group_bit } else { other_bit };
        metadata.mode() & bit != 0
    };
    let mut directory = Path::new("/").to_path_buf();
    let parent = path.parent().unwrap_or(Path::new("/"));
    for component in std::iter::once(None).chain(parent.components().skip(1).map(Some)) {
        if let Some(component) = component {
            directory.push(component);
        }
        let metadata = match std::fs::metadata(&directory) {
            Ok(metadata) => metadata,
            Err(e) => return Some(format!("directory {}: {e}", directory.display())),
        };
        if !allows(&metadata, 0o010, 0o001) {
            return Some(format!("directory {} ({}) may not be searched", directory.display(), describe(&metadata)));
        }
    }
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) => return Some(e.to_string()),
    };
    (!allows(&metadata, 0o040, 0o004)).then(|| format!("the file is {}", describe(&metadata)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn a_group_reader_needs_the_group_bits_when_the_group_matches_and_the_other_bits_otherwise() {
        let dir = tempfile::tempdir().expect("tempdir");
        chmod(dir.path(), 0o755);
        let secret = dir.path().join("porch.pw");
        std::fs::write(&secret, "pw\n").expect("write");
        let gid = std::fs::metadata(&secret).expect("stat").gid();
        let stranger = gid.wrapping_add(1);
        chmod(&secret, 0o640);
        assert_eq!(denied_to_group_reader(&secret, &[gid]), None, "in the file's group");
        let denied = denied_to_group_reader(&secret, &[stranger]).expect("others may not read");
        assert!(denied.contains("0640"), "{denied}");
        chmod(&secret, 0o604);
        assert!(denied_to_group_reader(&secret, &[gid]).is_some(), "the group's own bits apply, not the others'");
        assert_eq!(denied_to_group_reader(&secret, &[stranger]), None);
    }

    #[test]
    fn a_directory_on_the_way_must_be_searchable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let private = dir.path().join("private");
        std::fs::create_dir(&private).expect("mkdir");
        let secret = private.join("token");
        std::fs::write(&secret, "t\n").expect("write");
        chmod(&secret, 0o644);
        chmod(dir.path(), 0o755);
        chmod(&private, 0o700);
        let gid = std::fs::metadata(&private).expect("stat").gid();
        let denied = denied_to_group_reader(&secret, &[gid.wrapping_add(1)]).expect("denied");
        assert!(denied.contains(&private.display().to_string()) && denied.contains("searched"), "{denied}");
        chmod(&private, 0o711);
        assert_eq!(denied_to_group_reader(&secret, &[gid.wrapping_add(1)]), None);
    }

    #[test]
    fn names_are_looked_up_and_numbers_stand_in_for_unknown_ids() {
        assert_eq!(group_id("root"), Some(0));
        assert_eq!(group_name(0), "root");
        assert_eq!(user_name(0), "root");
        assert_eq!(group_id("no-such-group-jetson-detectd-test"), None);
        assert_eq!(user_name(4_000_000_000), "4000000000");
    }
}
