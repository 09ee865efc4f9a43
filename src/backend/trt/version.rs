//! A TensorRT version, as the headers and the library report it.
//!
//! Owns: [`TrtVersion`] and decoding `getInferLibVersion()`'s number. Must not: load TensorRT.

use std::fmt;

/// `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TrtVersion {
    pub major: i32,
    pub minor: i32,
    pub patch: i32,
}

impl fmt::Display for TrtVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl TrtVersion {
    /// Decodes `getInferLibVersion()`: `major*1000 + minor*100 + patch` up to 8.x, `major*10000 +
    /// minor*100 + patch` from 10.0 (the two ranges do not overlap: 8.x codes stay below 10000).
    pub fn from_library_code(code: i32) -> TrtVersion {
        let major_unit = if code >= 10_000 { 10_000 } else { 1_000 };
        TrtVersion { major: code / major_unit, minor: (code % major_unit) / 100, patch: code % 100 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_version_codes_decode_on_both_sides_of_10() {
        let version = |major, minor, patch| TrtVersion { major, minor, patch };
        assert_eq!(TrtVersion::from_library_code(8502), version(8, 5, 2));
        assert_eq!(TrtVersion::from_library_code(8602), version(8, 6, 2));
        assert_eq!(TrtVersion::from_library_code(100300), version(10, 3, 0));
        assert_eq!(TrtVersion::from_library_code(101600), version(10, 16, 0));
        assert_eq!(TrtVersion::from_library_code(110104), version(11, 1, 4));
    }
}
